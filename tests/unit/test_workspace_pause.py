"""A cool-down wait (up to --cooldown-max-s, 120 s by default) is cut short by a campaign's
cancel: the worker raises at once instead of sleeping out its poll (issue 39, item 9)."""

from __future__ import annotations

import threading
import time

import pytest

from aiot.core.errors import AiotError
from aiot.host.engine.workspace import Workspace


def test_a_cancel_wakes_a_cool_down_pause(tmp_path):
    workspace = Workspace(tmp_path)
    threading.Timer(0.2, workspace.cancel).start()
    started = time.monotonic()
    with pytest.raises(AiotError, match="cancelled"):
        workspace.pause(60)
    assert time.monotonic() - started < 5


def test_a_pause_without_a_cancel_sleeps_its_time(tmp_path):
    started = time.monotonic()
    Workspace(tmp_path).pause(0.1)
    assert time.monotonic() - started >= 0.1
