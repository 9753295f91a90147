"""aiot.core: the foundations every other part of aiot stands on.

The one error family (:mod:`~aiot.core.errors`), atomic file I/O and full-disk errors
(:mod:`~aiot.core.fileio`, :mod:`~aiot.core.diskfull`), the named registry, where aiot keeps
results and caches (:mod:`~aiot.core.paths`), isolated toolchain environments, CPU
architecture names, multi-file models (:mod:`~aiot.core.companions`), text from devices made
harmless (:mod:`~aiot.core.untrusted`), quiet toolchains, units and one-line notices.
It imports only the standard library and :mod:`aiot.device_agent` (the agent's backend table).
"""
