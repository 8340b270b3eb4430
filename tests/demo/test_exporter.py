"""The fleet's /metrics: parses; real exporters' names, labels, HELP; per-GPU counts; runner; HTTP."""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from adapter.demo.exporter import MetricsExporter
from adapter.demo.render import DCGM_EXPORTER_NAMESPACE, HpaStatus, render_metrics
from adapter.demo.runner import FleetRunner
from adapter.demo.tokenpods import TokenPods
from adapter.sim.config import Deployment
from adapter.sim.snapshot import FleetSnapshot, PodPhase
from adapter.sim.trace import RateTrace, ScaledTrace, TraceClock
from tests.support.sim import ENGINE, PHYSICS, saturation

SAMPLES = Path(__file__).resolve().parents[1] / "data" / "samples"  # the vendored real captures

DEP = Deployment(name="llama-3-8b", namespace="llm-demo")


def samples(text: str) -> dict[str, list[Sample]]:
    """Samples by sample name (``foo_bucket`` etc.), parsed by prometheus_client."""
    out: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append(sample)
    return out


def pods_of(replicas: int, deployment: Deployment = DEP, gpus_per_pod: int = 1) -> TokenPods:
    return TokenPods(ENGINE, replace(PHYSICS, deployment=deployment, gpus_per_pod=gpus_per_pod), replicas=replicas,
                     now=0.0)  # fmt: skip


def busy_fleet(gpus_per_pod: int = 2, pods: int = 3) -> TokenPods:
    fleet = pods_of(pods, gpus_per_pod=gpus_per_pod)
    for _ in range(6):
        fleet.advance(5.0, 0.6 * saturation() * pods)
    return fleet


def render(fleet: TokenPods, snap: FleetSnapshot | None = None, **kwargs: Any) -> str:
    """The fleet's /metrics body (of ``snap``, default: the fleet now) with its engines' vLLM families."""
    return render_metrics(snap or fleet.snapshot(), engines=fleet.engine_counters(), **kwargs)


def help_lines(text: str) -> dict[str, str]:
    return dict(re.findall(r"^# HELP (\S+) (.*)$", text, flags=re.MULTILINE))


@pytest.mark.parametrize(("gpus_per_pod", "pods"), [(1, 3), (2, 5), (8, 2)])
def test_dcgm_series_one_per_gpu_with_pod_attribution(gpus_per_pod: int, pods: int) -> None:
    fleet = busy_fleet(gpus_per_pod, pods)
    snap = fleet.snapshot()
    parsed = samples(render(fleet, snap))
    nodes = -(-gpus_per_pod * pods // 8)
    for name in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
    ):
        series = parsed[name]
        assert len(series) == 8 * nodes  # every GPU on the fleet's nodes, idle ones included
        per_pod = Counter(s.labels["pod"] for s in series)
        assert per_pod.pop("", 0) == 8 * nodes - gpus_per_pod * pods
        assert per_pod == {p.name: gpus_per_pod for p in snap.pods}
        assert len({(s.labels["Hostname"], s.labels["gpu"]) for s in series}) == len(series)
    for s in parsed["DCGM_FI_DEV_GPU_UTIL"]:
        if s.labels["pod"]:
            assert s.labels["namespace"] == "llm-demo" and s.labels["container"] == "vllm"
            assert s.value >= 95  # busy pods
        else:
            assert s.labels["namespace"] == "" and s.value == 0


