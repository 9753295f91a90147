"""``python -m aiot`` runs the CLI."""

from aiot.host.cli.app import main

main()
