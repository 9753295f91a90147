"""Damaged model files of every format aiot reads, through ``aiot models info`` and ``aiot run``:
aiot itself must never crash, print a traceback or hang on them (issue 35, "bytes crash aiot").

For each format an original is made with ``aiot convert`` (or taken from ``--originals DIR``),
then ``--count`` seeded mutants of it (bit flips, random byte runs, truncation, zeroed ranges,
header damage) each go through ``models info MUTANT`` and ``run --model MUTANT`` with the
cheapest timing flags. The CLI runs in-process in a long-lived worker child, as the real CLI
would in its own process: a native crash kills that worker only (it is restarted, and the
mutant counted as a crash of aiot), and a command past ``--timeout`` is a hang. A format whose
toolchain is missing is skipped with the reason.

Each mutant's outcome is its worse command's: ``ok`` (exit 0), ``refused`` (exit 1 or 2 with
one ``error:`` line: naming the file, or an emit-only format's), ``failed`` (``run`` only: the
check passed and the run's record failed on the device, its reason in the table), ``unclear``
(exit 1 or 2 otherwise), ``traceback``, ``bad_exit`` (an exit status outside 0, 1, 2),
``hang``, ``crash``. "runtime died" counts the refusals (per command) where the runtime
crashed or hung reading the file and aiot said so in one line.
Usage: ``python bench/fuzz_artifacts.py [--count 200] [--formats tflite,onnx] [--seed 0]``;
writes ``bench/out/fuzz_artifacts.json`` (``--out NAME``: ``bench/out/NAME.json``, so that
one format's run does not replace the file of all of them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: format: (zoo model, ``aiot convert`` format, the original's file name, toolchain needed).
FORMATS = {
    "tflite": ("tiny_cnn", "tflite", "tiny_cnn.tflite", None),
    "lce": ("tiny_cnn_bnn", "lce", "tiny_cnn.bnn.lce.tflite", "lce"),
    "onnx": ("tiny_cnn", "onnx", "tiny_cnn.onnx", None),
    "ort": ("tiny_cnn", "ort", "tiny_cnn.ort", None),
    "executorch": ("tiny_cnn", "executorch", "tiny_cnn.executorch.pte", "executorch"),
    "ptl": ("tiny_cnn", "ptl", "tiny_cnn.ptl", None),
    "dabnn": ("tiny_bnn", "dabnn", "tiny_bnn.dabnn.dab", None),
    "caffe2": ("tiny_cnn", "caffe2", "tiny_cnn.caffe2.predict_net.pb", None),
}
#: The cheapest ``run`` that still reaches the check before any record, and runs when it passes.
RUN_FLAGS = ["--device", "local", "--min-runs", "2", "--min-s", "0", "--warmup-runs", "1",
             "--warmup-min-s", "0", "--max-s", "5", "--timeout", "60"]
SEVERITY = ["ok", "refused", "failed", "unclear", "bad_exit", "traceback", "hang", "crash"]
#: How a refusal says the runtime died or hung reading the file (in a forked child, or a
#: toolchain's interpreter) rather than refused it.
CAUGHT = ("runtime crashed reading it", "did not finish reading it", "runtime quit reading it",
          "runtime failed reading it (")
MUTATIONS = ("bit_flips", "byte_run", "truncation", "zeroed_range", "header")


# -- mutants -----------------------------------------------------------------------------------

def mutate(data: bytes, rng: random.Random) -> tuple[str, bytes]:
    """One seeded mutation of ``data``: ``(kind, mutated bytes)``."""
    kind = rng.choice(MUTATIONS)
    out = bytearray(data)
    n = len(out)
    if kind == "bit_flips":
        for _ in range(rng.randint(1, 8)):
            i = rng.randrange(n)
            out[i] ^= 1 << rng.randrange(8)
    elif kind == "byte_run":
        start, length = rng.randrange(n), rng.randint(1, 64)
        out[start:start + length] = rng.randbytes(min(length, n - start))
    elif kind == "truncation":
        out = out[:rng.randrange(n)]
    elif kind == "zeroed_range":
        start, length = rng.randrange(n), rng.randint(1, 4096)
        out[start:start + length] = bytes(min(length, n - start))
    else:  # the header and the tables a flatbuffer or zip directory keeps near either end
        for _ in range(rng.randint(1, 6)):
            at_start = rng.random() < 0.5
            i = rng.randrange(min(64, n)) if at_start else n - 1 - rng.randrange(min(256, n))
            out[i] = rng.randrange(256)
    return kind, bytes(out)


def write_mutant(original: Path, folder: Path, index: int, rng: random.Random) -> tuple[Path, str]:
    """Mutant ``index`` of ``original`` in its own folder (with an untouched or mutated
    companion: a Caffe2 init net beside its predict net); returns ``(path, description)``."""
    from aiot.core.companions import init_net_path

    target_dir = folder / f"m{index:04d}"
    target_dir.mkdir(parents=True, exist_ok=True)
    path = target_dir / original.name
    companion = init_net_path(original) if original.name.endswith("predict_net.pb") else None
    victim = original
    if companion is not None:
        shutil.copyfile(companion, target_dir / companion.name)
        victim = companion if rng.random() < 0.5 else original
        shutil.copyfile(original, path)
    kind, data = mutate(victim.read_bytes(), rng)
    (target_dir / victim.name).write_bytes(data)
    return path, f"{kind} of {victim.name}"


# -- originals ---------------------------------------------------------------------------------

def make_original(fmt: str, folder: Path, originals: Path | None) -> tuple[Path | None, str]:
    """The original file of ``fmt`` (from ``originals`` or ``aiot convert``), or None and why."""
    model, convert_format, name, toolchain = FORMATS[fmt]
    if originals is not None and (originals / name).is_file():
        return originals / name, "given"
    if toolchain is not None:
        from aiot.core.toolchains import python

        if python(toolchain) is None:
            return None, (f"the '{toolchain}' toolchain is not installed "
                          f"(aiot toolchains install {toolchain})")
    out = folder / "originals"
    proc = subprocess.run([sys.executable, "-m", "aiot", "convert", model, "-f", convert_format,
                           "--out", str(out)], capture_output=True, text=True, check=False)
    if proc.returncode != 0 or not (out / name).is_file():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"aiot convert {model} -f {convert_format} failed: {tail}"
    return out / name, "aiot convert"


# -- the worker: the CLI in-process, one command per line ---------------------------------------

def worker() -> None:
    """Read JSON argv lists on stdin, run each through the Typer app in this process, answer
    one JSON line each (exit code, output, whether an exception escaped)."""
    reply = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the runtimes' native chatter must not mix with the answers
    os.dup2(devnull, 2)
    import importlib
    import pkgutil

    from typer.testing import CliRunner

    import aiot.host.cli
    from aiot.core import isolation
    from aiot.host.cli.app import app

    for module in pkgutil.iter_modules(aiot.host.cli.__path__):
        importlib.import_module(f"aiot.host.cli.{module.name}")
    isolation.TIMEOUT_S = float(os.environ.get("FUZZ_PARSE_TIMEOUT_S", "60"))
    runner = CliRunner()
    for line in sys.stdin:
        t0 = time.monotonic()
        result = runner.invoke(app, json.loads(line))
        escaped = result.exception is not None and not isinstance(result.exception, SystemExit)
        reply.write(json.dumps({"exit_code": result.exit_code, "stdout": result.stdout[-4000:],
                                "stderr": result.stderr[-4000:],
                                "exception": repr(result.exception)[:300] if escaped else None,
                                "seconds": round(time.monotonic() - t0, 2)})
                    + "\n")


class Worker:
    """The worker child, restarted after it dies or hangs."""

    def __init__(self, env: dict, timeout: float) -> None:
        self.env, self.timeout, self.proc = env, timeout, None
        self.restarts = 0

    def _start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, __file__, "--worker"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, env=self.env, text=True, bufsize=1)

    def run(self, argv: list[str]) -> dict:
        """One command's answer, or ``{"crash": …}`` / ``{"hang": …}``."""
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        self.proc.stdin.write(json.dumps(argv) + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        line = self.proc.stdout.readline() if ready else None
        if line:
            return json.loads(line)
        if line is None:
            self.stop()
            return {"hang": f"no answer within {self.timeout:.0f} s"}
        code = self.proc.wait()
        self.proc = None
        self.restarts += 1
        return {"crash": f"worker died: exit status {code}"
                         + (f" (signal {-code})" if code < 0 else "")}

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self.restarts += 1

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def judge(answer: dict, file_name: str) -> str:
    """One command's outcome (see the module's docstring)."""
    if "crash" in answer:
        return "crash"
    if "hang" in answer:
        return "hang"
    code = answer["exit_code"]
    if code >= 128 or code < 0:
        return "crash"
    text = answer["stdout"] + answer["stderr"]
    if answer["exception"] or "Traceback (most recent call last)" in text:
        return "traceback"
    if code not in (0, 1, 2):
        return "bad_exit"
    if code == 0:
        return "ok"
    errors = [line for line in answer["stderr"].splitlines() if line.startswith("error:")]
    if len(errors) == 1:  # naming the file, or the format's (an emit-only one's) refusal
        return "refused"
    failed_record = f"[1/1] {file_name}" in text and "failed local: " in text
    return "failed" if not errors and code == 1 and failed_record else "unclear"


def fuzz_format(fmt: str, original: Path, count: int, seed: int, folder: Path,
                worker_: Worker) -> dict:
    """``count`` mutants of ``original`` through both commands; the tally and the non-ok
    cases."""
    rng = random.Random(f"{seed}:{fmt}")
    tally = dict.fromkeys(SEVERITY, 0)
    cases = []
    refusals_naming_file, caught, seconds = 0, 0, {"info": 0.0, "run": 0.0}
    t0 = time.monotonic()
    for index in range(count):
        path, what = write_mutant(original, folder / fmt, index, rng)
        outcomes = {}
        for name, argv in (("info", ["models", "info", str(path)]),
                           ("run", ["run", "--model", str(path), *RUN_FLAGS])):
            answer = worker_.run(argv)
            outcomes[name] = judge(answer, path.name)
            if outcomes[name] not in ("ok", "refused", "failed"):
                cases.append({"mutant": index, "mutation": what, "command": name,
                              "outcome": outcomes[name], "answer": answer})
            refused = outcomes[name] == "refused"
            refusals_naming_file += refused and path.name in answer["stderr"]
            caught += refused and any(words in answer["stderr"] for words in CAUGHT)
            seconds[name] += answer.get("seconds", 0.0)
        worst = max(outcomes.values(), key=SEVERITY.index)
        tally[worst] += 1
        if worst == "ok":  # keep only the damaged files worth a look
            shutil.rmtree(path.parent, ignore_errors=True)
    return {"original": str(original), "bytes": original.stat().st_size, "mutants": count,
            **tally, "refusals_naming_file": refusals_naming_file,
            "runtime_deaths_caught": caught,
            "command_seconds": {k: round(v, 1) for k, v in seconds.items()},
            "seconds": round(time.monotonic() - t0, 1), "cases": cases}


def environment(home: Path) -> dict:
    """A private results store, device workdir and inventory for the worker."""
    env = {**os.environ, "AIOT_RESULTS_DIR": str(home / "results"),
           "AIOT_LOCAL_WORKDIR": str(home / "device"), "AIOT_STATE_DIR": str(home / "state"),
           "AIOT_INVENTORY": str(home / "devices.toml"), "AIOT_NO_PROGRESS": "1",
           "AIOT_VALIDITY": "cv=off,load=off,samples=off,tail=off,speed=off", "NO_COLOR": "1", "COLUMNS": "200"}
    for name in ("AIOT_DEVICE", "ANDROID_SERIAL"):
        env.pop(name, None)
    return env


def one_format(fmt: str, folder: Path, args) -> dict:
    """The report of one format (or why it was skipped), with its own worker and store."""
    original, how = make_original(fmt, folder, args.originals)
    if original is None:
        print(f"{fmt}: skipped: {how}", file=sys.stderr)
        return {"skipped": how}
    runner = Worker(environment(folder / "home" / fmt), args.timeout)
    try:
        counts = dict(item.split("=") for item in args.counts.split(",") if item)
        found = fuzz_format(fmt, original, int(counts.get(fmt, args.count)), args.seed, folder,
                            runner)
    finally:
        runner.close()
    print(f"{fmt}: {found['mutants']} mutants in {found['seconds']} s", file=sys.stderr)
    return {**found, "original_from": how, "worker_restarts": runner.restarts}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=200, help="mutants per format")
    parser.add_argument("--formats", default=",".join(FORMATS), help="comma-separated")
    parser.add_argument("--counts", default="", help="per-format counts, e.g. executorch=40")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per command")
    parser.add_argument("--originals", type=Path, help="folder with the original files")
    parser.add_argument("--keep", type=Path, help="keep the mutants here (default: a temp folder)")
    parser.add_argument("--jobs", type=int, default=1, help="formats fuzzed at once")
    parser.add_argument("--out", default="fuzz_artifacts",
                        help="name of the JSON under bench/out (one format's run beside the "
                             "others': e.g. fuzz_artifacts_executorch)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker()
        return
    folder = Path(args.keep or tempfile.mkdtemp(prefix="aiot-fuzz-"))
    formats = args.formats.split(",")
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:  # one worker child per format
        report = dict(zip(formats, pool.map(
            lambda fmt: one_format(fmt, folder, args), formats), strict=True))
    rows = [[fmt, "skipped: " + found["skipped"], *[""] * 9] if "skipped" in found
            else [fmt, found["mutants"], found["ok"], found["refused"],
                  found["runtime_deaths_caught"], found["failed"], found["unclear"],
                  found["crash"], found["traceback"], found["hang"], found["bad_exit"]]
            for fmt, found in report.items()]
    print_table(["format", "mutants", "ok", "refused (1 line)", "runtime died (commands)",
                 "run failed", "unclear", "crashes", "tracebacks", "hangs", "bad exits"], rows)
    path = write_json(args.out, {"count": args.count, "seed": args.seed,
                                         "run_flags": RUN_FLAGS, "formats": report})
    print(f"written: {path}" + ("" if args.keep else f"; mutants in {folder}"))


if __name__ == "__main__":
    main()
