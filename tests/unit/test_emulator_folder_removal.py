"""``aiot emulator stop`` takes a phone's folder away at once: a phone set up with its
runtimes holds thousands of files, and deleting them one by one made ``emulator stop`` take
over a minute on a busy disk (issue 39). The folder is renamed into the trash beside it and a
detached process deletes it."""

from __future__ import annotations

import time

from aiot.host.emulator.ssh import TRASH, remove_folder
from aiot.host.emulator.state import load_all


def _runtime_like(folder, files: int) -> None:
    for i in range(files):
        sub = folder / "data" / "local" / "tmp" / f"pkg{i % 40}"
        sub.mkdir(parents=True, exist_ok=True)
        (sub / f"mod{i}.py").write_text("x = 1\n")
    (folder / "state.json").write_text("{}")


def test_a_stopped_emulators_folder_is_gone_at_once_and_deleted_in_the_background(tmp_path):
    folder = tmp_path / "emulators" / "phone"
    _runtime_like(folder, 3000)
    started = time.monotonic()
    remove_folder(folder)
    took = time.monotonic() - started
    assert not folder.exists()
    assert took < 2.0, f"remove_folder waited {took:.1f} s for the files"
    trash = folder.parent / TRASH
    deadline = time.monotonic() + 60
    while trash.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not trash.exists(), list(trash.rglob("*"))[:5]


def test_the_trash_is_no_emulator(monkeypatch, tmp_path):
    monkeypatch.setenv("AIOT_STATE_DIR", str(tmp_path / "state"))
    from aiot.host.emulator.state import emulators_dir

    trash = emulators_dir() / TRASH / "phone-1-2"
    trash.mkdir(parents=True)
    (trash / "state.json").write_text('{"name": "phone"}')
    assert load_all() == []
