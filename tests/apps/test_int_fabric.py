"""The simulated fabric: deterministic per seed, paths as the topology says, anomalies rare and
where the bursts put them."""

from __future__ import annotations

from collections import Counter

from apps.int_events.fabric import Burst, Fabric, FabricConfig, Flow


def test_same_seed_same_frames_other_seed_other_frames():
    a = [p.frame for p in Fabric(seed=3).packets(300)]
    assert a == [p.frame for p in Fabric(seed=3).packets(300)]
    assert a != [p.frame for p in Fabric(seed=4).packets(300)]


def test_packets_come_in_time_order_numbered_from_zero():
    pkts = list(Fabric(seed=1).packets(500))
    assert [p.number for p in pkts] == list(range(500))
    times = [p.time_ns for p in pkts]
    assert times == sorted(times) and 0 <= times[0] and times[-1] < 500 * FabricConfig().mean_gap_ns


def test_paths_follow_the_leaf_spine_topology():
    fabric = Fabric(FabricConfig(leaves=4, spines=2, hosts_per_leaf=8), seed=1)
    same_rack = fabric.path(Flow(src=0, dst=5, src_port=40000, dst_port=5201, queue_id=0))
    assert same_rack == [(1001, 0, 1), (1, 1, 6)]
    across = fabric.path(Flow(src=1, dst=8 * 2 + 3, src_port=40000, dst_port=5201, queue_id=0))
    (nic, first_leaf, spine, last_leaf) = across
    assert nic == (1002, 0, 1)
    assert first_leaf[0] == 1 and first_leaf[1] == 2 and first_leaf[2] in (9, 10)
    assert spine[0] == 100 + first_leaf[2] - 8 and spine[1:] == (1, 3)  # spine port per leaf
    assert last_leaf == (3, first_leaf[2], 4)  # back down on the same spine's link, to host 3


def test_anomalies_are_rare_and_concentrated_in_the_bursts():
    burst = Burst(leaf=2, host=3, queue_id=0, start=0.4, length=0.1, peak_cells=10000)
    pkts = list(Fabric(FabricConfig(bursts=(burst,)), seed=2).packets(20000))
    slow = [p for p in pkts if p.stack.hops[0].hop_latency > 100]
    assert 0 < len(slow) < 0.05 * len(pkts)
    by_node = Counter(p.stack.hops[0].node_id for p in slow)
    assert by_node.most_common(1)[0][0] == 2
    in_window = [p for p in slow if 0.4 <= p.time_ns / (20000 * FabricConfig().mean_gap_ns) < 0.5]
    assert len(in_window) > 0.8 * len(slow)
    # Outside bursts the top hop is a few microseconds.
    calm = sorted(p.stack.hops[0].hop_latency for p in pkts)[len(pkts) // 2]
    assert calm <= 5


def test_without_bursts_or_microbursts_nothing_is_slow():
    cfg = FabricConfig(bursts=(), microburst_rate=0.0)
    assert max(p.stack.hops[0].hop_latency for p in Fabric(cfg, seed=5).packets(5000)) < 100
