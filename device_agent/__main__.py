"""Entry point: ``python -m device_agent ...`` on a device, ``python -m aiot.device_agent`` on the host."""

import sys

from . import seccomp

# Before the agent and its runtimes are imported: NumPy's OpenBLAS makes a trapped call on import.
seccomp.install_from_env()

from .cli import main  # noqa: E402 - after the seccomp handler, as said above

sys.exit(main())