def test_dcgm_labels_and_help_match_the_real_exporter() -> None:
    real = (SAMPLES / "dcgm_exporter.prom").read_text()
    real_held = next(s for s in samples(real)["DCGM_FI_DEV_GPU_UTIL"] if s.labels.get("pod"))
    text = render(busy_fleet())
    ours = next(s for s in samples(text)["DCGM_FI_DEV_GPU_UTIL"] if s.labels["pod"])
    # Same label names as a real held GPU (we leave out pod_uid, which that exporter printed empty).
    assert set(ours.labels) == set(real_held.labels) - {"pod_uid"}
    first_line = next(line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_UTIL{"))
    names = re.findall(r'(\w+)="', first_line)
    assert names[:7] == [
        "gpu",
        "UUID",
        "pci_bus_id",
        "device",
        "modelName",
        "Hostname",
        "DCGM_FI_DRIVER_VERSION",
    ]  # dcgm-exporter's render order
    real_help = help_lines((SAMPLES / "dcgm_exporter_l4_full.prom").read_text())
    for name, text_help in help_lines(text).items():
        if name.startswith("DCGM_") and name in real_help:
            assert text_help == real_help[name]
    assert {n for n in help_lines(text) if n.startswith("DCGM_")} - set(real_help) == {"DCGM_FI_DEV_XID_ERRORS"}


def test_vllm_series_match_the_real_server() -> None:
    real_text = (SAMPLES / "vllm.prom").read_text()
    real = samples(real_text)
    fleet = busy_fleet(pods=3)
    fleet.set_replicas(4, fleet.now)  # one loading pod: its vLLM server is not up yet
    fleet.advance(0.5, 24.0)
    snap = fleet.snapshot()
    text = render(fleet, snap)
    ours = samples(text)
    serving = {p.name for p in snap.pods if p.phase is not PodPhase.LOADING}
    assert len(serving) == 3
    real_help = help_lines(real_text)
    for family in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:request_success_total",
        "vllm:e2e_request_latency_seconds",
    ):
        assert help_lines(text)[family] == real_help[family]
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:e2e_request_latency_seconds_count",
        "vllm:e2e_request_latency_seconds_sum",
    ):
        assert {s.labels["pod"] for s in ours[name]} == serving
        for s in ours[name]:
            # vLLM's own labels plus the pod attribution Prometheus would add.
            assert set(s.labels) == set(real[name][0].labels) | {"namespace", "pod", "container"}
            assert s.labels["model_name"] == DEP.model_name and s.labels["namespace"] == "llm-demo"
    real_les = {s.labels["le"] for s in real["vllm:e2e_request_latency_seconds_bucket"]}
    reasons = {s.labels["finished_reason"] for s in real["vllm:request_success_total"]}
    for pod in serving:
        buckets = [s for s in ours["vllm:e2e_request_latency_seconds_bucket"] if s.labels["pod"] == pod]
        assert {s.labels["le"] for s in buckets} == real_les
        values = [s.value for s in sorted(buckets, key=lambda s: float(s.labels["le"]))]
        assert values == sorted(values) and values[-1] > 0
        count = next(s.value for s in ours["vllm:e2e_request_latency_seconds_count"] if s.labels["pod"] == pod)
        assert values[-1] == count
        success = {
            s.labels["finished_reason"]: s.value for s in ours["vllm:request_success_total"] if s.labels["pod"] == pod
        }
        assert set(success) == reasons
        assert sum(success.values()) == count


def test_kube_state_metrics_series_describe_pods_replicaset_and_deployment() -> None:
    fleet = busy_fleet(pods=3)
    snap = fleet.snapshot()
    # A pod the API server has marked deleted (kube_pod_deletion_timestamp) and that is no longer ready.
    victim = snap.pods[-1]
    marked = replace(victim, phase=PodPhase.TERMINATING, deleted_at=snap.now)
    snap = replace(snap, pods=(*snap.pods[:-1], marked), desired_replicas=2)
    parsed = samples(render(fleet, snap, epoch=1_700_000_000.0))
    rs = snap.replicaset
    labels = {s.labels["pod"]: s.labels for s in parsed["kube_pod_labels"]}
    assert set(labels) == {p.name for p in snap.pods}
    for pod in snap.pods:
        assert labels[pod.name]["label_app"] == "llama-3-8b"
        assert labels[pod.name]["label_pod_template_hash"] == rs.rsplit("-", 1)[1]
        assert labels[pod.name]["uid"] == pod.uid
    owners = {s.labels["pod"]: s.labels for s in parsed["kube_pod_owner"]}
    assert {o["owner_name"] for o in owners.values()} == {rs}
    assert all(o["owner_kind"] == "ReplicaSet" and o["owner_is_controller"] == "true" for o in owners.values())
    (rs_owner,) = parsed["kube_replicaset_owner"]
    assert rs_owner.labels == {
        "namespace": "llm-demo",
        "replicaset": rs,
        "owner_kind": "Deployment",
        "owner_name": "llama-3-8b",
        "owner_is_controller": "true",
    }
    (deleted,) = parsed["kube_pod_deletion_timestamp"]
    assert deleted.labels["pod"] == victim.name
    assert deleted.value == np.floor(1_700_000_000.0 + snap.now)
    ready = {s.labels["pod"]: s.value for s in parsed["kube_pod_status_ready"] if s.labels["condition"] == "true"}
    assert ready == {p.name: (0.0 if p.name == victim.name else 1.0) for p in snap.pods}
    (spec,) = parsed["kube_deployment_spec_replicas"]
    assert spec.value == 2


