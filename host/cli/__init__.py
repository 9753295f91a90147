"""The ``aiot`` command line: one Typer module per command group."""
