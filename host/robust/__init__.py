"""Robustness of deployed models: system noise, natural corruptions, adversarial attacks.

The three suites (``aiot robust sysnoise | corrupt | attack``) share one shape: build inputs
on the host, ask a :class:`~aiot.host.robust.predictor.Predictor` for scores, and turn the
predictions into the papers' metrics (:mod:`aiot.host.robust.metrics`). A predictor is either
the PyTorch reference on the host or a deployed artifact answering batched queries on a
device (:mod:`aiot.host.robust.deployed`), so every suite can compare the two.

Modules:
    target     what is evaluated: zoo model, weights, binarization, format, device
    data       labelled and unlabelled evaluation images (uint8, before preprocessing)
    predictor  the Predictor protocol and the PyTorch reference predictor
    deployed   a deployed artifact on a device as a Predictor
    metrics    the papers' formulas (pure functions over predictions and accuracies)
    record     one store record per suite run
"""
