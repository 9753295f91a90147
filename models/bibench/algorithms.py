"""The eight BiBench algorithms: registry, and what each one needs at inference (Table 4/6)."""

from __future__ import annotations

from dataclasses import dataclass

from aiot.core.registry import Registry
from aiot.models.bibench import bireal, bnn, dorefa, fda, reactnet, recu, xnor, xnorpp


@dataclass(frozen=True)
class Algorithm:
    """One binarization algorithm and its inference-time needs.

    Args:
        name: CLI name.
        title: the paper's name for it.
        paper: first author, year.
        conv, linear: the drop-in layer classes.
        scale: weight scaling factor granularity at inference: ``none``, ``layer``,
            ``channel`` or ``spatial`` (BiBench Table 4's "s Granularity").
        activation_rescaling: the output is multiplied by a statistic of the input.
        activation_mean_shift: activations are binarized around a learned threshold.
        gradient: the activation sign's gradient approximation, in words.
    """

    name: str
    title: str
    paper: str
    conv: type
    linear: type
    scale: str
    activation_rescaling: bool
    activation_mean_shift: bool
    gradient: str

    def to_dict(self) -> dict:
        """JSON-able facts (layer classes by name)."""
        return {"name": self.name, "title": self.title, "paper": self.paper, "scale": self.scale,
                "activation_rescaling": self.activation_rescaling,
                "activation_mean_shift": self.activation_mean_shift, "gradient": self.gradient}


#: The algorithms by CLI name; ``ALGORITHMS.get(name)`` suggests close names when unknown.
ALGORITHMS: Registry[Algorithm] = Registry("binarization algorithm")

for _algorithm, _aliases in (
    (Algorithm("bnn", "BNN", "Courbariaux et al., 2016", bnn.BNNConv2d, bnn.BNNLinear,
               "none", False, False, "clipped STE"), ("binarynet",)),
    (Algorithm("xnor", "XNOR-Net", "Rastegari et al., 2016", xnor.XNORConv2d, xnor.XNORLinear,
               "channel", True, False, "clipped STE"), ("xnor-net", "xnornet")),
    (Algorithm("dorefa", "DoReFa-Net", "Zhou et al., 2016", dorefa.DoReFaConv2d,
               dorefa.DoReFaLinear, "layer", False, False, "clipped STE"),
     ("dorefa-net", "dorefanet")),
    (Algorithm("bireal", "Bi-Real Net", "Liu et al., 2018", bireal.BiRealConv2d,
               bireal.BiRealLinear, "channel", False, False, "piecewise polynomial"),
     ("bi-real", "bi_real", "birealnet", "bi-real-net")),
    (Algorithm("xnorpp", "XNOR-Net++", "Bulat & Tzimiropoulos, 2019", xnorpp.XNORPlusPlusConv2d,
               xnorpp.XNORPlusPlusLinear, "spatial", False, False, "clipped STE"),
     ("xnor++", "xnor-net++", "xnornet++", "xnorplusplus")),
    (Algorithm("reactnet", "ReActNet", "Liu et al., 2020", reactnet.ReActConv2d,
               reactnet.ReActLinear, "channel", False, True, "piecewise polynomial"),
     ("react", "react-net")),
    (Algorithm("recu", "ReCU", "Xu et al., 2021", recu.ReCUConv2d, recu.ReCULinear,
               "channel", False, False, "piecewise polynomial (weights: rectified clamp + STE)"),
     ()),
    (Algorithm("fda", "FDA", "Xu et al., 2021", fda.FDAConv2d, fda.FDALinear,
               "channel", False, False, "Fourier series of the sign"), ()),
):
    ALGORITHMS.add(_algorithm.name, _algorithm, _aliases)


def get_algorithm(name: str) -> Algorithm:
    """The algorithm called ``name`` (or an alias); UnknownName with close names otherwise."""
    return ALGORITHMS.get(name)
