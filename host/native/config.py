"""Where the user's native binaries are: a ``binaries`` table per inventoried device.

::

    [devices.pixel.binaries]
    benchmark_model = "~/bin/android_aarch64_benchmark_model"
    onnxruntime_perf_test = "~/ort-1.21/android-arm64/onnxruntime_perf_test"

Binaries are per device because they are per ABI and OS (an Android build does not run on a
Raspberry Pi OS board). ``DeviceEntry.binaries`` carries the table for ``aiot devices``; it is
read here from the raw TOML so that a bad tool name is reported as such even in an entry that
is otherwise incomplete.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path

from aiot.core.errors import UsageError
from aiot.host.devices.entry import InventoryError, inventory_path
from aiot.host.native.registry import TOOLS


def binaries_from_table(table: object, where: str) -> dict[str, Path]:
    """``{tool: local path}`` from a ``binaries`` table, names checked and ``~`` expanded.

    Raises:
        InventoryError: the table is not a table of strings.
        UnknownName: a key is not a known native tool (with suggestions).
    """
    if not isinstance(table, Mapping):
        raise InventoryError(f"{where}: 'binaries' must be a table of tool = path")
    binaries = {}
    for tool, path in table.items():
        if not isinstance(path, str) or not path:
            raise InventoryError(f"{where}: binaries.{tool} must be a path string")
        binaries[TOOLS.canonical(tool)] = Path(path).expanduser()
    return binaries


def inventory_binaries(device: str, path: Path | None = None) -> dict[str, Path]:
    """The ``[devices.<device>.binaries]`` table of the inventory (empty when absent)."""
    path = path or inventory_path()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InventoryError(f"inventory {path} is unreadable: {exc}") from None
    table = ((raw.get("devices") or {}).get(device) or {}).get("binaries")
    if table is None:
        return {}
    return binaries_from_table(table, f"inventory {path}: device '{device}'")


def resolve_binary(tool: str, device: str, explicit: Path | str | None = None,
                   path: Path | None = None) -> Path:
    """The local binary for ``tool`` on ``device``: ``explicit`` (a CLI flag) > inventory.

    Raises:
        UsageError: neither gives one; the hint shows the inventory lines to add.
    """
    name = TOOLS.canonical(tool)
    if explicit:
        return Path(explicit).expanduser()
    found = inventory_binaries(device, path).get(name)
    if found is None:
        raise UsageError(f"no {name} binary configured for device '{device}'",
                         f'add [devices.{device}.binaries] {name} = "/path/to/{name}" to the '
                         f"inventory")
    return found
