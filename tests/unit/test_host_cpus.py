"""PyTorch work on the host takes the CPUs that are idle when a command starts."""

import pytest

from aiot.core import host_cpus
from aiot.core.errors import UsageError


@pytest.mark.parametrize(("usable", "load", "threads"), [
    (2, 0.0, 2), (2, 0.6, 1), (2, 0.4, 2), (2, 6.0, 1), (8, 2.2, 6), (8, 0.0, 8), (1, 3.0, 1)])
def test_the_idle_cpus_at_least_one(usable, load, threads):
    assert host_cpus.idle_threads(usable, load) == threads


def test_a_busy_host_gets_fewer_threads_and_the_variable_decides(monkeypatch):
    monkeypatch.setattr(host_cpus, "usable_cpus", lambda: 4)
    monkeypatch.setattr(host_cpus.os, "getloadavg", lambda: (3.1, 3.0, 3.0))
    monkeypatch.delenv(host_cpus.ENV, raising=False)
    host_cpus.host_threads.cache_clear()
    try:
        assert host_cpus.host_threads() == 1
        host_cpus.host_threads.cache_clear()
        monkeypatch.setenv(host_cpus.ENV, "3")
        assert host_cpus.host_threads() == 3
        host_cpus.host_threads.cache_clear()
        monkeypatch.setenv(host_cpus.ENV, "two")
        with pytest.raises(UsageError, match="AIOT_HOST_THREADS must be a positive integer"):
            host_cpus.host_threads()
    finally:
        host_cpus.host_threads.cache_clear()
