"""The embedded result store (SQLite, standard library)."""

from aiot.host.store.store import RunRecord, Store, open_store

__all__ = ["RunRecord", "Store", "open_store"]
