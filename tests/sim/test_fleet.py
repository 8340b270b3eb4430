"""The fleet model's invariants: queueing, lifecycle, determinism, counters, telemetry, layout."""

from __future__ import annotations

import itertools
import re

import pytest

from adapter.sim.fleet import (
    VLLM_E2E_LATENCY_BUCKETS,
    Deployment,
    Fleet,
    FleetConfig,
    FleetSnapshot,
    PodPhase,
)

CFG = FleetConfig()  # 10 req/s per pod, 2 s base service time, 2 GPUs per pod, H100 nodes
K8S_CHARS = "[bcdfghjklmnpqrstvwxz2456789]"


def run(fleet: Fleet, seconds: float, rate: float, dt: float = 0.5) -> None:
    for _ in range(round(seconds / dt)):
        fleet.advance(dt, rate)


def test_littles_law_holds_in_steady_state() -> None:
    fleet = Fleet(CFG, replicas=4)
    rate = 28.0  # 70 % of the fleet's 40 req/s
    run(fleet, 120, rate)
    first = fleet.snapshot()
    run(fleet, 60, rate)
    second = fleet.snapshot()
    for a, b in zip(first.pods, second.pods, strict=True):
        done = b.completed - a.completed
        mean_latency = (b.latency_sum - a.latency_sum) / done
        assert b.arrival_rate == pytest.approx(rate / 4)
        assert done / 60 == pytest.approx(rate / 4, rel=1e-3)  # throughput = arrivals
        assert b.waiting == pytest.approx(0.0, abs=1e-9)  # no queue below capacity
        # L = lambda * W, with L the requests in flight and W the mean e2e latency of completions.
        assert b.in_flight == pytest.approx(b.arrival_rate * mean_latency, rel=0.01)
        assert CFG.base_service_s < mean_latency < CFG.full_batch_service_s


def test_queue_grows_under_overload_and_drains_afterwards() -> None:
    fleet = Fleet(CFG, replicas=2)
    run(fleet, 30, 10.0)
    calm = fleet.snapshot().pods[0]
    depths = []
    for _ in range(6):
        run(fleet, 10, 30.0)  # 150 % of capacity
        depths.append(fleet.snapshot().pods[0].waiting)
    assert all(b > a for a, b in itertools.pairwise(depths))
    # Excess arrivals pile up at (30 - 20) / 2 = 5 req/s per pod.
    assert depths[-1] - depths[0] == pytest.approx(5.0 * 50, rel=0.02)
    hot = fleet.snapshot().pods[0]
    assert hot.throughput == pytest.approx(CFG.capacity_rps, rel=1e-3)
    assert hot.running == pytest.approx(CFG.batch_slots)
    assert hot.p99_latency_s > calm.p99_latency_s + hot.waiting / CFG.capacity_rps * 0.99
    run(fleet, 300, 10.0)  # back to 50 %
    drained = fleet.snapshot().pods[0]
    assert drained.waiting == pytest.approx(0.0, abs=1e-9)
    assert drained.p99_latency_s == pytest.approx(calm.p99_latency_s, rel=0.01)
    assert fleet.dropped == 0.0


def test_queue_is_bounded_and_the_excess_is_dropped() -> None:
    config = FleetConfig(max_queue=50)
    fleet = Fleet(config, replicas=1)
    run(fleet, 60, 20.0)
    pod = fleet.snapshot().pods[0]
    assert pod.waiting == pytest.approx(50.0)
    # 60 s at 20 req/s in, ~10 req/s out: everything beyond the batch and the 50 queued is dropped.
    # (``running`` reports the batch during the last step, i.e. before that step's completions left it.)
    last_step_done = config.capacity_rps * config.substep_s
    assert fleet.dropped == pytest.approx(20.0 * 60 - pod.completed - pod.in_flight + last_step_done)


def test_histogram_agrees_with_the_p99_estimate() -> None:
    fleet = Fleet(CFG, replicas=1)
    run(fleet, 60, 8.0)
    a = fleet.snapshot().pods[0]
    run(fleet, 60, 8.0)
    b = fleet.snapshot().pods[0]
    counts = [y - x for x, y in zip(a.latency_buckets, b.latency_buckets, strict=True)]
    total = counts[-1]
    # The first bucket holding 99 % of the interval's completions brackets the P99 estimate.
    i = next(k for k, c in enumerate(counts) if c >= 0.99 * total)
    upper = VLLM_E2E_LATENCY_BUCKETS[i]
    lower = VLLM_E2E_LATENCY_BUCKETS[i - 1] if i else 0.0
    assert lower < b.p99_latency_s <= upper


