"""Training on the host: zoo models (FP or BiBench-binarized) on a dataset, weights cached by
a key of what was trained (:mod:`~aiot.host.training.trainer`), and the outcome stored as a
``train`` record (:mod:`~aiot.host.training.record`).

torch is imported only while training runs, so the engine can read the weights cache
(``SUMMARY_VERSION``, summaries) without it. It imports the store, the engine's provenance and
the lower layers (models, core).
"""
