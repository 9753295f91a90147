"""Latency prediction from the lab's own store (``aiot predict``): a model's median on a device
before it runs there, summed from kernels measured there, nn-Meter's way.

Modules:
    blocks      the kernels and blocks collected, as small PyTorch modules (a standalone file)
    grid        which kernels and models a collection measures
    collect     measuring them as one resumable sweep, within a time budget
    decompose   a model's ``torch.export`` graph cut into kernels by the runtimes' fusions
    graphs      the kernels of any model aiot converts (zoo, code, program), kept in a cache;
                the collected kernels' torch.export programs
    features    a kernel's numbers as the regressors read them, and the collected ranges
    training    the VALID runs of a target a predictor learns from, and what was left out
    fitting     the kernel regressors (scikit-learn) and how kernels add up to a model
    predictor   a fitted predictor: fit, store (JSON beside the store), ask
    evaluate    whole families held out: RMSE, MAPE, within ±5 % and ±10 %
    record      a prediction kept as a store record, which later runs check

The wing stands above the engine, the store and the lab (it drives a sweep and reads records)
and below only the CLI: the views that show a stored prediction beside a run (``aiot results
show``, the report) read the record through :mod:`aiot.host.store.predictions`, never this wing.
"""
