"""Entry point: ``python -m device_agent ...`` on a device, ``python -m aiot.device_agent`` on the host."""

import sys

from .agent import main

sys.exit(main())
