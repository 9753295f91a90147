"""The suite's attacks by name, and the groups ``--attacks`` accepts (``all``, ``white-box`` …)."""

from __future__ import annotations

from aiot.core.errors import UnknownName, UsageError
from aiot.core.registry import Registry
from aiot.host.robust.attacks import blackbox, transfer, whitebox
from aiot.host.robust.attacks.base import Attack

ATTACKS: Registry[Attack] = Registry("attack")

_TA, _ART, _AA = ("torch", "torchattacks"), ("torch", "art"), ("torch", "pyautoattack")

for _attack, _aliases in (
    (Attack("fgsm", "FGSM", "white-box", "linf", False, "torchattacks", whitebox.fgsm, modules=_TA), ()),
    (Attack("pgd", "PGD L∞", "white-box", "linf", False, "torchattacks", whitebox.pgd, modules=_TA),
     ("pgd-linf",)),
    (Attack("pgd-l2", "PGD L2", "white-box", "l2", False, "torchattacks", whitebox.pgd_l2, modules=_TA),
     ("pgdl2",)),
    (Attack("cw", "C&W L2", "white-box", "l2", True, "torchattacks", whitebox.cw, modules=_TA),
     ("c&w", "carlini")),
    (Attack("deepfool", "DeepFool", "white-box", "l2", True, "art", whitebox.deepfool, modules=_ART), ()),
    (Attack("autoattack", "AutoAttack", "white-box", "linf", False, "pyautoattack", whitebox.autoattack,
            modules=_AA), ("aa",)),
    (Attack("sinifgsm", "SI-NI-FGSM", "transfer", "linf", False, "torchattacks", transfer.sinifgsm,
            modules=_TA), ("si-ni-fgsm",)),
    (Attack("spsa", "SPSA", "score", "linf", False, "torchattacks", blackbox.spsa, 10_000, _TA), ()),
    (Attack("square", "Square", "score", "linf", False, "torchattacks", blackbox.square, 5_000, _TA), ()),
    (Attack("nattack", "NATTACK", "score", "linf", False, "aiot", blackbox.nattack, 10_000), ()),
    (Attack("boundary", "Boundary", "decision", "l2", True, "art", blackbox.boundary, 10_000, ("art",)), ()),
    (Attack("hsj", "HopSkipJump", "decision", "l2", True, "art", blackbox.hsj, 10_000, ("art",)),
     ("hopskipjump",)),
    (Attack("evolutionary", "Evolutionary", "decision", "l2", True, "aiot", blackbox.evolutionary, 10_000),
     ("evo",)),
):
    ATTACKS.add(_attack.name, _attack, _aliases)

#: ``--attacks`` group names → attack families.
GROUPS = {
    "all": ("white-box", "transfer", "score", "decision"),
    "white-box": ("white-box",),
    "transfer": ("transfer",),
    "black-box": ("score", "decision"),
    "score": ("score",),
    "decision": ("decision",),
}


def select_attacks(text: str) -> list[Attack]:
    """``fgsm,pgd``, ``all``, ``white-box,spsa`` … → attacks in catalogue order, each once.

    Raises:
        UnknownName: a name that is neither an attack nor a group (with close matches).
        UsageError: nothing selected.
    """
    chosen: set[str] = set()
    for word in (part.strip().lower() for part in text.split(",")):
        if not word:
            continue
        if word in GROUPS:
            chosen.update(a.name for a in ATTACKS if a.family in GROUPS[word])
        elif word in ATTACKS:
            chosen.add(ATTACKS.canonical(word))
        else:
            raise UnknownName("attack", word, [*ATTACKS.names(), *GROUPS])
    if not chosen:
        raise UsageError("no attack selected", f"pass --attacks with names from: {', '.join(ATTACKS.names())}")
    return [a for a in ATTACKS if a.name in chosen]
