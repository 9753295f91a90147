"""Adversarial attacks on the PyTorch reference and on its deployed artifact (``aiot robust attack``).

Every attack works in [0, 1] pixel space (budgets in pixel units, as ARBiBench: ε∞ = 0.03,
ε2 = 0.5); the model's normalisation happens inside. Three kinds:

* white-box on the host's reference (FGSM, PGD L∞/L2, C&W, DeepFool, standard AutoAttack),
  their images then evaluated on the deployment too (transfer-to-deployment accuracy);
* transfer from a source model of the same architecture (SI-NI-FGSM; FP32 → BNN and back);
* black-box through a predictor (the deployed artifact on its device, or the reference):
  score-based SPSA, Square, NATTACK and decision-based Boundary, HopSkipJump, Evolutionary,
  with per-image query budgets. NATTACK and Evolutionary are ours, written from the papers.

Modules:
    space         pixel space: pixels ↔ model input, distances, projection onto the ε-ball
    modules       the torch faces libraries need (pixel-space reference, score facade)
    oracle        counted, budgeted black-box queries for one image
    subspace      low-dimensional search grids (bilinear upsampling)
    nattack       NATTACK (Li et al. 2019)
    evolutionary  Evolutionary attack (Dong et al. 2019)
    base          Problem, Crafted, Attack
    whitebox, transfer, blackbox   the runners, one per attack
    catalog       attacks by name and the ``--attacks`` groups
    suite         run the chosen attacks and evaluate them on every model
    result        the record's result dict (summary, table, curves, notes)
"""
