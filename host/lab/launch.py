"""``ray start`` as a lab node runs it (``python -m aiot.host.lab.launch start ...``): Ray's own
CLI, except that a loopback ``--node-ip-address`` or ``--address`` stays loopback (see
:func:`aiot.host.lab.security.keep_loopback`)."""

from __future__ import annotations

import sys

from aiot.host.lab.security import keep_loopback


def main() -> None:
    """Run Ray's CLI with this process's arguments."""
    keep_loopback()
    from ray.scripts.scripts import main as ray_main

    sys.argv = ["ray", *sys.argv[1:]]
    ray_main()


if __name__ == "__main__":
    main()