def test_loading_pods_take_the_model_load_delay_and_get_no_traffic() -> None:
    fleet = Fleet(CFG, replicas=2)
    run(fleet, 10, 10.0)
    fleet.set_replicas(4, fleet.now)
    new = [p for p in fleet.snapshot().pods if p.phase is PodPhase.LOADING]
    assert len(new) == 2
    for pod in new:
        assert pod.created_at == fleet.now
        assert 90.0 <= pod.ready_at - pod.created_at <= 180.0
    first_ready = min(p.ready_at for p in new)
    run(fleet, first_ready - fleet.now - 0.5, 10.0)
    snap = fleet.snapshot()
    for pod in new:
        now = snap.pod(pod.name)
        assert now.phase is PodPhase.LOADING
        assert now.arrival_rate == 0.0 and now.completed == 0.0 and now.in_flight == 0.0
    run(fleet, 181, 10.0)
    snap = fleet.snapshot()
    assert snap.count(PodPhase.READY) == 4
    for pod in new:
        assert snap.pod(pod.name).arrival_rate == pytest.approx(2.5)


def test_draining_pods_get_no_traffic_and_vanish_once_empty() -> None:
    fleet = Fleet(CFG, replicas=4)
    run(fleet, 60, 20.0)
    fleet.set_replicas(2, fleet.now)
    snap = fleet.snapshot()
    draining = [p for p in snap.pods if p.phase is PodPhase.TERMINATING]
    assert len(draining) == 2 and all(p.deleted_at == fleet.now for p in draining)
    fleet.advance(0.5, 20.0)
    snap = fleet.snapshot()
    for pod in draining:
        assert snap.pod(pod.name).arrival_rate == 0.0
    assert all(p.arrival_rate == pytest.approx(10.0) for p in snap.pods if p.phase is PodPhase.READY)
    run(fleet, 60, 20.0)
    snap = fleet.snapshot()
    assert {p.name for p in snap.pods}.isdisjoint({p.name for p in draining})
    held = {g.pod for g in snap.gpus if g.pod is not None}
    assert held == {p.name for p in snap.pods}  # their GPUs were freed
    assert fleet.dropped == 0.0  # they finished their work in time


def test_draining_pods_that_cannot_finish_vanish_at_the_drain_timeout() -> None:
    config = FleetConfig(drain_timeout_s=30.0)
    fleet = Fleet(config, replicas=2)
    run(fleet, 60, 40.0)  # 200 %: deep queues
    fleet.set_replicas(1, fleet.now)
    victim = next(p for p in fleet.snapshot().pods if p.phase is PodPhase.TERMINATING)
    assert victim.waiting > config.capacity_rps * config.drain_timeout_s  # more than it can serve in time
    run(fleet, config.drain_timeout_s - 1, 0.0)
    assert fleet.snapshot().pod(victim.name).phase is PodPhase.TERMINATING
    dropped_before = fleet.dropped
    run(fleet, 2, 0.0)
    with pytest.raises(KeyError):
        fleet.snapshot().pod(victim.name)
    assert fleet.dropped > dropped_before


def test_scale_down_removes_loading_pods_first_and_then_the_newest() -> None:
    fleet = Fleet(CFG, replicas=3)
    oldest_first = sorted(fleet.snapshot().pods, key=lambda p: p.created_at)
    fleet.set_replicas(5, fleet.now)
    fleet.set_replicas(2, fleet.now)
    snap = fleet.snapshot()
    assert snap.count(PodPhase.LOADING) == 0  # loading pods vanished at once
    terminating = [p.name for p in snap.pods if p.phase is PodPhase.TERMINATING]
    assert terminating == [oldest_first[-1].name]
    assert snap.desired_replicas == 2


def test_no_ready_pod_means_arrivals_are_dropped() -> None:
    fleet = Fleet(CFG, replicas=1, warm=False)
    fleet.advance(1.0, 5.0)
    assert fleet.dropped == pytest.approx(5.0)
    assert fleet.snapshot().pods[0].phase is PodPhase.LOADING


def _trajectory(seed: int) -> list[FleetSnapshot]:
    fleet = Fleet(FleetConfig(seed=seed), replicas=3)
    out = []
    for step, (rate, replicas) in enumerate([(10.0, 3), (35.0, 5), (35.0, 5), (5.0, 2), (0.0, 2)]):
        if step:
            fleet.set_replicas(replicas, fleet.now)
        run(fleet, 100, rate)
        out.append(fleet.snapshot())
    return out


def test_same_seed_same_fleet_different_seed_different_names() -> None:
    assert _trajectory(7) == _trajectory(7)
    other = _trajectory(8)
    assert {p.name for p in other[0].pods}.isdisjoint({p.name for p in _trajectory(7)[0].pods})


def test_counters_never_decrease_and_buckets_are_cumulative() -> None:
    fleet = Fleet(CFG, replicas=3)
    last: dict[str, tuple[float, float, tuple[float, ...]]] = {}
    schedule = [(5.0, 3), (45.0, 3), (45.0, 6), (2.0, 6), (30.0, 2), (0.0, 4)]
    for rate, replicas in schedule:
        fleet.set_replicas(replicas, fleet.now)
        for _ in range(40):
            fleet.advance(1.3, rate)
            for pod in fleet.snapshot().pods:
                buckets = pod.latency_buckets
                assert len(buckets) == len(VLLM_E2E_LATENCY_BUCKETS) + 1
                assert all(b >= a for a, b in itertools.pairwise(buckets))
                assert buckets[-1] == pytest.approx(pod.completed)
                if pod.name in last:
                    completed, latency_sum, previous = last[pod.name]
                    assert pod.completed >= completed and pod.latency_sum >= latency_sum
                    assert all(b >= a for a, b in zip(previous, buckets, strict=True))
                last[pod.name] = (pod.completed, pod.latency_sum, buckets)


