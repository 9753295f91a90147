"""Pin a run to a CPU cluster: cores from the probe, a hex mask, and the ``taskset`` prefix.

Cluster names come from :func:`~aiot.host.transports.probe.parse_clusters`: ``prime``, ``big`` and
``little`` on heterogeneous SoCs (fastest first), ``all`` on a device whose cores are alike. The
caller records the mask in the run's provenance, so a stored result says which cores it ran on.
"""

from __future__ import annotations

from collections.abc import Sequence

from aiot.core.errors import UsageError


def _describe(clusters: list[dict]) -> str:
    return ", ".join(f"{c['name']} (cores {','.join(map(str, c['cores']))})" for c in clusters)


def cluster_cpus(info: dict, cluster: str) -> list[int]:
    """The cores of ``cluster`` on the device ``info`` describes (a probe's facts), ascending.

    ``all`` is every core. A name used by several clusters (``big`` on a four-cluster SoC) gives
    the cores of all of them.

    Raises:
        UsageError: the device has no cluster of that name; the message lists its clusters.
    """
    clusters = info.get("clusters") or []
    if cluster == "all":
        cores = [core for c in clusters for core in c["cores"]]
        return sorted(cores) or list(range(info.get("cores") or 0))
    cores = [core for c in clusters if c["name"] == cluster for core in c["cores"]]
    if not cores:
        known = _describe(clusters) or "none probed"
        raise UsageError(f"the device has no '{cluster}' cluster; its clusters: {known}",
                         "'all' means every core")
    return sorted(cores)


def cpu_mask(cpus: Sequence[int]) -> str:
    """The hex mask ``taskset`` takes for ``cpus``, without ``0x``: ``[4, 5, 6, 7]`` → ``f0``.

    Raises:
        UsageError: no CPUs, or a negative CPU number.
    """
    if not cpus or any(cpu < 0 for cpu in cpus):
        raise UsageError(f"a CPU mask needs one or more CPU numbers ≥ 0, got {list(cpus)}")
    return format(sum(1 << cpu for cpu in set(cpus)), "x")


def max_threads(info: dict, cluster: str | None = None) -> int:
    """How many threads fill ``cluster`` (its core count), or the whole device without one."""
    if cluster is not None:
        return len(cluster_cpus(info, cluster))
    return info.get("cores") or len(cluster_cpus(info, "all")) or 1
