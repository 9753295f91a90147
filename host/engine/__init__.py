"""The engine wing: what turns a request to measure into a stored, defensible record.

- What is asked: a run's values (``runs``: RunRequest, MeasureParams, sweep expansion), a
  measurement's settings as one frozen SweepSpec (``spec``), ``--input-shape`` (``input_shapes``,
  ``shape_guess``), and the checks before anything converts (``preflight``, ``signature``,
  ``weights``, ``user_artifact``).
- Running it: the device sessions of one invocation (``workspace``), one run end to end
  (``executor``), a sweep over devices in parallel, resumable, and ``run_sweep`` (``campaign``),
  dataset shards for on-device accuracy (``shards``), per-operator profiles (``profiles``).
- Judging it: cool-down and device state (``cooldown``), VALID / INVALID (``validity``),
  where a result came from (``provenance``).
- The papers' procedures: AIoTBench (``aiotbench``), BiBench's hardware tables (``bibench_hw``,
  ``bibench_paper``).

It may import the device wing (devices, transports, app, native, lab), the store, training
(cached weights), scores, and the lower layers (converters, models, core); never the CLI.
"""
