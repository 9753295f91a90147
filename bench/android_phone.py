"""A phone without Python: what aiot's aarch64 runtime costs to set up, weigh and start.

Three measurements, on emulated devices started in a throw-away aiot home (the host's cache of
userlands and runtime archives is shared, so the runtime is built once, not per run):

* **set-up**: ``aiot devices setup`` on a fresh emulated Android phone
  (``aiot emulator start adb --profile android``): bytes pushed and wall time of the first
  set-up (push, hash check, unpack, import check) and of a second one (nothing to push);
* **size per --with set**: the runtime archive (what a first set-up pushes) and the unpacked
  tree on the phone, for the default runtimes (LiteRT + ONNX Runtime + NumPy) and each
  optional set (``--with-sets base,torch,torch+executorch``; the torch sets download aarch64
  wheels on first use);
* **agent start**: time from opening an agent session to its ``hello`` on the phone (the
  pushed tree, started through its own loader) and on an emulated arm64 board (Debian's
  aarch64 CPython), both ADB devices under the same qemu-user; median (min-max) over
  ``--repeats`` fresh sessions, alternating devices.

Timings under qemu are this host's, not a phone's; they compare the two ways of starting
Python under the same emulator. Usage: ``python bench/android_phone.py [--repeats 5]
[--with-sets base]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, print_table, write_json  # noqa: E402
from transports import _terminate_as_interrupt, aiot, isolate, kill_adb_server, stop_emulators  # noqa: E402

MB = 1e6
TARGET_MB = 120  # issue 19: the runtime for tflite+onnx


def setup_costs(phone: str) -> list[dict]:
    """First and second ``devices setup`` of ``phone``: wall time and bytes pushed."""
    rows = []
    for attempt in ("first", "second"):
        started = time.perf_counter()
        summary = json.loads(aiot("devices", "setup", phone, "--json", timeout=1800).stdout)
        rows.append({"set_up": attempt, "wall_s": time.perf_counter() - started,
                     "pushed_bytes": summary["pushed_bytes"], "archive_bytes": summary["archive_bytes"],
                     "tree_bytes": summary["tree_bytes"], "files": summary["files"]})
    return rows


def runtime_sizes(sets: list[str]) -> list[dict]:
    """Archive and tree size of the runtime for each ``--with`` set (built if not cached)."""
    from aiot.core.paths import cache_dir
    from aiot.host.devices.android_runtime import archive_runtime
    from aiot.host.emulator.arm64 import ensure_userland

    rows = []
    for name in sets:
        extras = () if name == "base" else tuple(name.split("+"))
        started = time.perf_counter()
        archive = archive_runtime(ensure_userland(cache_dir(), extras=extras), cache_dir(), extras)
        rows.append({"with": name, "archive_bytes": archive.size_bytes, "tree_bytes": archive.tree_bytes,
                     "files": archive.files, "load_align": archive.load_align,
                     "build_s": time.perf_counter() - started})
    return rows


def agent_start(devices: dict[str, str], repeats: int) -> dict[str, list[float]]:
    """Seconds from a new agent session to its hello, per device kind, ``repeats`` each."""
    from aiot.host.devices.agent_client import AgentSession
    from aiot.host.devices.resolve import open_transport

    seconds: dict[str, list[float]] = {kind: [] for kind in devices}
    for _ in range(repeats):
        for kind, name in devices.items():
            with AgentSession(open_transport(name)) as session:
                started = time.perf_counter()
                session.hello()
                seconds[kind].append(time.perf_counter() - started)
    return seconds


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--with-sets", default="base", help="comma-separated: base, torch, torch+executorch")
    parser.add_argument("--out", default="android-phone")
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    from aiot.core.paths import cache_dir

    shared_cache = cache_dir()
    names = {"phone": "bench-phone", "board": "bench-board"}
    with tempfile.TemporaryDirectory(prefix="aiot-bench-phone-") as tmp:
        isolate(Path(tmp))
        os.environ["AIOT_CACHE_DIR"] = str(shared_cache)
        try:
            aiot("emulator", "start", "adb", "--profile", "android", "--name", names["phone"], timeout=600)
            aiot("emulator", "start", "adb", "--arch", "arm64", "--name", names["board"], timeout=1800)
            sizes = runtime_sizes(args.with_sets.split(","))
            setups = setup_costs(names["phone"])
            starts = agent_start(names, args.repeats)
        finally:
            stop_emulators(list(names.values()))
            kill_adb_server()
    print_table(["set-up", "pushed MB", "wall s"],
                [[r["set_up"], f"{r['pushed_bytes'] / MB:.1f}", f"{r['wall_s']:.1f}"] for r in setups])
    print()
    print_table(["--with", "archive MB (pushed)", "tree MB (on phone)", "files", "min ELF align"],
                [[r["with"], f"{r['archive_bytes'] / MB:.1f}", f"{r['tree_bytes'] / MB:.1f}", r["files"],
                  f"{r['load_align'] // 1024} KB" if r["load_align"] else "—"] for r in sizes])
    print()
    print_table(["device", "agent start s (median)", "min", "max"],
                [[kind, f"{median(v):.2f}", f"{min(v):.2f}", f"{max(v):.2f}"] for kind, v in starts.items()])
    base = next((r for r in sizes if r["with"] == "base"), None)
    if base:
        verdict = "meets" if base["tree_bytes"] / MB <= TARGET_MB else "misses"
        print(f"\nbase runtime: {base['archive_bytes'] / MB:.1f} MB pushed, {base['tree_bytes'] / MB:.1f} MB "
              f"on the phone; the unpacked tree {verdict} the {TARGET_MB} MB target")
    write_json(args.out, {"setups": setups, "sizes": sizes, "target_mb": TARGET_MB,
                          "agent_start_s": {k: {"median": median(v), "min": min(v), "max": max(v), "values": v}
                                            for k, v in starts.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
