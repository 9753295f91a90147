"""The user's factory (``file.py:factory``, ``package.module:factory``) imported and called in
a child process, never in aiot's own.

A factory is the user's code: it may call ``sys.exit`` or ``os._exit``, crash the
interpreter, print to stdout, wait for input or never return. In aiot's process each of those
would end the command without a word (``os._exit(0)`` even "successfully"), or corrupt
``--json``. Here the child imports the module, calls the factory and sends the module and its
example inputs back as a pickle file (the user's own classes pickled by value with
cloudpickle, so aiot never imports the user's file itself); whatever else happens becomes one
line naming the reference. What the child prints goes to a log of its own (its last line is
quoted when the factory fails; ``-v`` shows all of it).

The built pickle is kept per reference and source hash for the life of the process, so a
sweep that converts one factory to several formats starts one child, and an edited file is
built again.

This is the one full unpickle in aiot (everything else is weights-only, see
:mod:`aiot.core.safe_load`), and it trusts nothing the user did not ask to run: the bytes are
written by the child into a private temporary folder from the code the user named, whose
classes aiot then traces and calls in its own process anyway; no file from elsewhere is read.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from aiot.core import children, environment, stage_limit
from aiot.core.errors import UsageError, first_line
from aiot.core.quiet import toolchain_output_to_log
from aiot.models.model_ref import ModelRef

log = logging.getLogger(__name__)

#: Seconds a factory may take (import, build, pickling) before it is called hung.
DEFAULT_TIMEOUT_S = 300.0
TIMEOUT_ENV = "AIOT_FACTORY_TIMEOUT_S"

#: The child's bootstrap: the parent's import path first (so ``module:factory`` resolves as
#: it would have in aiot's process, and this very aiot is the one imported), then the work.
_BOOT = ("import json, sys; request = json.load(open(sys.argv[1])); sys.path[:] = request['sys_path']; "
         "from aiot.converters.factory_process import child_main; sys.exit(child_main(request))")


def build_in_child(ref: ModelRef) -> tuple[object, object | None]:
    """``(module, example inputs or None)`` returned by ``ref``'s factory, built in a child.

    Raises:
        UsageError: the file or module does not import, the factory is missing, raises, exits,
            crashes, hangs past ``AIOT_FACTORY_TIMEOUT_S`` or returns something else than a
            module; the one line names the reference.
    """
    import pickle

    blob = _built(ref.name, str(ref.path) if ref.path else None, ref.module, ref.factory, ref.sha256)
    # The pickle is the child's, made from the user's own code; loading it imports what the
    # module needs (transformers, torchao), whose import-time chatter goes to the log.
    with toolchain_output_to_log(log):
        return pickle.loads(blob)


@functools.lru_cache(maxsize=4)
def _built(name: str, path: str | None, module: str | None, factory: str, sha256: str | None) -> bytes:
    """The pickled ``(module, example)`` of one reference (cached: ``sha256`` is part of the key)."""
    ref = ModelRef("code", name, path=Path(path) if path else None, module=module, factory=factory,
                   sha256=sha256)
    timeout = factory_timeout()
    with tempfile.TemporaryDirectory(prefix="aiot-factory-") as tmp:
        folder = Path(tmp)
        request = {"name": name, "path": path, "module": module, "factory": factory, "sha256": sha256,
                   "sys_path": [p if p else os.getcwd() for p in sys.path],
                   "result": str(folder / "built.pkl"), "error": str(folder / "error.json")}
        (folder / "request.json").write_text(json.dumps(request))
        output = folder / "output.log"
        returncode = _run_child(ref, folder / "request.json", output, timeout)
        printed = output.read_text(errors="replace")
        if printed.strip():
            log.info("%s printed:\n%s", name, printed.rstrip())
        error = folder / "error.json"
        if error.exists():
            failure = json.loads(error.read_text())
            raise UsageError(failure["message"], failure.get("hint"))
        result = folder / "built.pkl"
        if returncode == 0 and result.exists():
            return result.read_bytes()
        raise UsageError(_ended(ref, returncode, printed),
                         "a factory must return its module; run it in Python to see what happens")


def factory_timeout() -> float:
    """``AIOT_FACTORY_TIMEOUT_S`` (seconds), else :data:`DEFAULT_TIMEOUT_S`."""
    text = environment.get(TIMEOUT_ENV, "").strip()
    if not text:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise UsageError(f"{TIMEOUT_ENV}={text} is not a number of seconds", f"e.g. {TIMEOUT_ENV}=600")
    return value


def _run_child(ref: ModelRef, request: Path, output: Path, timeout: float) -> int:
    """Run the child to its end; kill it (and whatever it started) on timeout, Ctrl-C or SIGTERM."""
    with open(output, "wb") as sink:
        # A session of its own: killing its group ends what the factory started too, and a
        # terminal's Ctrl-C reaches aiot, which ends the child in `finally`.
        proc = subprocess.Popen([sys.executable, "-c", _BOOT, str(request)], stdin=subprocess.DEVNULL,
                                stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        # Within a conversion stage, no longer than what is left of its limit.
        allowed, stage = stage_limit.budget(timeout)
        try:
            with children.tracked(proc):  # a campaign's Ctrl-C ends it from the main thread
                code = proc.wait(timeout=allowed)
            if children.stopping():
                raise children.Stopped(f"{ref.name}: stopped while its factory ran (aiot was told "
                                       "to stop)", "run the command again")
            return code
        except subprocess.TimeoutExpired:
            if stage is not None:
                raise stage_limit.ran_out(stage, f"the process running {ref.name}", proc.pid,
                                          children.process_state(proc.pid)) from None
            raise UsageError(f"{ref.name} did not return within {timeout:.0f} s (a factory that hangs or "
                             "waits for something)",
                             f"fix the factory, or give it more time: {TIMEOUT_ENV}={timeout * 2:.0f}") from None
        finally:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def _ended(ref: ModelRef, returncode: int, printed: str) -> str:
    """Why the child ended without a module or an error of its own, in one line."""
    if returncode < 0:
        try:
            how = f"crashed ({signal.Signals(-returncode).name})"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"ended the process (exit status {returncode}, e.g. os._exit) before returning a module"
    lines = [line.strip() for line in printed.splitlines() if line.strip()]
    return f"{ref.name} {how}" + (f"; its last output: {lines[-1][:200]}" if lines else "")


# -- the child's side ------------------------------------------------------------------------


def child_main(request: dict) -> int:
    """Import and call the factory of ``request``; write the pickle or a one-line error.

    Runs in the child only: what the user's code does to this process is the parent's to
    report. ``sys.exit`` in the user's code is caught and reported here, with its code.
    """
    ref = ModelRef("code", request["name"], path=Path(request["path"]) if request["path"] else None,
                   module=request["module"], factory=request["factory"], sha256=request["sha256"])
    before = set(sys.modules)
    try:
        returned = _split(ref, _call_factory(ref))
        _dump(ref, returned, Path(request["result"]), set(sys.modules) - before)
    except UsageError as exc:
        _write_error(request, exc.message, exc.hint)
    except SystemExit as exc:
        _write_error(request, f"{ref.name} called sys.exit({exc.code!r}) instead of returning a module",
                     "a factory must return its module, not end the program")
    except KeyboardInterrupt:
        return 130
    return 0


def _write_error(request: dict, message: str, hint: str | None) -> None:
    Path(request["error"]).write_text(json.dumps({"message": message, "hint": hint}))


def _call_factory(ref: ModelRef):
    module = _import(ref)
    factory = getattr(module, ref.factory, None)
    if factory is None or not callable(factory):
        import difflib

        names = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        close = difflib.get_close_matches(ref.factory, names, n=3)
        raise UsageError(f"{ref.name}: {_where(ref)} has no function '{ref.factory}'",
                         f"did you mean {', '.join(close)}?" if close else
                         f"define it, e.g. def {ref.factory}(): return MyNet()")
    import torch

    torch.manual_seed(0)  # a factory that initialises randomly converts reproducibly
    try:
        return factory()
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - the user's code: any failure is theirs to fix
        raise UsageError(f"{ref.name} raised {type(exc).__name__}: {first_line(exc)}",
                         "fix the factory; run it in Python to see the traceback") from None


def _import(ref: ModelRef):
    """Import the user's file (its folder on sys.path, for its own imports) or module."""
    try:
        if ref.module:
            return importlib.import_module(ref.module)
        name = user_module_name(ref)
        spec = importlib.util.spec_from_file_location(name, ref.path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # cloudpickle finds the user's classes' module here
        sys.path.insert(0, str(ref.path.resolve().parent))
        spec.loader.exec_module(module)
        return module
    except ModuleNotFoundError as exc:
        if ref.module and exc.name and ref.module.startswith(exc.name):
            raise UsageError(f"{ref.name}: no module named '{ref.module}'",
                             "install it or run aiot where it can be imported") from None
        raise UsageError(f"{ref.name}: importing {_where(ref)} failed: {first_line(exc)}",
                         "install what it imports") from None
    except (SystemExit, KeyboardInterrupt):
        raise
    except BaseException as exc:  # noqa: BLE001 - a syntax error or a failing import in their file
        raise UsageError(f"{ref.name}: importing {_where(ref)} failed: {type(exc).__name__}: "
                         f"{first_line(exc)}", "fix the file; run it in Python to see more"
                         ) from None


def user_module_name(ref: ModelRef) -> str:
    """The module name a user's file is imported under (unique per file content)."""
    return f"aiot_user_{ref.sha256[:12]}_{ref.path.stem}".replace("-", "_")


def _split(ref: ModelRef, returned):
    """``(module, example or None)`` from what the factory returned."""
    import torch
    from torch import nn

    module = returned[0] if isinstance(returned, tuple) and len(returned) == 2 else returned
    if isinstance(module, torch.jit.ScriptModule):  # scripted or traced: no Python code left
        raise UsageError(f"{ref.name} returned a TorchScript module ({type(module).__name__}), "
                         "which aiot cannot export or send between processes",
                         "return the nn.Module before torch.jit.script/trace, or save it with "
                         "module._save_for_lite_interpreter('model.ptl') and give that .ptl")
    if isinstance(returned, nn.Module):
        return returned, None
    if isinstance(returned, tuple) and len(returned) == 2 and isinstance(returned[0], nn.Module):
        return returned
    raise UsageError(f"{ref.name} returned {type(returned).__name__}, not an nn.Module",
                     "return a module or (module, example_inputs)")


def _dump(ref: ModelRef, returned, target: Path, imported: set[str]) -> None:
    """Pickle ``returned`` to ``target``; the user's own modules go by value, so that the
    parent rebuilds their classes without importing (running) the user's files."""
    import cloudpickle

    for name in sorted(_own_packages(ref, imported)):
        with contextlib.suppress(ValueError):  # not a module any more (the user's code replaced it)
            cloudpickle.register_pickle_by_value(sys.modules[name])
    try:
        data = cloudpickle.dumps(returned)
    except Exception as exc:  # noqa: BLE001 - anything the module holds that cannot be sent
        raise UsageError(f"{ref.name} returned a module aiot cannot take over from its process: "
                         f"{type(exc).__name__}: {first_line(exc)}",
                         "keep open files, locks and threads out of the module's attributes") from None
    partial = target.with_suffix(".part")
    partial.write_bytes(data)
    partial.replace(target)


def _own_packages(ref: ModelRef, imported: set[str]) -> set[str]:
    """Top-level names of the modules that are the user's: the reference's own, and what it
    imported that is not installed in Python's library folders (stdlib, site-packages)."""
    library = {Path(p).resolve() for key in ("stdlib", "platstdlib", "purelib", "platlib")
               if (p := sysconfig.get_paths().get(key))}
    library |= {Path(p).resolve() for p in sys.path if p and "-packages" in p}
    own = {ref.module.partition(".")[0]} if ref.module else {user_module_name(ref)}
    for name in imported:
        top = name.partition(".")[0]
        module = sys.modules.get(top)
        file = getattr(module, "__file__", None)
        if not file or top in own:
            continue
        path = Path(file).resolve()
        if not any(path.is_relative_to(folder) for folder in library):
            own.add(top)
    return {name for name in own if name in sys.modules}


def _where(ref: ModelRef) -> str:
    return ref.module or ref.path.name


__all__ = ["DEFAULT_TIMEOUT_S", "TIMEOUT_ENV", "build_in_child", "child_main", "factory_timeout", "first_line"]
