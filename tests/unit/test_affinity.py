import pytest

from aiot.core.errors import UsageError
from aiot.host.devices.affinity import cluster_cpus, cpu_mask, max_threads
from aiot.host.transports.probe import parse_clusters

PHONE = {"cores": 8, "clusters": parse_clusters(
    [f"{i} 1804800 300000 300000" for i in range(4)]
    + [f"{i} 2419200 710400 710400" for i in range(4, 7)] + ["7 2841600 844800 844800"])}
PI = {"cores": 4, "clusters": parse_clusters([f"{i} 1800000 600000 600000" for i in range(4)])}


def test_clusters_of_a_three_cluster_phone():
    assert cluster_cpus(PHONE, "prime") == [7]
    assert cluster_cpus(PHONE, "big") == [4, 5, 6]
    assert cluster_cpus(PHONE, "little") == [0, 1, 2, 3]
    assert cluster_cpus(PHONE, "all") == list(range(8))
    assert cluster_cpus(PI, "all") == [0, 1, 2, 3]


def test_a_name_shared_by_clusters_gives_all_their_cores():
    four = {"clusters": parse_clusters(
        ["0 1000 1 1", "1 2000 1 1", "2 2000 1 1", "3 3000 1 1", "4 4000 1 1"])}
    assert [c["name"] for c in four["clusters"]] == ["prime", "big", "big", "little"]
    assert cluster_cpus(four, "big") == [1, 2, 3]


def test_unknown_cluster_lists_the_device_clusters():
    with pytest.raises(UsageError) as err:
        cluster_cpus(PI, "prime")
    assert err.value.message == "the device has no 'prime' cluster; its clusters: all (cores 0,1,2,3)"
    with pytest.raises(UsageError) as err:
        cluster_cpus(PHONE, "medium")
    assert err.value.message.endswith("prime (cores 7), big (cores 4,5,6), little (cores 0,1,2,3)")
    with pytest.raises(UsageError, match="none probed"):
        cluster_cpus({}, "big")


def test_masks():
    assert cpu_mask([4, 5, 6, 7]) == "f0"
    assert cpu_mask([0]) == "1" and cpu_mask([7]) == "80" and cpu_mask([0, 1, 2, 3]) == "f"
    assert cpu_mask([3, 0, 3]) == "9"
    assert cpu_mask(list(range(12))) == "fff"
    for bad in ([], [-1]):
        with pytest.raises(UsageError):
            cpu_mask(bad)


def test_max_threads():
    assert max_threads(PHONE) == 8 and max_threads(PHONE, "big") == 3 and max_threads(PHONE, "prime") == 1
    assert max_threads(PI) == 4 and max_threads(PI, "all") == 4
    assert max_threads({"clusters": PI["clusters"]}) == 4 and max_threads({}) == 1