def test_one_node_in_the_exported_pod_layout() -> None:
    fleet = busy_fleet(gpus_per_pod=2, pods=6)  # 12 GPUs: gpu-node-1 full, 4 held on gpu-node-2
    snap = fleet.snapshot()
    parsed = samples(render(fleet, snap, exported_nodes=["gpu-node-2"]))
    series = parsed["DCGM_FI_DEV_GPU_UTIL"]
    normal = [s for s in series if s.labels["Hostname"] == "gpu-node-1"]
    exported = [s for s in series if s.labels["Hostname"] == "gpu-node-2"]
    assert all("exported_pod" not in s.labels and s.labels["namespace"] == "llm-demo" for s in normal)
    held = [s for s in exported if "exported_pod" in s.labels]
    assert len(held) == 4 and len(exported) == 8
    for s in exported:
        # Prometheus's target labels (the exporter's own pod) take namespace/pod ...
        assert s.labels["namespace"] == DCGM_EXPORTER_NAMESPACE
        assert s.labels["pod"].startswith("nvidia-dcgm-exporter-")
    # ... and the workload's labels survive as exported_*.
    gpu_node_2_pods = {p.name for p in snap.pods if p.node == "gpu-node-2"}
    assert {s.labels["exported_pod"] for s in held} == gpu_node_2_pods
    assert {s.labels["exported_namespace"] for s in held} == {"llm-demo"}


def test_label_values_are_escaped() -> None:
    dep = Deployment(name="x", namespace="ns", model_name='we"ird\\model\nname')
    fleet = pods_of(1, deployment=dep)
    parsed = samples(render(fleet))
    assert parsed["vllm:num_requests_waiting"][0].labels["model_name"] == 'we"ird\\model\nname'


def _runner(fleet: TokenPods, wall_start: float = 1000.0) -> FleetRunner:
    trace = RateTrace(step_s=600.0, rates=np.array([1.0, 2.0, np.nan]), suspect=np.zeros(3, dtype=bool))
    clock = TraceClock(wall_start=wall_start, speed=600.0)  # one trace window per wall second
    return FleetRunner(fleet, ScaledTrace(trace, peak_rps=20.0), clock, monotonic=lambda: wall_start)


def test_runner_plays_the_trace_compressed_and_the_fleet_in_real_seconds() -> None:
    fleet = pods_of(2)
    runner = _runner(fleet)
    runner.tick(1000.5)  # sim 0..300 s: window 0 (10 req/s)
    assert fleet.now == pytest.approx(0.5)
    assert runner.status().rate.rate == 10.0
    runner.tick(1001.5)  # started in window 0 still (sim 300 s)
    runner.tick(1002.2)  # started at sim 900 s: window 1 (20 req/s)
    status = runner.status()
    assert fleet.now == pytest.approx(2.2)
    assert status.rate.rate == 20.0 and not status.rate.held
    assert status.ready == 2 and status.desired == 2
    runner.tick(1003.0)  # started at sim 1320 s: window 2 is a gap, 20 req/s held
    status = runner.status()
    assert status.rate.held and status.rate.rate == 20.0
    runner.set_replicas(3)
    assert runner.status().loading == 1
    runner.tick(1002.0)  # time never runs backwards
    assert fleet.now == pytest.approx(3.0)


