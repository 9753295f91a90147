"""Telemetry read live for the devices page: a free, online device is asked for its battery,
temperatures and CPU frequencies now and then, in the background, so the page never waits on a
slow phone and a rack's readings are minutes fresh, not a night's old.

A busy device is never asked: the reading is a shell round trip that would load a device in
the middle of a measurement. Its row shows what its newest record stored instead, and says so.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from aiot.core.errors import AiotError
from aiot.host.devices.resolve import open_transport
from aiot.host.devices.telemetry import read_telemetry

#: How often a free device is read, and how long one reading may take.
EVERY_S, TIMEOUT_S = 30.0, 5.0


class LiveTelemetry:
    """The newest live reading per device, refreshed in the background when due."""

    def __init__(self, every_s: float = EVERY_S, timeout_s: float = TIMEOUT_S, read=None) -> None:
        self.every_s, self.timeout_s = every_s, timeout_s
        self._read = read or self._read_device
        self._readings: dict[str, dict] = {}  # device -> telemetry dict with "read_at"
        self._asked: dict[str, float] = {}  # device -> when the last reading was started
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="aiot-view-telemetry")

    def reading(self, device: str, state: str) -> dict | None:
        """``device``'s newest live reading (None before the first), and a new one started
        in the background when the device is online and free and its reading is due."""
        now = time.monotonic()
        with self._lock:
            due = state == "online" and now - self._asked.get(device, -self.every_s) >= self.every_s
            if due:
                self._asked[device] = now
            found = self._readings.get(device)
        if due:
            self._pool.submit(self._refresh, device)
        return found

    def _refresh(self, device: str) -> None:
        try:
            reading = self._read(device)
        except AiotError as exc:  # unreachable now: the reachability column says so; keep the last
            with self._lock:
                old = self._readings.get(device)
                if old is not None:
                    self._readings[device] = {**old, "error": exc.message}
            return
        with self._lock:
            self._readings[device] = reading

    def _read_device(self, device: str) -> dict:
        transport = open_transport(device)
        try:
            found = read_telemetry(transport, timeout=self.timeout_s).to_dict()
        finally:
            transport.close()
        return {**found, "read_at": found["timestamp"]}

    def close(self) -> None:
        """Stop reading (readings under way finish on their own)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
