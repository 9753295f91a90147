"""Surviving the Android app seccomp filter: system calls it traps are skipped, not fatal.

A process the Android app starts inherits the app's seccomp filter, which answers a system
call bionic never makes with ``SIGSYS`` (``SECCOMP_RET_TRAP``): a kill, unless the process
handles the signal. Then the call is simply not made and the program goes on. aiot's runtime
already has the calls glibc makes at start and per thread taken out (the host patches its
loader and libc, see ``aiot.host.app.seccomp``); what is left are calls libraries make through
``syscall()`` that nothing can patch, such as OpenBLAS's NUMA ``mbind`` when NumPy loads.
Those only tune memory placement, so skipping them changes no result.

Installed before anything else is imported (``__main__``) when the app asks for it
(``AIOT_SIGSYS=skip``); the count of skipped calls goes into the agent's results, a lower
bound (signals that arrive together are handled once).
"""

import os
import signal

_skipped = 0
_installed = False


def _skip(signum, frame) -> None:
    global _skipped
    _skipped += 1


def install_from_env() -> bool:
    """Install the skipping handler when ``AIOT_SIGSYS=skip``; True when it is installed."""
    global _installed
    if os.environ.get("AIOT_SIGSYS") != "skip" or not hasattr(signal, "SIGSYS"):
        return False
    signal.signal(signal.SIGSYS, _skip)
    _installed = True
    return True


def skipped():
    """How many trapped calls were skipped so far (at least), or None without the handler."""
    return _skipped if _installed else None