def test_exporter_serves_metrics_over_http_while_the_runner_ticks() -> None:
    fleet = pods_of(2)
    trace = RateTrace(step_s=600.0, rates=np.array([1.0]), suspect=np.zeros(1, dtype=bool))
    runner = FleetRunner(fleet, ScaledTrace(trace, peak_rps=10.0), TraceClock(time.monotonic(), 1.0), tick_s=0.05)
    exporter = MetricsExporter(runner)
    runner.start()
    exporter.start()
    port = exporter.port
    try:
        assert exporter.url == f"http://127.0.0.1:{exporter.port}"
        with httpx.Client(trust_env=False, timeout=5.0) as client:
            deadline = time.monotonic() + 30
            while runner.snapshot().now == 0.0 and time.monotonic() < deadline:
                time.sleep(0.05)
            response = client.get(exporter.url + "/metrics")
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
            parsed = samples(response.text)
            assert len(parsed["DCGM_FI_DEV_GPU_UTIL"]) == 8
            assert len(parsed["vllm:num_requests_running"]) == 2
            assert client.get(exporter.url + "/nope").status_code == 404
        assert runner.snapshot().now > 0.0  # the background thread advanced the fleet
        assert runner.failures == 0
    finally:
        exporter.stop()
        runner.stop()
    assert not any(t.name in ("fleet-runner", "metrics-exporter") for t in threading.enumerate())
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/metrics", trust_env=False)  # the socket is closed


def test_render_is_deterministic_for_a_snapshot() -> None:
    fleet = busy_fleet()
    snap = fleet.snapshot()
    assert render(fleet, snap) == render(fleet, snap)


def test_hpa_series_only_while_an_hpa_drives_the_fleet() -> None:
    fleet = busy_fleet()
    snap = fleet.snapshot()
    assert "kube_horizontalpodautoscaler" not in render(fleet, snap)
    hpa = HpaStatus(namespace="llm-demo", name="llama-3-8b", min_replicas=1, max_replicas=16,
                    current_replicas=3, desired_replicas=5)  # fmt: skip
    parsed = samples(render(fleet, snap, hpa=hpa))
    expected = {
        "kube_horizontalpodautoscaler_spec_min_replicas": 1,
        "kube_horizontalpodautoscaler_spec_max_replicas": 16,
        "kube_horizontalpodautoscaler_status_current_replicas": 3,
        "kube_horizontalpodautoscaler_status_desired_replicas": 5,
    }
    for name, value in expected.items():
        (sample,) = parsed[name]
        # kube-state-metrics v2 labels (docs/horizontalpodautoscaler-metrics.md).
        assert sample.labels == {"namespace": "llm-demo", "horizontalpodautoscaler": "llama-3-8b"}
        assert sample.value == value
    # The Deployment's own replica series the dashboard sets next to them are there as well.
    assert parsed["kube_deployment_status_replicas"][0].value == len(snap.pods)


def test_runner_renders_the_hpa_status_it_was_given() -> None:
    fleet = busy_fleet()
    trace = ScaledTrace(RateTrace(step_s=600.0, rates=np.ones(6), suspect=np.zeros(6, dtype=bool)), peak_rps=5.0)
    runner = FleetRunner(fleet, trace, TraceClock(wall_start=0.0, speed=1.0), monotonic=lambda: 0.0)
    runner.set_hpa_status(HpaStatus("llm-demo", "llama-3-8b", 1, 8, 3, 4))
    assert "kube_horizontalpodautoscaler_status_desired_replicas" in runner.render()
    runner.set_hpa_status(None)
    assert "kube_horizontalpodautoscaler" not in runner.render()
