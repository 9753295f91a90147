"""``aiot devices doctor``: what stands between a device and a benchmark, with a fix for each.

Every check goes through the Transport interface, so local, SSH and ADB devices are
diagnosed by the same code. A :class:`TransportError` ends the diagnosis as a failed
``reachable`` check, because nothing after it could run.
"""

from __future__ import annotations

import json
import re

from aiot.core.errors import TransportError
from aiot.core.paths import cache_dir
from aiot.host.devices.android_runtime import cached_load_alignment
from aiot.host.devices.checks import Check, check_space, check_workdir, inventory_setting, last_line
from aiot.host.devices.phone_checks import phone_checks
from aiot.host.devices.setup import NATIVE_ONLY, agent_env
from aiot.host.devices.wheels import RUNTIME_MODULES
from aiot.host.transports.base import Transport
from aiot.host.transports.probe import probe_linux

MIN_PYTHON = (3, 9)
RUNTIMES = dict(RUNTIME_MODULES)  # import name -> pip distribution

_VERSION_SCRIPT = "import sys; print('%d.%d.%d' % sys.version_info[:3])"

# Runs on the device's Python (>= 3.9): {module: {"version": ...} or {"error": ...}} as JSON.
_IMPORT_SCRIPT = r"""
import importlib, json, sys
from importlib import metadata
found = {}
for pair in sys.argv[1:]:
    module, dist = pair.split("=")
    try:
        importlib.import_module(module)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [""])[0]
        found[module] = {"error": "%s: %s" % (type(exc).__name__, first)}
        continue
    try:
        found[module] = {"version": metadata.version(dist)}
    except Exception:
        found[module] = {"version": getattr(sys.modules[module], "__version__", "unknown")}
print(json.dumps(found))
"""


def diagnose(transport: Transport, phone_extras=()) -> list[Check]:
    """Check that ``transport``'s device can run the agent; stops at the first TransportError.

    ``phone_extras``: more checks of an aarch64 phone, each ``check(transport) -> Check`` (the
    CLI adds the aiot app's, :func:`aiot.host.app.runtime.check_app`: the app sits above the
    devices it is installed on).
    """
    checks: list[Check] = []
    try:
        _run_checks(transport, checks, phone_extras)
    except TransportError as exc:
        lost = f"connection lost during the checks: {exc.message}" if checks else exc.message
        fix = exc.hint or f"check that {transport.name} is on and reachable: aiot devices list"
        checks.append(Check("reachable", False, lost, fix))
    return checks


def _run_checks(transport: Transport, checks: list[Check], phone_extras=()) -> None:
    """Append each check's verdict; later checks run only where earlier ones make sense."""
    checks.append(check_reachable(transport))
    workdir = check_workdir(transport)
    checks.append(workdir)
    if workdir.ok:
        checks.append(check_space(transport))
    phone = transport.kind in NATIVE_ONLY and _machine(transport) == "aarch64"
    python = check_python(transport)
    if phone:
        checks.extend(_phone_checks(transport, installed=python.status == "ok"))
        checks.extend(check(transport) for check in phone_extras)
    checks.append(python)
    if python.status == "ok":
        checks.extend(check_runtimes(transport))


def _machine(transport: Transport) -> str:
    return transport.shell(["uname", "-m"], timeout=30).stdout.strip()


def _phone_checks(transport: Transport, installed: bool) -> list[Check]:
    """What can stop aiot's aarch64 runtime on this phone (see :mod:`aiot.host.devices.phone_checks`)."""
    return phone_checks(transport, installed, cached_load_alignment(cache_dir()))


def check_reachable(transport: Transport) -> Check:
    """The probe script runs and reports an OS."""
    facts = probe_linux(transport)
    if not facts["os"]:
        return Check("reachable", False, "the device answered but its probe printed nothing",
                     f"check that 'sh' and 'uname' work on {transport.name}")
    parts = [f"{facts['os']} {facts['kernel']} {facts['abi']}", facts.get("model"), facts.get("soc"),
             f"{facts['cores']} cores"]
    return Check("reachable", True, ", ".join(str(p) for p in parts if p))


def check_python(transport: Transport) -> Check:
    """The agent's Python runs and is at least :data:`MIN_PYTHON`; phones may have none."""
    python = transport.python()
    res = transport.shell([python, "-c", _VERSION_SCRIPT], timeout=60)
    version = parse_python_version(res.stdout) if res.ok else None
    if version is None and transport.kind in NATIVE_ONLY:
        return Check("python", False, f"no Python at '{python}': a phone has none until aiot pushes "
                     "its own runtime", f"aiot devices setup {transport.name}  (or time it with --native)")
    if version is None:
        return Check("python", False, f"'{python}' does not run: {last_line(res)}",
                     _python_fix(transport))
    text = ".".join(map(str, version))
    if version[:2] < MIN_PYTHON:
        need = ".".join(map(str, MIN_PYTHON))
        return Check("python", False, f"{python} is Python {text}; the agent needs {need} or newer",
                     _python_fix(transport))
    return Check("python", True, f"Python {text} ({python})")


def check_runtimes(transport: Transport) -> list[Check]:
    """One check per runtime: importable by the agent's Python (set-up runtimes included)."""
    argv = [transport.python(), "-c", _IMPORT_SCRIPT, *(f"{m}={d}" for m, d in RUNTIMES.items())]
    res = transport.shell(argv, env=agent_env(transport), timeout=120)
    try:
        found = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        return [Check("runtimes", False, f"the import check failed: {last_line(res)}",
                      _runtime_fix(transport))]
    return [_runtime_check(transport, module, found.get(module, {})) for module in RUNTIMES]


def _runtime_check(transport: Transport, module: str, report: dict) -> Check:
    """The verdict for one runtime from the import script's report."""
    name = module.split(".")[0]
    if "version" in report:
        return Check(name, True, report["version"])
    return Check(name, False, report.get("error", "not reported"),
                 _runtime_fix(transport, RUNTIMES[module]))


def parse_python_version(text: str) -> tuple[int, ...] | None:
    """``(3, 11, 4)`` from a ``3.11.4`` line, or None."""
    m = re.search(r"^(\d+)\.(\d+)\.(\d+)\s*$", text, re.MULTILINE)
    return tuple(int(g) for g in m.groups()) if m else None


def _python_fix(transport: Transport) -> str:
    if transport.kind == "local":
        return "the local agent runs under aiot's own Python: reinstall aiot into Python 3.9 or newer"
    return f"install Python 3.9 or newer on the device, or {inventory_setting(transport, 'python')}"


def _runtime_fix(transport: Transport, pip_name: str = " ".join(RUNTIMES.values())) -> str:
    if transport.kind == "local":
        return f"pip install {pip_name}"
    if transport.kind in NATIVE_ONLY:
        return f"pip install {pip_name} in the phone's Python"
    return f"aiot devices setup {transport.name}"
