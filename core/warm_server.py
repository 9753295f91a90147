"""A warm toolchain interpreter: imports the toolchain's heavy modules once, then forks a
child per command (the zygote pattern of the device agent's ``session``).

Runs INSIDE a toolchain environment, BY PATH, with the standard library only:
``python -P warm_server.py MODULE...``, then a first line ``{"warm_up": CODE}``. Starting a toolchain's interpreter costs more than
most of what it is asked to do: ``import executorch.exir`` takes ~13 s of CPU, TensorFlow
~7 s, and an LCE conversion or an ExecuTorch lowering of a small model a few seconds. This
process imports the named modules once (a module that fails to import is only said on
stderr: the commands import it again and meet the error themselves) and runs the warm-up
code (:func:`_warm_up`), then reads commands on stdin, one JSON object per line::

    {"argv": ["-P", "script.py", "a"] | ["-m", "module", "a"] | ["-c", "code"],
     "cwd": "/dir" | null, "env": {...}, "stdout": "/file", "stderr": "/file"}

and answers each on stdout with two lines, ``{"pid": N}`` when the child started and
``{"status": S}`` when it ended (its exit code, or minus the signal that killed it, as
``subprocess`` reports it). The child is what ``python ARGV`` would have been: its own
``sys.argv``, working directory, environment, ``sys.path[0]`` and ``__main__``, its output
written to the two files, stdin empty; it shares this process's group, so the host ends a
command in flight by killing the group (this process with it). End of stdin ends this
process.
"""

from __future__ import annotations

import importlib
import json
import os
import runpy
import sys
import traceback
import types


def main(modules: list[str]) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    requests = os.fdopen(os.dup(0), "r")
    # What the modules print on import must not reach the protocol.
    os.dup2(2, 1)
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - any import failure only loses warmth
            print(f"warm_server: {name} did not import: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
    _warm_up(json.loads(requests.readline() or "{}").get("warm_up") or "")
    sys.stdout.flush()
    sys.stderr.flush()
    proto.write(json.dumps({"ready": os.getpid()}) + "\n")
    for line in requests:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:
            proto.close()
            requests.close()
            os._exit(_child(request))
        proto.write(json.dumps({"pid": pid}) + "\n")
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        proto.write(json.dumps({"status": code}) + "\n")
    return 0


def _warm_up(code: str) -> None:
    """Run the toolchain's warm-up ``code`` here, once, before any fork: work whose first run
    in a process fills caches that every later run reuses (ExecuTorch's first lowering takes
    ~13 s, the next ones ~5 s). torch runs it on one thread, so no OpenMP team exists to be
    forked (the setting is put back: a child's threads are a fresh process's)."""
    if not code:
        return
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    if torch is not None:
        torch.set_num_threads(1)
    try:
        exec(compile(code, "<warm-up>", "exec"), {"__name__": "__warm_up__"})  # noqa: S102
    except BaseException as exc:  # noqa: BLE001 - a failed warm-up only loses warmth
        print(f"warm_server: the warm-up failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        if torch is not None:
            torch.set_num_threads(threads)


def _child(request: dict) -> int:
    """Become ``python ARGV`` (see the module) and return its exit code."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        out = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(out, fd)
        os.close(out)
    os.environ.clear()
    os.environ.update(request["env"])
    cwd = request.get("cwd") or os.getcwd()
    os.chdir(cwd)
    try:
        _run(request["argv"], cwd)
        code = 0
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except BaseException:  # noqa: BLE001 - what an uncaught exception does to python
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    return code


def _run(argv: list[str], cwd: str) -> None:
    safe_path = argv[:1] == ["-P"]
    if safe_path:
        argv = argv[1:]
    _name_process(argv[1] if argv[0] in ("-m", "-c") else os.path.basename(argv[0]))
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path.insert(0, cwd)  # python -m: the working directory first
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        if not safe_path:
            sys.path.insert(0, "")
        module = types.ModuleType("__main__")
        sys.modules["__main__"] = module
        exec(compile(argv[1], "<string>", "exec"), module.__dict__)  # noqa: S102
    else:
        sys.argv = list(argv)
        if not safe_path:
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


def _name_process(name: str) -> None:
    """Show what this child runs in ``ps`` and ``/proc/PID/comm`` (a fork keeps the server's
    command line): the script's or module's name, as Linux keeps it (15 bytes)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(15, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)  # PR_SET_NAME
    except (OSError, AttributeError):
        pass


def _exit_code(code) -> int:
    """``sys.exit(code)`` as the interpreter turns it into an exit status."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
