"""Scores computed from stored run records, one module per score.

- :mod:`aiot.host.scores.om_infer`: BiBench's hardware-inference score (speedup and
  compression of binarized models over their FP32 baselines).
- :mod:`aiot.host.scores.vips`: AIoTBench's VIPS and VOPS per device.
- :mod:`aiot.host.scores.inputs`: external measurements (CSV) for both, with row-numbered
  errors. BiBench's OM_comp lives with the complexity counts in
  :mod:`aiot.models.bibench.complexity`.

Every module holds pure functions over :class:`~aiot.host.store.RunRecord` lists and
dataclasses with ``to_dict()``, so the CLI, notebooks and tests compute the same numbers.
Nothing here imports Rich or Typer; import the score's own module.
"""
