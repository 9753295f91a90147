#!/usr/bin/env python3
"""Run ``lint-imports`` (import-linter) on aiot's layers contract in pyproject.toml.

import-linter's graph builder (grimp) finds a package's modules by walking its one folder,
while aiot's sub-packages live in the checkout's top-level folders (the ``package-dir``
mapping in pyproject.toml). This lays that mapping out as one ``aiot/`` folder of symlinks in
a temporary directory, puts it first on ``PYTHONPATH`` and runs ``lint-imports`` there; its
arguments pass through. Exit status is lint-imports' own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def package_dirs() -> dict[str, Path]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {name: ROOT / folder for name, folder in config["tool"]["setuptools"]["package-dir"].items()}


def lay_out(target: Path) -> None:
    """``target/aiot`` with the root package's files and a symlink per mapped sub-package."""
    mapping = package_dirs()
    package = target / "aiot"
    package.mkdir()
    for entry in mapping.pop("aiot").iterdir():
        if entry.is_file():
            (package / entry.name).symlink_to(entry)
    for name, folder in mapping.items():
        (package / name.split(".", 1)[1]).symlink_to(folder, target_is_directory=True)


def main(argv: list[str]) -> int:
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    if lint is None:
        print("lint-imports is not installed: run make setup (it comes with aiot's test extra)",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="aiot-lint-") as tmp:
        lay_out(Path(tmp))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tmp, os.environ.get("PYTHONPATH")]))}
        return subprocess.run([lint, "--no-cache", *argv], cwd=ROOT, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
