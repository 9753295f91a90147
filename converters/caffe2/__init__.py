"""Caffe2 NetDef (emit-only, legacy): the converter and the pieces it is written with.

- ``converter``: :class:`Caffe2Converter` (registers "caffe2"); the mapping from PyTorch layers.
- ``proto``: the NetDef protobuf messages, built from a descriptor (no caffe2 package).
- ``reference``: a NumPy executor of the operators aiot emits (parity, shape checks).
"""

from aiot.converters.caffe2.converter import FORMAT, Caffe2Converter
from aiot.core.companions import init_net_path  # the init net beside a predict net

__all__ = ["FORMAT", "Caffe2Converter", "init_net_path"]
