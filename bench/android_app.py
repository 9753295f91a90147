"""The aiot app on a phone: what ``aiot app install`` costs, what the APK weighs, and what
starting the agent through the app adds over the shell.

On a fresh emulated Android phone (``aiot emulator start adb --profile android``) set up with
aiot's runtime, in a throw-away aiot home (the host's cache of userlands, runtime archives and
the bullseye jars is shared, so nothing is rebuilt per run):

* **install**: wall time of a first ``aiot app install`` (pull the runtime's loader, build the
  phone's APK, ``pm install``, copy the tree into the app's files with ``run-as``) and of a
  second one (the APK reused, the tree already there);
* **size**: the plain APK, the phone's APK with the loader, the loader itself;
* **agent start**: seconds from asking for the agent's ``hello`` to its answer, one agent
  process per command both ways (the app has no long-lived session): through the app
  (``am instrument``, the loader from the native-library dir, the tree from the app's files)
  and from the shell (``bin/python3`` in /data/local/tmp); and what opening a ``--via app``
  session costs (the agent's deploy check, making the work dir readable to the app, the
  ``run-as`` check that the tree is in the app's files). Median (min-max) over ``--repeats``.

Timings under qemu are this host's, not a phone's: they compare the two paths under the same
emulator. Usage: ``python bench/android_app.py [--repeats 5]``.
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
from _common import median, print_table, write_json
from transports import _terminate_as_interrupt, aiot, isolate, kill_adb_server, stop_emulators

PHONE = "bench-app-phone"


def install_costs() -> list[dict]:
    """First and second ``aiot app install``: wall time and what each did."""
    rows = []
    for attempt in ("first", "second"):
        started = time.perf_counter()
        done = json.loads(aiot("app", "install", PHONE, "--json", timeout=1800).stdout)
        rows.append({"install": attempt, "wall_s": time.perf_counter() - started,
                     "runtime_copied": done["runtime_copied"], "apk_sha256": done["sha256"]})
    return rows


def apk_sizes() -> dict:
    info = json.loads(aiot("app", "info", "--json").stdout)
    [phone] = info["runtime_builds"]
    from aiot.host.app.build import read_runtime_metadata

    loader = read_runtime_metadata(phone["runtime_tree"])
    return {"plain_apk_bytes": info["size_bytes"], "phone_apk_bytes": phone["size_bytes"],
            "loader_sha256": loader["loader_sha256"], "native_library": phone["native_library"]}


def agent_starts(repeats: int) -> dict[str, list[float]]:
    """Seconds to a hello through the app and from the shell (one-shot agents both), and to
    open a --via app session."""
    from aiot.host.app.session import AppAgentSession
    from aiot.host.devices.agent_client import AgentSession
    from aiot.host.devices.resolve import open_transport

    seconds: dict[str, list[float]] = {"app hello": [], "shell hello": [], "app session open": []}
    for _ in range(repeats):
        started = time.perf_counter()
        app = AppAgentSession(open_transport(PHONE))
        seconds["app session open"].append(time.perf_counter() - started)
        with app, AgentSession(open_transport(PHONE), persistent=False) as shell:
            for kind, session in (("app hello", app), ("shell hello", shell)):
                started = time.perf_counter()
                session.hello()
                seconds[kind].append(time.perf_counter() - started)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="android-app")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    from aiot.core.paths import cache_dir

    shared_cache = cache_dir()
    with tempfile.TemporaryDirectory(prefix="aiot-bench-app-") as tmp:
        isolate(Path(tmp))
        os.environ["AIOT_CACHE_DIR"] = str(shared_cache)
        try:
            aiot("emulator", "start", "adb", "--profile", "android", "--name", PHONE, timeout=600)
            aiot("devices", "setup", PHONE, timeout=1800)
            installs = install_costs()
            sizes = apk_sizes()
            starts = agent_starts(args.repeats)
        finally:
            stop_emulators([PHONE])
            kill_adb_server()
    print_table(["app install", "wall s", "runtime copied"],
                [[r["install"], f"{r['wall_s']:.1f}", r["runtime_copied"]] for r in installs])
    print()
    print_table(["APK", "bytes"], [["plain (aiot app build)", sizes["plain_apk_bytes"]],
                                   [f"phone's ({sizes['native_library']})", sizes["phone_apk_bytes"]]])
    print()
    print_table(["agent (emulated phone, qemu)", "median s", "min", "max"],
                [[kind, f"{median(v):.2f}", f"{min(v):.2f}", f"{max(v):.2f}"] for kind, v in starts.items()])
    write_json(args.out, {"installs": installs, "sizes": sizes,
                          "agent_start_s": {k: {"median": median(v), "min": min(v), "max": max(v), "values": v}
                                            for k, v in starts.items()}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
