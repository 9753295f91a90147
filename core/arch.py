"""CPU architecture names. Android ABIs, ``uname -m``, Python's ``platform.machine()`` and the
``--arch`` option spell the same CPU differently; everything compares canonical names."""

from __future__ import annotations

import platform

_CANONICAL = {"arm64-v8a": "aarch64", "arm64": "aarch64", "amd64": "x86_64", "x64": "x86_64",
              "armeabi-v7a": "armv7l"}
_ANDROID_ABI = {"aarch64": "arm64-v8a", "armv7l": "armeabi-v7a"}
_OPTION = {"aarch64": "arm64"}  # what users type after --arch


def canonical(name: str) -> str:
    """uname's spelling: ``aarch64``, ``x86_64``, ``armv7l``."""
    name = name.lower()
    return _CANONICAL.get(name, name)


def native() -> str:
    """This machine's architecture, canonical."""
    return canonical(platform.machine())


def android_abi(name: str) -> str:
    """The Android ABI of an architecture (``arm64-v8a``, ``x86_64``)."""
    return _ANDROID_ABI.get(canonical(name), canonical(name))


def option_name(name: str) -> str:
    """The ``--arch`` spelling (``arm64``, ``x86_64``)."""
    return _OPTION.get(canonical(name), canonical(name))
