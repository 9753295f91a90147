"""The engine wing: what turns a request to measure into a stored, defensible record.

Run requests and sweeps (runs, campaign), executing one run (executor), checks before a run
(signature, input shapes, weights), the verdict after (validity, cooldown), provenance,
dataset shards for accuracy, per-operator profiles, and the papers' procedures (AIoTBench,
BiBench's hardware tables). It uses the device wing and the store; the CLI calls it.
"""
