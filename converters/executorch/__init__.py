"""ExecuTorch (``.pte``): the converter and its toolchain script.

- ``converter``: :class:`ExecutorchConverter` (registers "executorch"): ``torch.export`` here.
- ``lower``: a standalone script run BY PATH (``LOWER_SCRIPT``) with the ``executorch``
  toolchain's interpreter (XNNPACK lowering); it imports nothing from aiot.
"""

from aiot.converters.executorch.converter import TOOLCHAIN, ExecutorchConverter

__all__ = ["TOOLCHAIN", "ExecutorchConverter"]
