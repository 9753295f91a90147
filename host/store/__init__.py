"""The embedded result store (SQLite, standard library)."""

from aiot.host.store.store import Push, RunRecord, Store, open_store

__all__ = ["Push", "RunRecord", "Store", "open_store"]
