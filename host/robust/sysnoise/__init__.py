"""SysNoise: how much the deployment system's choices change a model's predictions.

SysNoise (``../shared/spec.md`` §5) and RobustMQ's systematic noise: the same image and model,
with one step of the pipeline done differently than in training. Pipeline per image: source
pixels -> JPEG (captured once, :mod:`.camera`) -> decoder (:mod:`.decoders`) -> resize
(:mod:`.resize`) -> colour (:mod:`.colour`) -> the model's normalisation -> predictor. Noise
types, each changing exactly one step of the reference pipeline:

* ``decoder``: PyAV/FFmpeg, libjpeg-turbo fast IDCT / fast upsampling, pylibjpeg-libjpeg,
  kornia-rs vs Pillow (decoders bit-identical to Pillow are reported as such);
* ``resize``: Pillow's 6 filters and OpenCV's 5 interpolations vs Pillow bilinear, down and up;
* ``colour``: RGB -> NV12 -> RGB (OpenCV, swscale) vs unchanged;
* ``precision``: FP16 / INT8 TFLite artifacts vs FP32 on the device;
* ``variants``: max-pool ceil_mode and upsampling mode flipped in a copy of the model
  (:mod:`.variants`);
* ``platform``: the same artifact on each device vs PyTorch on the host.

Metrics (:mod:`.scoring`): accuracy, ``dACC`` (mean and max per type), top-1 flip rate and
agreement (no labels needed), RobustMQ's SNI and systematic robustness (std of SNI) for
decoders and resizers.

Usage::

    from aiot.host.robust.sysnoise import evaluate
    result, provenance = evaluate(target, eval_set("fashion-mnist", 500), types=["decoder"])
"""

from aiot.host.robust.sysnoise.suite import DEPLOYED, TYPES, evaluate, parse_types

__all__ = ["DEPLOYED", "TYPES", "evaluate", "parse_types"]
