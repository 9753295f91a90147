"""Which device a command talks to, and what we know about it."""

from __future__ import annotations

import os

from aiot.host.errors import UnknownName
from aiot.host.transports.base import Transport
from aiot.host.transports.local import LocalTransport

LOCAL = "local"


def known_devices() -> list[str]:
    """Names of the devices aiot can reach now (the embedded ``local`` device is always one)."""
    return [LOCAL]


def resolve_name(explicit: str | None) -> str:
    """Device choice: explicit ``--device`` > ``$AIOT_DEVICE`` > the embedded ``local``."""
    return explicit or os.environ.get("AIOT_DEVICE") or LOCAL


def open_transport(name: str | None = None) -> Transport:
    """A Transport for ``name`` (see :func:`resolve_name`).

    Raises:
        UnknownName: no such device, with close matches.
    """
    name = resolve_name(name)
    if name == LOCAL:
        return LocalTransport()
    raise UnknownName("device", name, known_devices())
