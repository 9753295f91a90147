"""Natural corruptions (``aiot robust corrupt``): ImageNet-C corruptions and perturbation sequences.

Modules:
    imagenet_c  the 15 ImageNet-C corruptions x 5 severities through ``imagecorruptions``
                (seeded per image, cached per image set)
    sequences   our own sequences of gradually increasing perturbation (flip probability)
    summary     NR / G / NCI / mNR / OM_robust from an accuracy table (pure)
    photos      ragged photo sets brought to the model's input size (uint8 RGB) before corrupting
    suite       the suite run: corrupt, preprocess, predict, score, build the result dict
"""
