"""The store: run records in SQLite (standard library), and what is read back from them.

``store`` (records written ``pending`` before a run, finished after; ``schema`` and its
migrations; ``writer``: which process wrote a record; ``busy``: waiting for a store another
process holds locked; ``unstored``: finished runs kept until the store takes them; ``damage``:
a damaged or truncated store named truly), ``locks`` (cross-process locks on a campaign's
devices and sweep), ``recover`` and ``pages`` (records out of a damaged store), ``identity``
(one run's configuration, key, label and latency), ``provenance`` (what a record keeps about
this host), ``compare`` (regression gates and rankings) and ``output_drift`` (do devices
compute the same outputs?). A record's CSV and ``results show`` lines are the CLI's
(:mod:`aiot.host.cli.record_view`: they read the engine's validity limits).

It imports the lower layers (models, core) and the wings below it (transports, devices); the
engine, the report and the CLI import it.
"""

from aiot.host.store.store import Push, RunRecord, Store, open_store

__all__ = ["Push", "RunRecord", "Store", "open_store"]
