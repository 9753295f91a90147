"""Transports: file throughput and per-run orchestration overhead on local, SSH and ADB devices.

Three device kinds, all on this machine: ``local`` (no transport), an emulated SSH device
(a real OpenSSH sshd on loopback, reached with paramiko) and an emulated ADB device (aiot's
stdlib adbd behind the real ``adb`` server, on a private server port). Emulators are started
and stopped with the product's own ``aiot emulator start|stop``, in a throw-away aiot home.

1. Push and pull throughput (MB/s, 1 MB = 10^6 bytes) of a random file (64 MiB by default):
   every round uses fresh random content, so aiot's content-addressed ``push_file`` really
   sends it (checked), and removes it from the device afterwards; every pull is checked
   against the pushed hash. Files land in the page cache; nothing is fsync'ed.
2. Orchestration overhead of one ``aiot run`` (the real CLI, as a subprocess) in ms:
   (a) from the command being issued to the first timed iteration starting on the device, and
   (b) from the last timed iteration ending to the record being stored in the result store
   (its ``finished_at``, read back from the store; taken as the write transaction starts,
   so the commit itself, well under a millisecond with SQLite's WAL, is not counted).
   (a) includes everything aiot does per run: CLI start-up, the (cached) conversion check,
   device probe, agent hello, pushes, agent start, model load, first inference; the agent's
   own share (load + first inference) is reported apart. One untimed cold run per device
   first deploys the agent and converts the model.

Clocks: (a) and (b) subtract the agent's wall-clock timestamps (``measure_start_unix_s``,
``measure_end_unix_s``, the device's ``time.time()``) from the host's. Here every device runs
on this machine, so both sides read the same clock. On real devices the offset between the
device and host clocks (and its drift) would have to be measured and corrected first.

Usage: ``python bench/transports.py [--rounds 5] [--runs 5] [--size-mib 64]
[--devices local,ssh,adb]``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import posixpath
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402

KINDS = ("local", "ssh", "adb")
MB = 1e6


# -- environment and devices -------------------------------------------------------------------


def isolate(home: Path) -> None:
    """Point every aiot folder into ``home`` and use a private adb server port.

    Set in this process's environment, so the in-process transports and every ``aiot``
    subprocess see the same throw-away inventory, emulators, results and device workdir.
    """
    from aiot.host.emulator.ssh import free_port

    for name in ("AIOT_DEVICE", "ANDROID_SERIAL"):
        os.environ.pop(name, None)
    os.environ.update({
        "AIOT_RESULTS_DIR": str(home / "results"), "AIOT_CACHE_DIR": str(home / "cache"),
        "AIOT_LOCAL_WORKDIR": str(home / "local"), "AIOT_STATE_DIR": str(home / "state"),
        "AIOT_INVENTORY": str(home / "devices.toml"), "AIOT_NO_PROGRESS": "1", "NO_COLOR": "1",
        # Never the user's adb server on 5037: ours is killed at the end.
        "ANDROID_ADB_SERVER_PORT": str(free_port()),
    })


def aiot_script() -> str:
    """The ``aiot`` entry point next to this interpreter (the venv's), else on PATH."""
    return shutil.which("aiot", path=str(Path(sys.executable).parent)) or "aiot"


def aiot(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run the aiot CLI; raises RuntimeError with its stderr when it fails."""
    done = subprocess.run([aiot_script(), *args], capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"aiot {' '.join(args)} exited {done.returncode}: {done.stderr.strip()}")
    return done


def kill_adb_server() -> None:
    """Stop the private adb server, if one runs (best effort: this is clean-up)."""
    try:
        from aiot.host.transports.adb import client, server_running

        if server_running():
            client().server_kill()
    except Exception as exc:  # noqa: BLE001 - adbutils missing or the server already gone
        print(f"note: could not stop the private adb server: {exc}", file=sys.stderr)


def stop_emulators(fallback: list[str]) -> None:
    """Stop every emulator in our private state folder (all of them are ours).

    Listing them, rather than trusting what ``start`` reported, also catches one whose
    ``aiot emulator start`` was interrupted after its server came up.
    """
    try:
        listed = aiot("emulator", "list", "--json", timeout=60).stdout
        names = [emulator["name"] for emulator in json.loads(listed)]
    except (RuntimeError, subprocess.TimeoutExpired, ValueError) as exc:
        print(f"warning: cannot list emulators ({exc}); stopping the ones started", file=sys.stderr)
        names = fallback
    for name in names:
        try:
            aiot("emulator", "stop", name, timeout=60)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"warning: emulator {name} may still run: {exc}", file=sys.stderr)


@contextmanager
def devices(kinds: list[str]):
    """Yield ``{kind: device name}`` for the kinds that could be started; stop them all after.

    A kind whose emulator does not start (no sshd, no adb) is reported and left out, so the
    other kinds are still measured. Clean-up also runs on errors and Ctrl-C.
    """
    names: dict[str, str] = {}
    try:
        for kind in kinds:
            name = "local" if kind == "local" else f"bench-{kind}"
            if kind != "local":
                try:
                    aiot("emulator", "start", kind, "--name", name, "--json", timeout=120)
                except (RuntimeError, subprocess.TimeoutExpired) as exc:
                    print(f"skipping {kind}: {exc}", file=sys.stderr)
                    continue
            names[kind] = name
        yield names
    finally:
        stop_emulators([n for k, n in names.items() if k != "local"])
        kill_adb_server()


# -- throughput --------------------------------------------------------------------------------


def summary(values: list[float]) -> dict:
    """Median, min, max and the raw values."""
    return {"median": median(values), "min": min(values), "max": max(values), "values": values}


def random_file(path: Path, size: int) -> str:
    """Write ``size`` fresh random bytes to ``path``; returns their sha256."""
    data = os.urandom(size)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


def transfer_round(transport, scratch: Path, size: int) -> tuple[float, float]:
    """One push and one pull of fresh random content; returns (push MB/s, pull MB/s)."""
    from aiot.core.fileio import sha256_file
    from aiot.host.devices.deploy import push_file

    src, dst = scratch / "payload.bin", scratch / "pulled.bin"
    digest = random_file(src, size)  # new content: a new blob, so push_file cannot skip it
    t0 = time.perf_counter()
    pushed = push_file(transport, src, digest)  # the hash is given: hashing is not timed
    push_s = time.perf_counter() - t0
    if not pushed.sent:
        raise RuntimeError(f"{transport.name}: push_file skipped the payload; nothing was timed")
    dst.unlink(missing_ok=True)
    t0 = time.perf_counter()
    transport.pull(pushed.remote, dst)
    pull_s = time.perf_counter() - t0
    if sha256_file(dst) != digest:
        raise RuntimeError(f"{transport.name}: pulled file differs from the pushed one")
    # Remove the blob so device storage does not fill up over the rounds.
    transport.shell(["rm", "-rf", posixpath.dirname(pushed.remote)], timeout=60)
    src.unlink()
    dst.unlink()
    return size / MB / push_s, size / MB / pull_s


def throughput(names: dict[str, str], rounds: int, size: int, scratch: Path) -> dict:
    """Push/pull MB/s per device kind, rounds alternating between devices to share noise."""
    from aiot.host.devices.resolve import open_transport

    transports = {kind: open_transport(name) for kind, name in names.items()}
    rates: dict[str, dict[str, list[float]]] = {k: {"push": [], "pull": []} for k in names}
    try:
        for transport in transports.values():
            transport.exists(transport.workdir())  # connect now: no handshake inside round 1
        for _ in range(rounds):
            for kind, transport in transports.items():
                push, pull = transfer_round(transport, scratch, size)
                rates[kind]["push"].append(push)
                rates[kind]["pull"].append(pull)
    finally:
        for transport in transports.values():
            transport.close()
    return {k: {"push_mb_s": summary(v["push"]), "pull_mb_s": summary(v["pull"])}
            for k, v in rates.items()}


# -- orchestration overhead --------------------------------------------------------------------


def stored_at(record_id: str) -> float:
    """Epoch seconds of the record's ``finished_at``, read back from the result store."""
    from aiot.core.paths import results_dir
    from aiot.host.store import open_store

    with open_store(results_dir()) as store:
        return datetime.fromisoformat(store.get(record_id).finished_at).timestamp()


def timed_run(device: str, model: str, min_runs: int) -> dict:
    """One ``aiot run`` of ``model`` (onnx, no warm-up); its overheads in ms."""
    argv = ["run", "-m", model, "-f", "onnx", "-d", device, "--min-runs", str(min_runs),
            "--min-s", "0", "--warmup-runs", "0", "--warmup-min-s", "0", "--json"]
    issued = time.time()  # wall clock, as the agent's timestamps are
    done = aiot(*argv)
    exited = time.time()
    record = json.loads(done.stdout)[0]
    if record["status"] != "ok":
        raise RuntimeError(f"aiot run on {device} failed: {record['reason']}")
    result = record["result"]
    stored = stored_at(record["id"])
    return {
        "issue_to_first_iteration_ms": (result["measure_start_unix_s"] - issued) * 1e3,
        "last_iteration_to_stored_ms": (stored - result["measure_end_unix_s"]) * 1e3,
        "stored_to_exit_ms": (exited - stored) * 1e3,
        # The agent's own work before the first timed iteration, to tell it from aiot's.
        "agent_load_and_first_inference_ms": result["load_ms"] + result["first_inference_ms"],
        "timed_loop_ms": (result["measure_end_unix_s"] - result["measure_start_unix_s"]) * 1e3,
        "command_ms": (exited - issued) * 1e3,
    }


def orchestration(names: dict[str, str], runs: int, model: str, min_runs: int) -> dict:
    """Per-run overheads per device kind: one cold run, then ``runs`` warm ones, alternating."""
    cold = {kind: timed_run(name, model, min_runs) for kind, name in names.items()}
    warm: dict[str, list[dict]] = {kind: [] for kind in names}
    for _ in range(runs):
        for kind, name in names.items():
            warm[kind].append(timed_run(name, model, min_runs))
    report = {}
    for kind, samples in warm.items():
        report[kind] = {key: summary([s[key] for s in samples]) for key in samples[0]}
        report[kind]["cold_run"] = cold[kind]
    return report


# -- report ------------------------------------------------------------------------------------


def fmt_range(stats: dict, digits: int = 0) -> str:
    """``median (min–max)``."""
    return f"{stats['median']:.{digits}f} ({stats['min']:.{digits}f}–{stats['max']:.{digits}f})"


def table_rows(names: dict[str, str], rates: dict, overhead: dict) -> list[list[str]]:
    """One row per device kind."""
    rows = []
    for kind in names:
        r, o = rates[kind], overhead[kind]
        rows.append([kind, fmt_range(r["push_mb_s"]), fmt_range(r["pull_mb_s"]),
                     fmt_range(o["issue_to_first_iteration_ms"]),
                     f"{o['agent_load_and_first_inference_ms']['median']:.1f}",
                     fmt_range(o["last_iteration_to_stored_ms"], 1),
                     f"{o['command_ms']['median']:.0f}"])
    return rows


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--devices", default=",".join(KINDS), help="local,ssh,adb (a subset)")
    parser.add_argument("--rounds", type=int, default=5, help="push/pull rounds per device")
    parser.add_argument("--size-mib", type=int, default=64, help="payload size in MiB")
    parser.add_argument("--runs", type=int, default=5, help="timed `aiot run`s per device")
    parser.add_argument("--model", default="tiny_cnn", help="zoo model for the runs (onnx)")
    parser.add_argument("--min-runs", type=int, default=10, help="timed iterations per run")
    args = parser.parse_args()
    args.devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    if not set(args.devices) <= set(KINDS) or min(args.rounds, args.runs, args.size_mib) < 1:
        parser.error(f"--devices is a subset of {','.join(KINDS)}; counts must be ≥ 1")
    return args


def _terminate_as_interrupt(signum, frame) -> None:
    # SIGTERM would end the process without clean-up; as an interrupt the finally blocks run.
    raise KeyboardInterrupt


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    size = args.size_mib * 1024 * 1024
    try:
        with tempfile.TemporaryDirectory(prefix="aiot-bench-transports-") as tmp:
            home = Path(tmp)
            isolate(home)
            with devices(args.devices) as names:
                rates = throughput(names, args.rounds, size, home)
                overhead = orchestration(names, args.runs, args.model, args.min_runs)
    except KeyboardInterrupt:
        print("interrupted: emulators stopped, private adb server killed", file=sys.stderr)
        return 130
    print(f"{args.size_mib} MiB payload, {args.rounds} push/pull rounds; {args.runs} warm "
          f"`aiot run -m {args.model} -f onnx --min-runs {args.min_runs}` per device; "
          "median (min–max)")
    print_table(["device", "push MB/s", "pull MB/s", "issue→1st iter ms", "agent load+1st ms",
                 "last iter→stored ms", "run cmd ms"], table_rows(names, rates, overhead))
    path = write_json("transports", {
        "payload_bytes": size, "rounds": args.rounds, "runs": args.runs, "model": args.model,
        "format": "onnx", "min_runs": args.min_runs, "mb": "10^6 bytes",
        "clock_note": "device and host share this machine's clock; "
                      "real devices need their clock offset corrected",
        "devices": {kind: {"name": name, **rates[kind], **overhead[kind]}
                    for kind, name in names.items()},
        "skipped": [k for k in args.devices if k not in names],
    })
    print(f"wrote {path}")
    return 0 if len(names) == len(args.devices) else 1


if __name__ == "__main__":
    sys.exit(main())
