"""Every ``AIOT_*`` environment variable, in one table: its name, default, meaning and readers.

aiot's own code reads these variables through :func:`get` (or :func:`value`), never through
``os.environ`` directly, so this table is the one place that knows them all:
``docs/reference/environment.md`` is made from it (``scripts/docs_reference.py``), and
``tests/docs/test_environment.py`` fails on a variable read anywhere else or missing here.

Four kinds of reader, by :attr:`Variable.side`:

* ``host``: aiot on the host reads it through this module;
* ``option``: Click reads it as the default of a command-line option (``envvar=``), named in
  the readers; the option's help says so too;
* ``child``: aiot sets it for a process it starts, which reads it itself: the device agent
  (it imports nothing of aiot, so it reads ``os.environ``) or a lab node's ``bind()`` shim;
* ``tests``: the test suite, ``make test`` or a script of ``scripts/`` reads it.

A default written ``{aiot.module.NAME}`` is that constant's value, and ``{option}`` the default
of the option among the readers, filled in when the reference is made: the code that applies
the default stays its one owner.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

HOST, OPTION, CHILD, TESTS = "host", "option", "child", "tests"
SIDES = (HOST, OPTION, CHILD, TESTS)


@dataclass(frozen=True)
class Variable:
    """One ``AIOT_*`` variable.

    Attributes:
        name: the variable's name.
        default: what holds while it is unset, in words (``{aiot.mod.CONST}`` for a constant).
        meaning: what setting it does, in a sentence.
        readers: the modules (or options, or files) that read it.
        side: who reads it: ``host``, ``option``, ``child`` or ``tests`` (module docstring).
    """

    name: str
    default: str
    meaning: str
    readers: tuple[str, ...]
    side: str = HOST


def _v(name: str, default: str, meaning: str, *readers: str, side: str = HOST) -> Variable:
    return Variable(name, default, meaning, readers, side)


#: Every variable, grouped as the reference lists them: folders, devices, measuring, the
#: store, conversions, the lab, the terminal, the device's side, the tests.
VARIABLES: tuple[Variable, ...] = (
    # -- folders ------------------------------------------------------------------------------
    _v("AIOT_RESULTS_DIR", "`./results` in a checkout, else `~/.local/share/aiot/results`",
       "Where the result store and artifacts live (the root option `--results-dir` wins).",
       "aiot.core.paths", "aiot --results-dir", side=OPTION),
    _v("AIOT_CACHE_DIR", "`$XDG_CACHE_HOME/aiot` (`~/.cache/aiot`)",
       "aiot's cache: conversions, toolchains, the arm64 userland, device wheels.",
       "aiot.core.paths"),
    _v("AIOT_STATE_DIR", "`$XDG_STATE_HOME/aiot` (`~/.local/state/aiot`)",
       "aiot's state: emulators, campaign locks, a lab node's token.", "aiot.core.paths"),
    _v("AIOT_WEIGHTS_DIR", "`<cache>/weights`",
       "Where `aiot train` keeps weights, and runs find the newest training of a model.",
       "aiot.core.paths"),
    _v("AIOT_TOOLCHAINS_DIR", "`<cache>/toolchains`",
       "Where the isolated toolchain environments (lce, executorch) live.", "aiot.core.toolchains"),
    _v("AIOT_LOCAL_WORKDIR", "`$XDG_CACHE_HOME/aiot/device`",
       "The `local` device's work folder (what a push puts there, what runs leave).",
       "aiot.host.transports.local"),
    _v("AIOT_ANDROID_SDK", "`<cache>/android-sdk`",
       "Where `aiot app build` keeps the bullseye `android.jar` and `dx.jar`.",
       "aiot.host.app.sdk"),
    _v("AIOT_FASHION_MNIST_DIR", "`{aiot.models.datasets.fashion_mnist.DEFAULT_DIR}` (Debian's "
       "`dataset-fashion-mnist`)", "The Fashion-MNIST folder (the demo's data set).",
       "aiot.models.datasets.fashion_mnist"),
    _v("AIOT_DEBIAN_MIRROR",
       "this machine's apt mirror, else `{aiot.host.devices.wheels.DEFAULT_MIRROR}`",
       "The Debian mirror for the arm64 userland, device wheels and the app's SDK jars.",
       "aiot.host.devices.wheels"),
    # -- devices ------------------------------------------------------------------------------
    _v("AIOT_DEVICE", "the inventory device of `$ANDROID_SERIAL`, else `local`",
       "The device of a command without `--device`.", "aiot.host.devices.resolve"),
    _v("AIOT_INVENTORY", "`$XDG_CONFIG_HOME/aiot/devices.toml` (`~/.config/aiot/devices.toml`)",
       "The device inventory file.", "aiot.host.devices.entry"),
    _v("AIOT_RESERVATIONS", "`reservations.json` beside the inventory",
       "The file of device reservations (`aiot devices reserve`).",
       "aiot.host.devices.reservations"),
    _v("AIOT_AGENT_SESSION", "`1`",
       "`0` starts an agent per command instead of one session per device that forks each run.",
       "aiot.host.devices.agent_client"),
    _v("AIOT_PULL_MAX_BYTES", "`{aiot.host.devices.pull.DEFAULT_MAX_BYTES}` bytes (1 GiB)",
       "The most one `aiot pull` brings back (bytes, or 500M, 2G).", "aiot pull --max-bytes",
       side=OPTION),
    _v("AIOT_MAX_LINE_MB", "`{aiot.host.transports.stream.MAX_LINE_MB}`",
       "The longest line of device output, in MiB, before the command stops in one line.",
       "aiot.host.transports.stream"),
    # -- measuring ----------------------------------------------------------------------------
    _v("AIOT_VALIDITY", "the built-in limits (cv, load, samples, threads, tail, speed)",
       "Validity limits, e.g. `cv=0.2,load=1.5,threads=off` (`--validity` goes over them).",
       "aiot.host.engine.validity"),
    _v("AIOT_HOST_THREADS", "the CPUs idle when the command starts",
       "PyTorch's threads for training and the robustness suites.", "aiot.core.host_cpus"),
    _v("AIOT_HOST_ID", "the host name and 6 hex digits of the machine's id",
       "This host's id in every record it drives (1-64 letters, digits, `.`, `_`, `-`).",
       "aiot.host.store.identity"),
    # -- the store ----------------------------------------------------------------------------
    _v("AIOT_STORE_WAIT_S", "`{aiot.host.store.busy.DEFAULT_WAIT_S}` s",
       "How long a write waits for a store another program holds locked (`--store-wait` sets it).",
       "aiot.host.store.busy"),
    # -- conversions --------------------------------------------------------------------------
    _v("AIOT_CONVERT_TIMEOUT_S", "`{aiot.core.stage_limit.DEFAULT_S}` s",
       "Each conversion stage's time limit (`aiot convert --timeout-s` sets it).",
       "aiot.core.stage_limit"),
    _v("AIOT_FACTORY_TIMEOUT_S", "`{aiot.converters.factory_process.DEFAULT_TIMEOUT_S}` s",
       "How long a user's factory may take in its child process.",
       "aiot.converters.factory_process"),
    _v("AIOT_CONVERSION_CACHE", "`on`", "`off` (or `0`, `no`, `false`) turns the machine's "
       "conversion cache off.", "aiot.converters.conversion_cache"),
    _v("AIOT_WARM_TOOLCHAINS", "`1`", "`0` starts every toolchain command in a fresh interpreter "
       "instead of a fork of a warm one.", "aiot.core.warm_toolchain"),
    # -- the lab ------------------------------------------------------------------------------
    _v("AIOT_LAB", "the head or node this host started",
       "The lab's HOST:PORT for `sweep --lab`, `lab status` and `lab view`.",
       "aiot sweep --lab", "aiot.host.cli.lab", "aiot.host.labview.sources", side=OPTION),
    _v("AIOT_LAB_TOKEN_FILE", "this host's copy in its state (`lab/auth_token`)",
       "The lab's token file for one command.", "aiot.host.lab.security"),
    _v("AIOT_LAB_BIND", "set by aiot for each node it starts",
       "The address the `bind()` shim of a lab node puts every wildcard listen on (read by the C "
       "shim inside Ray's processes).", "aiot.host.lab.security (the shim's C source)",
       side=CHILD),
    _v("AIOT_VIEW_SESSION_IDLE_S", "`{option}` s",
       "Seconds a browser's login to `aiot lab view` lasts "
       "without a request.", "aiot lab view --session-idle-s", side=OPTION),
    _v("AIOT_VIEW_SESSION_MAX_S", "`{option}` s",
       "Seconds a browser's login to `aiot lab view` lasts "
       "at most.", "aiot lab view --session-max-s", side=OPTION),
    _v("AIOT_VIEW_CLIENT_TIMEOUT_S", "`{option}` s",
       "Seconds a client of `aiot lab view` has to send "
       "its request.", "aiot lab view --client-timeout-s", side=OPTION),
    # -- the terminal -------------------------------------------------------------------------
    _v("AIOT_NO_PROGRESS", "unset: progress bars on a terminal",
       "Any value turns progress bars off.", "aiot.host.cli._output"),
    _v("AIOT_HEARTBEAT_S", "`{aiot.host.cli.progress.HEARTBEAT_S}` s",
       "Seconds between a piped log's heartbeat lines of a run in progress.",
       "aiot.host.cli.progress"),
    # -- the device's side --------------------------------------------------------------------
    _v("AIOT_RUNTIME", "unset: the device's own Python",
       "Names aiot's aarch64 runtime a phone's agent runs in (it goes into the agent's hello).",
       "aiot.device_agent.wire", side=CHILD),
    _v("AIOT_SIGSYS", "unset", "`skip`: the agent skips the system calls the Android app's "
       "seccomp filter traps.", "aiot.device_agent.seccomp", side=CHILD),
    _v("AIOT_AGENT_PRELOAD", "unset", "`1`: the agent session imports its runtimes before the "
       "first request (set on aiot's emulated arm64 boards).", "aiot.device_agent.session",
       side=CHILD),
    # -- the tests ----------------------------------------------------------------------------
    _v("AIOT_REQUIRE_TOOLCHAINS", "unset: a test whose toolchain is missing skips",
       "`1` (as `make test` sets): a missing toolchain, browser or extra fails its test.",
       "tests", "Makefile", side=TESTS),
    _v("AIOT_TEST_DEVICE", "unset: tests/hardware skips",
       "The inventory device the hardware tests run on.", "tests/hardware", side=TESTS),
    _v("AIOT_TEST_CACHE", "`$XDG_CACHE_HOME/aiot-tests`",
       "Where the suite keeps deterministic inputs between runs.", "tests/conftest.py",
       side=TESTS),
    _v("AIOT_FAULTS_REPORT", "unset", "A file the fault tests write each case's outcome to "
       "(`bench/faults.py` sets it).", "tests/faults/conftest.py", side=TESTS),
    _v("AIOT_REPORT_SCREENSHOT", "unset", "Where the report's browser test copies its "
       "first-screen screenshot.", "tests/integration/test_report_browser.py", side=TESTS),
    _v("AIOT_REPORT_INVALID_SCREENSHOT", "unset", "Where the report's browser test copies the "
       "first screen of its INVALID sweep.", "tests/integration/test_report_browser.py",
       side=TESTS),
    _v("AIOT_TOOLCHAINS", "`lce executorch`", "The toolchains `scripts/bootstrap.sh` installs "
       "(empty: none).", "scripts/bootstrap.sh", side=TESTS),
)

#: The table by name.
TABLE: dict[str, Variable] = {v.name: v for v in VARIABLES}


def variable(name: str) -> Variable:
    """The table's row of ``name``.

    Raises:
        KeyError: ``name`` is not in the table (add it there, with its meaning).
    """
    try:
        return TABLE[name]
    except KeyError:
        raise KeyError(f"{name} is not in aiot.core.environment's table") from None


def get(name: str, default: str | None = None) -> str | None:
    """The value of ``name`` in this process's environment, ``default`` while it is unset.

    Raises:
        KeyError: ``name`` is not in the table.
    """
    variable(name)
    return os.environ.get(name, default)


def value(name: str) -> str | None:
    """The value of ``name`` stripped of spaces, or None while it is unset or empty."""
    found = (get(name) or "").strip()
    return found or None