def test_gpu_telemetry_follows_load() -> None:
    fleet = Fleet(FleetConfig(gpus_per_pod=2), replicas=2)
    run(fleet, 60, 16.0)
    busy = fleet.snapshot()
    fleet.set_replicas(3, fleet.now)  # one loading pod, and two idle GPUs left on the node
    run(fleet, 5, 16.0)
    loading = fleet.snapshot()
    run(fleet, 60, 0.0)
    idle = fleet.snapshot()
    for gpu in busy.gpus:
        if gpu.pod is None:
            assert gpu.util_pct == 0.0 and gpu.fb_used_mib == 0.0
            assert gpu.power_w < 80.0
        else:
            # Continuous batching keeps a GPU busy whenever any request is in flight.
            assert gpu.util_pct >= 95.0
            assert gpu.power_w > 300.0
            assert CFG.model_weights_mib / 2 < gpu.fb_used_mib <= CFG.gpu.fb_total_mib
            assert gpu.fb_used_mib + gpu.fb_free_mib == pytest.approx(CFG.gpu.fb_total_mib)
    new = next(p for p in loading.pods if p.phase is PodPhase.LOADING)
    for gpu in (g for g in loading.gpus if g.pod == new.name):
        assert gpu.util_pct < 10.0
        assert 0.0 < gpu.fb_used_mib < CFG.model_weights_mib / 2 + 1000
    by_uuid = {g.uuid: g for g in busy.gpus}
    for gpu in idle.gpus:
        if gpu.pod is not None and idle.pod(gpu.pod).phase is PodPhase.READY and gpu.uuid in by_uuid:
            assert gpu.util_pct <= 5.0
            assert gpu.fb_used_mib < by_uuid[gpu.uuid].fb_used_mib  # the KV cache emptied
            assert gpu.mem_copy_util_pct < by_uuid[gpu.uuid].mem_copy_util_pct
    for pod in idle.pods:
        assert pod.kv_cache_usage < 0.01 and pod.running < 0.01


def test_xid_is_injected_on_one_gpu_only() -> None:
    fleet = Fleet(FleetConfig(gpus_per_pod=8), replicas=2)
    victim = fleet.snapshot().pods[1]
    fleet.inject_xid(victim.name, gpu=3, code=79)
    run(fleet, 2, 1.0)
    xids = {(g.pod, g.uuid): g.xid for g in fleet.snapshot().gpus}
    assert xids.pop((victim.name, victim.gpu_uuids[3])) == 79
    assert set(xids.values()) == {0}
    with pytest.raises(KeyError):
        fleet.inject_xid("no-such-pod")


@pytest.mark.parametrize(("gpus_per_pod", "pods", "nodes"), [(1, 3, 1), (2, 5, 2), (8, 3, 3)])
def test_pods_hold_whole_gpus_on_one_node(gpus_per_pod: int, pods: int, nodes: int) -> None:
    dep = Deployment(name="mistral-7b", namespace="team-a")
    fleet = Fleet(FleetConfig(deployment=dep, gpus_per_pod=gpus_per_pod), replicas=pods)
    snap = fleet.snapshot()
    assert len({g.node for g in snap.gpus}) == nodes
    assert len(snap.gpus) == 8 * nodes
    assert len({g.uuid for g in snap.gpus}) == len(snap.gpus)
    assert re.fullmatch(f"mistral-7b-{K8S_CHARS}{{10}}", snap.replicaset)
    for pod in snap.pods:
        assert re.fullmatch(f"{re.escape(snap.replicaset)}-{K8S_CHARS}{{5}}", pod.name)
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", pod.uid)
        held = [g for g in snap.gpus if g.pod == pod.name]
        assert len(held) == gpus_per_pod
        assert {g.node for g in held} == {pod.node}
        assert all(g.namespace == "team-a" and g.container == "vllm" for g in held)
        assert tuple(g.uuid for g in held) == pod.gpu_uuids
    idle = [g for g in snap.gpus if g.pod is None]
    assert len(idle) == 8 * nodes - gpus_per_pod * pods
    assert all(g.namespace is None and g.container is None for g in idle)


def test_bad_configuration_and_calls_are_rejected() -> None:
    with pytest.raises(ValueError, match="gpus_per_pod"):
        FleetConfig(gpus_per_pod=3)
    with pytest.raises(ValueError, match="load_delay_s"):
        FleetConfig(load_delay_s=(10.0, 5.0))
    with pytest.raises(ValueError, match="substep_s"):
        FleetConfig(substep_s=5.0)
    fleet = Fleet(CFG, replicas=1)
    with pytest.raises(ValueError, match="advance"):
        fleet.set_replicas(2, fleet.now + 10)
    with pytest.raises(ValueError):
        fleet.advance(-1.0, 1.0)
    with pytest.raises(ValueError):
        fleet.advance(1.0, float("nan"))
