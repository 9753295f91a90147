import json

import pytest
from typer.testing import CliRunner

from aiot.host.cli.app import app


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


@pytest.fixture
def cli():
    return Cli()
