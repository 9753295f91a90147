"""daBNN (``.dab``): the converter and the pieces it is written with.

- ``converter``: :class:`DabnnConverter` (registers "dabnn"); the mapping from PyTorch layers.
- ``emit``: aiot's layer list → daBNN layers and tensors (sign shifts, folded thresholds).
- ``schema``: daBNN's flatbuffer schema, written and read without generated code.
- ``reference``: a NumPy executor of daBNN's semantics (parity, sign probes, ``describe``).
- ``form``: what a binarized model becomes on daBNN (clamps it drops); imports torch.
"""

from aiot.converters.dabnn.converter import FORMAT, DabnnConverter

__all__ = ["FORMAT", "DabnnConverter"]
