"""The ``sync:`` service of the emulated adbd: adb's file-transfer sub-protocol.

Requests are ``id(4) u32 len path`` until ``QUIT``: ``STAT`` (v1), ``STA2``/``LST2`` (stat v2),
``LIST``/``LIS2`` (folder listings), ``SEND`` (a file in ``DATA`` chunks up to ``DONE``,
written beside the target and renamed, folders made as ``fixed_push_mkdir`` promises) and
``RECV``. The stream is :class:`aiot.host.emulator.adbd.Stream`; the device maps paths into a
phone's root (``DeviceConfig.host_path``). Standard library only.
"""

from __future__ import annotations

import os
import struct
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiot.host.emulator.adbd import DeviceConfig, Stream

SYNC_DATA_MAX = 64 * 1024


def _lstat_tuple(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except OSError:
        return None


def _sync_stat_v1(stream: Stream, path: str) -> None:
    st = _lstat_tuple(path)
    mode, size, mtime = (st.st_mode, st.st_size, int(st.st_mtime)) if st else (0, 0, 0)
    stream.write(b"STAT" + struct.pack("<III", mode, size & 0xFFFFFFFF, mtime))


def _stat_v2_fields(st: os.stat_result | None, error: int) -> bytes:
    if st is None:
        return struct.pack("<I", error) + bytes(64)
    return struct.pack("<IQQIIIIQqqq", 0, st.st_dev, st.st_ino, st.st_mode, st.st_nlink, st.st_uid,
                       st.st_gid, st.st_size, int(st.st_atime), int(st.st_mtime), int(st.st_ctime))


def _sync_stat_v2(stream: Stream, ident: bytes, path: str) -> None:
    try:
        st, error = (os.stat(path) if ident == b"STA2" else os.lstat(path)), 0
    except OSError as exc:
        st, error = None, exc.errno or 2
    stream.write(ident + _stat_v2_fields(st, error))


def _sync_list(stream: Stream, path: str, v2: bool) -> None:
    try:
        names = sorted(os.listdir(path))
    except OSError:
        names = []
    for name in [".", "..", *names]:
        st = _lstat_tuple(os.path.join(path, name))
        if st is None:
            continue
        raw = name.encode()
        if v2:
            stream.write(b"DNT2" + _stat_v2_fields(st, 0) + struct.pack("<I", len(raw)) + raw)
        else:
            stream.write(b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF,
                                               int(st.st_mtime), len(raw)) + raw)
    stream.write(b"DONE" + bytes(72 if v2 else 16))  # a zeroed dent of the same size


def _sync_fail(stream: Stream, message: str) -> None:
    raw = message.encode()
    stream.write(b"FAIL" + struct.pack("<I", len(raw)) + raw)


def _sync_send(stream: Stream, spec: str) -> None:
    """Receive a file: DATA chunks until DONE, written to ``path.aiot-recv`` then renamed."""
    path, _, mode_text = spec.rpartition(",")
    if not path:
        path, mode_text = spec, "33188"
    mode = int(mode_text) & 0o7777 if mode_text.isdigit() else 0o644
    error, out, tmp = None, None, f"{path}.adbd-part"
    try:
        os.makedirs(os.path.dirname(path) or "/", exist_ok=True)  # fixed_push_mkdir
        out = open(tmp, "wb")
    except OSError as exc:
        error = f"{path}: {exc.strerror or exc}"
    # Always drain DATA up to DONE, even after an error, or the stream desynchronises.
    while True:
        ident, size = struct.unpack("<4sI", stream.read_exact(8))
        if ident == b"DATA":
            data = stream.read_exact(size)
            if out is not None and error is None:
                try:
                    out.write(data)
                except OSError as exc:
                    error = f"{path}: {exc.strerror or exc}"
        elif ident == b"DONE":
            break
        else:
            error = error or f"unexpected sync id {ident!r} during SEND"
            break
    if out is not None:
        try:
            out.close()  # flushes: a full disk can fail here, not in write()
        except OSError as exc:
            error = error or f"{path}: {exc.strerror or exc}"
        if error is None:
            try:
                os.chmod(tmp, mode)
                os.replace(tmp, path)
            except OSError as exc:
                error = f"{path}: {exc.strerror or exc}"
        if error is not None and os.path.exists(tmp):
            os.unlink(tmp)
    if error:
        _sync_fail(stream, error)
    else:
        stream.write(b"OKAY" + bytes(4))


def _sync_recv(stream: Stream, path: str) -> None:
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(SYNC_DATA_MAX):
                stream.write(b"DATA" + struct.pack("<I", len(chunk)) + chunk)
    except OSError as exc:
        _sync_fail(stream, f"{path}: {exc.strerror or exc}")
        return
    stream.write(b"DONE" + bytes(4))


def serve_sync(stream: Stream, device: DeviceConfig) -> None:
    """The file-transfer service: requests are ``id(4) u32 len path`` until QUIT."""
    while True:
        ident, size = struct.unpack("<4sI", stream.read_exact(8))
        if ident == b"QUIT":
            return
        path = device.host_path(stream.read_exact(size).decode(errors="surrogateescape"), ident == b"SEND")
        if ident == b"STAT":
            _sync_stat_v1(stream, path)
        elif ident in (b"STA2", b"LST2"):
            _sync_stat_v2(stream, ident, path)
        elif ident in (b"LIST", b"LIS2"):
            _sync_list(stream, path, v2=ident == b"LIS2")
        elif ident == b"SEND":
            _sync_send(stream, path)
        elif ident == b"RECV":
            _sync_recv(stream, path)
        else:
            _sync_fail(stream, f"unknown sync request {ident!r}")
            return
