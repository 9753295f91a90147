"""core.fileio.staged_folder: a cache entry (a conversion, an arm64 userland, device wheels)
appears whole by one rename, or not at all."""

from __future__ import annotations

import pytest

from aiot.core.fileio import staged_folder


def test_the_folder_appears_whole_when_the_block_succeeds(tmp_path):
    final = tmp_path / "entry"
    with staged_folder(final, mode=0o755) as work:
        (work / "a").write_text("1")
        assert not final.exists()  # nothing to see until the block is done
    assert (final / "a").read_text() == "1" and (final.stat().st_mode & 0o777) == 0o755
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]


def test_a_failed_block_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError), staged_folder(tmp_path / "entry") as work:
        (work / "a").write_text("half")
        raise RuntimeError("the download broke")
    assert list(tmp_path.iterdir()) == []


def test_another_writers_folder_wins(tmp_path):
    final = tmp_path / "entry"
    with staged_folder(final) as work:
        (work / "ours").write_text("1")
        final.mkdir()
        (final / "theirs").write_text("2")
    assert [p.name for p in final.iterdir()] == ["theirs"]
    assert [p.name for p in tmp_path.iterdir()] == ["entry"]
