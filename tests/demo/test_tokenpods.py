"""The demo's fleet as a scrape target: vLLM's families per pod, DCGM series from the same state, and its pods as a
cluster shows them (names, GPUs, phases, scale-down order, determinism)."""

from __future__ import annotations

import itertools
import re
from dataclasses import replace

import pytest

from adapter.catalog import parse_catalog
from adapter.demo.catalogs import catalog_document
from adapter.demo.render import render_metrics
from adapter.demo.run import DemoOptions, build_fleet, demo_catalog
from adapter.demo.tokenpods import TokenPods
from adapter.sim.config import VLLM_E2E_LATENCY_BUCKETS, Deployment, FleetConfig
from adapter.sim.snapshot import FleetSnapshot, PodPhase
from tests.support.sim import ENGINE, PHYSICS, knee, saturation

FAMILIES = (
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
    "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total", "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total", "vllm:request_success_total",
)  # fmt: skip


def _fleet(pods: int = 3) -> TokenPods:
    fleet, _, _ = build_fleet(DemoOptions(pods=pods), 86400.0)
    assert isinstance(fleet, TokenPods)
    return fleet


def _values(text: str, name: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            pod = re.search(r'pod="([^"]*)"', line)
            out[pod.group(1) if pod else ""] = float(line.rsplit(" ", 1)[1])
    return out


def test_every_serving_pod_exports_vllms_families_with_model_name_and_engine() -> None:
    fleet = _fleet()
    fleet.advance(120.0, 20.0)
    snap = fleet.snapshot()
    text = render_metrics(snap, engines=fleet.engine_counters())
    names = {p.name for p in snap.pods}
    for family in FAMILIES:
        assert f"# TYPE {family} " in text, family
    ttft = _values(text, "vllm:time_to_first_token_seconds_count")
    assert set(ttft) == names and all(v > 0 for v in ttft.values())
    for line in text.splitlines():
        if line.startswith("vllm:"):
            assert 'engine="0"' in line and 'model_name="meta-llama/Llama-3.1-8B-Instruct"' in line, line
    # A loading pod has no vLLM server yet: no series.
    fleet.set_replicas(4, fleet.now)
    snap = fleet.snapshot()
    loading = [p.name for p in snap.pods if p.phase is PodPhase.LOADING]
    assert len(loading) == 1
    assert loading[0] not in _values(render_metrics(snap, engines=fleet.engine_counters()), "vllm:num_requests_running")


def test_dcgm_follows_the_engines_state_framebuffer_growing_with_kv_use() -> None:
    readings = []
    for rate in (3.0, 30.0):
        fleet = _fleet()
        fleet.advance(300.0, rate)
        text = render_metrics(fleet.snapshot(), engines=fleet.engine_counters())
        kv = _values(text, "vllm:kv_cache_usage_perc")
        fb = {k: v for k, v in _values(text, "DCGM_FI_DEV_FB_USED").items() if k}
        power = {k: v for k, v in _values(text, "DCGM_FI_DEV_POWER_USAGE").items() if k}
        assert set(fb) == set(kv)
        readings.append((max(kv.values()), min(fb.values()), min(power.values())))
    (kv_low, fb_low, w_low), (kv_high, fb_high, w_high) = readings
    assert kv_high > kv_low and fb_high > fb_low and w_high > w_low


def test_a_deleted_pod_disappears_and_kept_pods_keep_their_counters() -> None:
    fleet = _fleet(3)
    fleet.advance(60.0, 20.0)
    before = {n: c.success for n, c in fleet.engine_counters().items()}
    fleet.set_replicas(2, fleet.now)
    after = fleet.engine_counters()
    assert len(after) == 2 and all(after[n].success == before[n] for n in after)


def test_the_demo_serves_the_embedded_catalog_on_its_clock() -> None:
    # The embedded composite reads vLLM's ITL P99 (tests/calibrate/test_catalog_profiles.py holds it to 1.0 at each
    # profile's safe point); the demo only compresses its windows and forecasts its Deployment from the start.
    options = DemoOptions(speed=60.0)
    doc = demo_catalog(catalog_document(None), options)
    embedded = catalog_document(None)
    assert doc["composites"]["llm_composite_load"]["terms"] == embedded["composites"]["llm_composite_load"]["terms"]
    assert "inter_token_latency_seconds_bucket" in doc["metrics"]["inference_itl_p99_seconds"]["query"]
    assert doc["metrics"]["inference_itl_p99_seconds"]["window"] == "2000ms"  # 2 m of simulated time at x60
    assert {"namespace": options.namespace, "deployment": options.deployment} in doc["forecast"]["workloads"]
    parse_catalog(doc)


# -- the pods as a cluster shows them ------------------------------------------------------------------------------

K8S_CHARS = "[bcdfghjklmnpqrstvwxz2456789]"


def _pods(replicas: int, config: FleetConfig = PHYSICS) -> TokenPods:
    return TokenPods(ENGINE, config, replicas=replicas, now=0.0)


def _run(fleet: TokenPods, seconds: float, rate: float, dt: float = 5.0) -> None:
    for _ in range(round(seconds / dt)):
        fleet.advance(dt, rate)


def test_loading_pods_take_the_model_load_delay_and_get_no_traffic() -> None:
    fleet = _pods(2)
    rate = 1.5 * knee()
    _run(fleet, 10, rate)
    fleet.set_replicas(4, fleet.now)
    new = [p for p in fleet.snapshot().pods if p.phase is PodPhase.LOADING]
    assert len(new) == 2
    for pod in new:
        assert pod.created_at == fleet.now
        assert 90.0 <= pod.ready_at - pod.created_at <= 180.0
    first_ready = min(p.ready_at for p in new)
    fleet.advance(first_ready - fleet.now - 0.5, rate)
    snap = fleet.snapshot()
    for pod in new:
        now = snap.pod(pod.name)
        assert now.phase is PodPhase.LOADING
        assert now.arrival_rate == 0.0 and now.completed == 0.0 and now.in_flight == 0.0
    _run(fleet, 185, rate)
    snap = fleet.snapshot()
    assert snap.count(PodPhase.READY) == 4
    for pod in new:
        assert snap.pod(pod.name).arrival_rate == pytest.approx(rate / 4)
        assert snap.pod(pod.name).completed > 0


def test_scale_down_removes_loading_pods_first_and_then_the_newest() -> None:
    fleet = _pods(3)
    oldest_first = sorted(fleet.snapshot().pods, key=lambda p: (p.created_at, p.name))
    _run(fleet, 10, 2 * knee())
    fleet.set_replicas(5, fleet.now)
    fleet.set_replicas(2, fleet.now)
    snap = fleet.snapshot()
    assert snap.count(PodPhase.LOADING) == 0  # loading pods vanished at once
    assert snap.desired_replicas == 2
    gone = {p.name for p in oldest_first} - {p.name for p in snap.pods}
    # The initial pods were created one load delay before the start: the newest of them is the last to load.
    newest = max(oldest_first, key=lambda p: p.created_at)
    assert gone == {newest.name}
    held = {g.pod for g in snap.gpus if g.pod is not None}
    assert held == {p.name for p in snap.pods}  # the deleted pod's GPU was freed


def test_no_ready_pod_means_arrivals_are_dropped() -> None:
    fleet = _pods(0)
    fleet.set_replicas(1, fleet.now)
    fleet.advance(10.0, 5.0)
    assert fleet.dropped == pytest.approx(50.0)
    assert fleet.snapshot().pods[0].phase is PodPhase.LOADING


def _trajectory(seed: int) -> list[FleetSnapshot]:
    fleet = _pods(3, replace(PHYSICS, seed=seed))
    out = []
    for step, (load, replicas) in enumerate([(0.5, 3), (1.5, 5), (1.5, 5), (0.3, 2), (0.0, 2)]):
        if step:
            fleet.set_replicas(replicas, fleet.now)
        _run(fleet, 100, load * 3 * knee())
        out.append(fleet.snapshot())
    return out


def test_same_seed_same_fleet_different_seed_different_names() -> None:
    assert _trajectory(7) == _trajectory(7)
    other = _trajectory(8)
    assert {p.name for p in other[0].pods}.isdisjoint({p.name for p in _trajectory(7)[0].pods})


def test_counters_never_decrease_and_buckets_are_cumulative() -> None:
    fleet = _pods(3)
    last: dict[str, tuple[float, tuple[float, ...]]] = {}
    for load, replicas in [(0.2, 3), (1.5, 3), (1.5, 6), (0.1, 6), (2.5, 2), (0.0, 4)]:
        fleet.set_replicas(replicas, fleet.now)
        for _ in range(12):
            fleet.advance(7.3, load * 3 * knee())
            for pod in fleet.snapshot().pods:
                buckets = pod.latency_buckets
                assert len(buckets) == len(VLLM_E2E_LATENCY_BUCKETS)
                assert all(b >= a for a, b in itertools.pairwise(buckets))
                assert buckets[-1] <= pod.completed + 1e-9
                if pod.name in last:
                    completed, previous = last[pod.name]
                    assert pod.completed >= completed
                    assert all(b >= a for a, b in zip(previous, buckets, strict=True))
                last[pod.name] = (pod.completed, buckets)


def test_gpu_telemetry_follows_load() -> None:
    fleet = _pods(2)
    _run(fleet, 60, 2 * 0.9 * saturation())
    busy = fleet.snapshot()
    fleet.set_replicas(3, fleet.now)  # one loading pod
    _run(fleet, 5, 2 * 0.9 * saturation())
    loading = fleet.snapshot()
    _run(fleet, 60, 0.0)
    idle = fleet.snapshot()
    for gpu in busy.gpus:
        if gpu.pod is None:
            assert gpu.util_pct == 0.0 and gpu.fb_used_mib == 0.0
            assert gpu.power_w < 80.0
        else:
            # Continuous batching keeps a GPU busy whenever any request is in flight.
            assert gpu.util_pct >= 95.0
            assert gpu.power_w > 300.0
            assert PHYSICS.model_weights_mib < gpu.fb_used_mib <= PHYSICS.gpu.fb_total_mib
            assert gpu.fb_used_mib + gpu.fb_free_mib == pytest.approx(PHYSICS.gpu.fb_total_mib)
    new = next(p for p in loading.pods if p.phase is PodPhase.LOADING)
    for gpu in (g for g in loading.gpus if g.pod == new.name):
        assert gpu.util_pct < 10.0
        assert 0.0 < gpu.fb_used_mib < PHYSICS.model_weights_mib + 1000
    by_uuid = {g.uuid: g for g in busy.gpus}
    for gpu in idle.gpus:
        if gpu.pod is not None and idle.pod(gpu.pod).phase is PodPhase.READY and gpu.uuid in by_uuid:
            assert gpu.util_pct <= 5.0
            assert gpu.fb_used_mib < by_uuid[gpu.uuid].fb_used_mib  # the KV cache emptied
            assert gpu.mem_copy_util_pct < by_uuid[gpu.uuid].mem_copy_util_pct
    for pod in idle.pods:
        assert pod.kv_cache_usage < 0.01 and pod.running < 0.01


@pytest.mark.parametrize(("gpus_per_pod", "pods", "nodes"), [(1, 3, 1), (2, 5, 2), (8, 3, 3)])
def test_pods_hold_whole_gpus_on_one_node(gpus_per_pod: int, pods: int, nodes: int) -> None:
    dep = Deployment(name="mistral-7b", namespace="team-a")
    fleet = _pods(pods, replace(PHYSICS, deployment=dep, gpus_per_pod=gpus_per_pod))
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
    fleet = _pods(1)
    with pytest.raises(ValueError, match="set_replicas at"):
        fleet.set_replicas(2, fleet.now + 10)
    with pytest.raises(ValueError):
        fleet.advance(-1.0, 1.0)
    with pytest.raises(ValueError):
        fleet.advance(1.0, float("nan"))
