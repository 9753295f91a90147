"""The ``aiot`` command line: one Typer module per command group.

``app`` is the root: its table ``COMMANDS`` names each command, the module that defines it and
its help, so ``aiot --help`` imports no command module; a module is imported when its command
runs (``lazy``: the group that does this; ``aiot robust`` is one too). ``options`` holds the
options and parsers several commands share, ``_output`` the consoles, JSON and progress. The CLI
parses options, hands them to the engine (``aiot.host.*``) and prints what comes back; only it
imports this package.
"""
