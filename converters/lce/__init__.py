"""Larq Compute Engine (binarized TFLite): the converter and its toolchain script.

- ``converter``: :class:`LceConverter` (registers "lce"): lowers the model, writes it as
  JSON + NPZ and checks LCE's op list and the binary layers' signs.
- ``build``: a standalone script run BY PATH (``BUILD_SCRIPT``) with the ``lce`` toolchain's
  interpreter; it imports nothing from aiot.
"""

from aiot.converters.lce.converter import TOOLCHAIN, LceConverter

__all__ = ["TOOLCHAIN", "LceConverter"]
