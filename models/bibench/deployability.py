"""Can an algorithm's binarized model run on LCE or daBNN? BiBench Table 4, as code.

Both libraries run channel-wise FP32 scaling factors folded into the BatchNorm after a
binary convolution; neither can re-scale activations by a statistic of the input at
inference; LCE can shift activations by a fixed (learned) bias before binarizing, daBNN
cannot. From that:

* BNN, DoReFa (a per-layer scale is a channel-wise scale with equal values), Bi-Real, ReCU
  and FDA deploy to both;
* XNOR (activation re-scaling) and XNOR++ (spatial-wise scale factors) deploy to neither;
* ReActNet (activation mean-shifting) deploys to LCE; on daBNN only where every threshold
  can be folded exactly into the BatchNorm that produces the binary layer's input, which
  the daBNN converter checks per layer (BiBench's Table 4 says "no" for daBNN).
"""

from __future__ import annotations

from dataclasses import dataclass

from aiot.models.bibench.algorithms import Algorithm, get_algorithm

#: Inference libraries for binarized models and what they support (Table 4, upper half).
LIBRARIES = {
    "lce": {"title": "Larq Compute Engine", "scale": ("none", "layer", "channel"),
            "activation_rescaling": False, "activation_mean_shift": True},
    "dabnn": {"title": "daBNN", "scale": ("none", "layer", "channel"),
              "activation_rescaling": False, "activation_mean_shift": False},
}


@dataclass(frozen=True)
class Verdict:
    """Whether ``algorithm`` deploys to ``library``.

    Args:
        deployable: ``yes``, ``no`` or ``conditional`` (checked per model at conversion).
        reason: why, in one sentence.
    """

    algorithm: str
    library: str
    deployable: str
    reason: str

    @property
    def refused(self) -> bool:
        """True when conversion must be refused whatever the model."""
        return self.deployable == "no"

    def to_dict(self) -> dict:
        """JSON-able form."""
        return {"algorithm": self.algorithm, "library": self.library,
                "deployable": self.deployable, "reason": self.reason}


def verdict(algorithm: str | Algorithm, library: str) -> Verdict:
    """The deployability of ``algorithm`` on ``library`` (``lce`` or ``dabnn``)."""
    algo = algorithm if isinstance(algorithm, Algorithm) else get_algorithm(algorithm)
    lib = LIBRARIES[library]
    title = lib["title"]
    if algo.scale not in lib["scale"]:
        return Verdict(algo.name, library, "no",
                       f"{algo.title} learns {algo.scale}-wise scale factors, but {title} only "
                       "folds channel-wise FP32 scales into the BatchNorm after a binary conv")
    if algo.activation_rescaling and not lib["activation_rescaling"]:
        return Verdict(algo.name, library, "no",
                       f"{algo.title} re-scales activations by an input statistic at inference, "
                       f"which {title} cannot run")
    if algo.activation_mean_shift and not lib["activation_mean_shift"]:
        return Verdict(algo.name, library, "conditional",
                       f"{title} cannot shift activations before binarizing; each learned "
                       f"{algo.title} threshold must fold into the BatchNorm that feeds the layer")
    extras = {"none": "no scale factors", "layer": "a per-layer scale folded into BatchNorm",
              "channel": "channel-wise scales folded into BatchNorm"}[algo.scale]
    shift = "; thresholds run as a fixed bias" if algo.activation_mean_shift else ""
    return Verdict(algo.name, library, "yes", f"sign activations and weights, {extras}{shift}")


def verdicts(algorithm: str | Algorithm) -> list[Verdict]:
    """The verdict for every library in :data:`LIBRARIES`."""
    return [verdict(algorithm, library) for library in LIBRARIES]
