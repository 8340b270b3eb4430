"""Scripted GPU/vLLM fleets for integration tests, and their expected values computed independently.

Series are shaped like the real captures in tests/data/samples/ (dcgm_exporter.prom: label names
gpu, UUID, pci_bus_id, device, modelName, Hostname, container, namespace, pod; vllm.prom: engine,
model_name and vLLM's real e2e, TTFT and ITL bucket bounds). Expected values are computed from the generated
numbers with numpy and a small histogram_quantile written here from the PromQL documentation, never by
asking the backend.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from adapter.catalog import load_catalog
from tests.support.backends import Series

# vLLM V1 e2e_request_latency_seconds bucket bounds (tests/data/samples/vllm.prom).
E2E_BUCKETS = (
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
    math.inf,
)
# vLLM V1 time_to_first_token_seconds and inter_token_latency_seconds bucket bounds (tests/data/samples/vllm.prom).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0, math.inf)  # fmt: skip
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0, math.inf)  # fmt: skip
HISTOGRAMS = {  # catalog metric -> (vLLM family, bucket bounds)
    "inference_latency_p99_seconds": ("vllm:e2e_request_latency_seconds", E2E_BUCKETS),
    "inference_ttft_p99_seconds": ("vllm:time_to_first_token_seconds", TTFT_BUCKETS),
    "inference_itl_p99_seconds": ("vllm:inter_token_latency_seconds", ITL_BUCKETS),
}
GUARDS = {  # the SLO guard's metric -> the P99 it reads (0 on a pod whose engine answered nothing)
    "inference_ttft_p99_guard_seconds": "inference_ttft_p99_seconds",
    "inference_itl_p99_guard_seconds": "inference_itl_p99_seconds",
}
STEP_S = 15.0
HISTORY_S = 600.0
EXPORTER_NS = "gpu-operator"


@dataclass
class PodSpec:
    name: str
    gpus: int
    layout: str  # "honor" (pod/namespace), "exported" (exported_*), "old" (pod_name/...)
    labels: dict[str, str] = field(default_factory=dict)
    hostname_label: str = "Hostname"
    engines: int = 1
    # generated values (latest sample) filled by build()
    gpu_util: list[float] = field(default_factory=list)
    fb_used: list[float] = field(default_factory=list)
    copy_util: list[float] = field(default_factory=list)
    power: list[float] = field(default_factory=list)
    xid: list[float] = field(default_factory=list)
    waiting: list[float] = field(default_factory=list)
    bucket_slopes: list[float] = field(default_factory=list)  # per-second increase of each cumulative e2e bucket
    histogram_slopes: dict[str, list[float]] = field(default_factory=dict)  # the same per catalog metric
    with_latency: bool = True
    quiet: bool = False  # latency histograms exported but flat: the engine answered nothing in the window
    with_gpu: bool = True
    deployment: str | None = None


def pod_label_set(pod: PodSpec, namespace: str) -> dict[str, str]:
    if pod.layout == "honor":
        return {"namespace": namespace, "pod": pod.name, "container": "vllm"}
    if pod.layout == "exported":
        # What Prometheus stores when the ServiceMonitor has honorLabels: false: the workload's labels are
        # renamed exported_*, and pod/namespace name the exporter itself (landscape.md §3.1).
        return {
            "exported_namespace": namespace,
            "exported_pod": pod.name,
            "exported_container": "vllm",
            "namespace": EXPORTER_NS,
            "pod": "nvidia-dcgm-exporter-7xk2q",
            "container": "nvidia-dcgm-exporter",
        }
    if pod.layout == "old":
        # dcgm-exporter --use-old-namespace, scraped like any target: pod/namespace name the exporter itself.
        return {
            "pod_namespace": namespace,
            "pod_name": pod.name,
            "container_name": "vllm",
            "namespace": EXPORTER_NS,
            "pod": "nvidia-dcgm-exporter-7xk2q",
        }
    raise ValueError(pod.layout)


def build(namespace: str, pods: Sequence[PodSpec], now: float, seed: int = 7, idle_gpus: int = 2) -> list[Series]:
    """All series for the fleet, sampled every 15 s over the 10 minutes up to ``now``.

    Gauges are constant over the history (so the latest value is unambiguous on both backends); counters
    grow linearly, so rate() equals the slope on Prometheus (extrapolation of a line) and on VictoriaMetrics.
    """
    rng = random.Random(seed)
    ts = [now - HISTORY_S + i * STEP_S for i in range(int(HISTORY_S / STEP_S) + 1)]
    out: list[Series] = []

    def gauge(name: str, labels: dict[str, str], value: float) -> None:
        out.append(Series({"__name__": name, **labels}, [(t, value) for t in ts]))

    def counter(name: str, labels: dict[str, str], slope: float) -> None:
        out.append(Series({"__name__": name, **labels}, [(t, 1000.0 + slope * (t - ts[0])) for t in ts]))

    gpu_index = 0
    for pod in pods:
        pod_labels = pod_label_set(pod, namespace)
        if pod.with_gpu:
            pod.gpu_util = [float(rng.randint(0, 100)) for _ in range(pod.gpus)]
            pod.fb_used = [float(rng.randint(1000, 80000)) for _ in range(pod.gpus)]
            pod.copy_util = [float(rng.randint(0, 100)) for _ in range(pod.gpus)]
            pod.power = [round(rng.uniform(60, 700), 3) for _ in range(pod.gpus)]
            if not pod.xid:
                pod.xid = [0.0] * pod.gpus
            for g in range(pod.gpus):
                gpu_labels = {
                    "gpu": str(g),
                    "UUID": f"GPU-{namespace}-{gpu_index:04d}",
                    "pci_bus_id": f"00000000:{g + 16:02X}:00.0",
                    "device": f"nvidia{g}",
                    "modelName": "NVIDIA H100 80GB HBM3",
                    pod.hostname_label: f"node-{pod.name}",
                    "DCGM_FI_DRIVER_VERSION": "550.90.07",
                    **pod_labels,
                }
                gpu_index += 1
                gauge("DCGM_FI_DEV_GPU_UTIL", gpu_labels, pod.gpu_util[g])
                gauge("DCGM_FI_DEV_FB_USED", gpu_labels, pod.fb_used[g])
                gauge("DCGM_FI_DEV_MEM_COPY_UTIL", gpu_labels, pod.copy_util[g])
                gauge("DCGM_FI_DEV_POWER_USAGE", gpu_labels, pod.power[g])
                gauge("DCGM_FI_DEV_XID_ERRORS", gpu_labels, pod.xid[g])
        # vLLM series: Prometheus scrapes the pod itself, so pod/namespace are target labels.
        engine_base = {
            "namespace": namespace,
            "pod": pod.name,
            "model_name": "meta-llama/Llama-3.1-8B-Instruct",
            "job": "vllm",
            "instance": f"{pod.name}:8000",
        }
        pod.waiting = [float(rng.randint(0, 20)) for _ in range(pod.engines)]
        for e in range(pod.engines):
            gauge("vllm:num_requests_waiting", {**engine_base, "engine": str(e)}, pod.waiting[e])
        if pod.with_latency:
            for metric, (family, bounds) in HISTOGRAMS.items():
                per_bucket = [0.0 if pod.quiet else rng.uniform(0.0, 2.0) for _ in bounds]
                slopes = [float(c) for c in np.cumsum(per_bucket)]
                pod.histogram_slopes[metric] = slopes
                for bound, slope in zip(bounds, slopes, strict=True):
                    le = "+Inf" if math.isinf(bound) else repr(bound)
                    counter(f"{family}_bucket", {**engine_base, "engine": "0", "le": le}, slope)
            pod.bucket_slopes = pod.histogram_slopes["inference_latency_p99_seconds"]
        # kube-state-metrics series (scraped with honorLabels: true)
        ksm = {"namespace": namespace, "pod": pod.name, "job": "kube-state-metrics"}
        gauge("kube_pod_labels", {**ksm, **{f"label_{k}": v for k, v in pod.labels.items()}}, 1.0)
        if pod.deployment:
            gauge(
                "kube_pod_owner",
                {
                    **ksm,
                    "owner_kind": "ReplicaSet",
                    "owner_name": f"{pod.deployment}-5d8f7b9c6",
                    "owner_is_controller": "true",
                },
                1.0,
            )
    for dep in sorted({p.deployment for p in pods if p.deployment}):
        gauge(
            "kube_replicaset_owner",
            {
                "namespace": namespace,
                "replicaset": f"{dep}-5d8f7b9c6",
                "owner_kind": "Deployment",
                "owner_name": dep,
                "owner_is_controller": "true",
                "job": "kube-state-metrics",
            },
            1.0,
        )
    for i in range(idle_gpus):  # idle GPUs on the same nodes: pod labels empty, must be ignored
        idle = {
            "gpu": str(7 - i),
            "UUID": f"GPU-{namespace}-idle{i}",
            "device": f"nvidia{7 - i}",
            "modelName": "NVIDIA H100 80GB HBM3",
            "Hostname": "node-idle",
            "container": "",
            "namespace": "",
            "pod": "",
        }
        gauge("DCGM_FI_DEV_GPU_UTIL", idle, 100.0)
    return out


def histogram_quantile(q: float, bounds: Sequence[float], cumulative: Sequence[float]) -> float:
    """PromQL histogram_quantile over cumulative bucket rates (linear interpolation inside a bucket,
    lower bound 0 for the first bucket, the highest finite bound when the rank falls in +Inf)."""
    total = cumulative[-1]
    if total == 0:
        return math.nan
    rank = q * total
    for i, (bound, count) in enumerate(zip(bounds, cumulative, strict=True)):
        if count >= rank:
            if math.isinf(bound):
                return bounds[i - 1]
            lower = 0.0 if i == 0 else bounds[i - 1]
            below = 0.0 if i == 0 else cumulative[i - 1]
            return lower + (bound - lower) * (rank - below) / (count - below)
    return math.nan


def expected(pod: PodSpec, metric: str) -> float | None:
    """The value the adapter must serve for ``pod``, or None when it must omit the pod."""
    if metric.startswith("gpu_") and not pod.with_gpu:
        return None
    if metric == "gpu_utilization_p90":
        return float(np.percentile(pod.gpu_util, 90))
    if metric == "gpu_memory_used_p90":
        return float(np.percentile(pod.fb_used, 90))
    if metric == "gpu_mem_copy_utilization_p90":
        return float(np.percentile(pod.copy_util, 90))
    if metric == "gpu_power_usage_p90":
        return float(np.percentile(pod.power, 90))
    if metric == "gpu_xid_errors":
        return 1.0 if any(x != 0 for x in pod.xid) else 0.0
    if metric == "inference_queue_depth":
        return float(sum(pod.waiting))
    if metric in GUARDS:  # the engine's gauge is always there in build()
        return expected(pod, GUARDS[metric]) or 0.0
    if metric in HISTOGRAMS:
        if not pod.with_latency or pod.quiet:  # no series, or histogram_quantile's NaN over empty buckets
            return None
        return histogram_quantile(0.99, HISTOGRAMS[metric][1], pod.histogram_slopes[metric])
    if metric == "llm_composite_load":
        # The embedded catalog's terms and the fusion rule (docs/metrics.md, "The rules"): a pod missing an
        # omit_pod term has no value; a missing idle term reads 0; weights are never re-weighted.
        terms = load_catalog(None).composites["llm_composite_load"].terms
        total_w = sum(t.weight for t in terms)
        value = 0.0
        for t in terms:
            v = expected(pod, t.metric)
            if v is None:
                if t.when_missing == "omit_pod":
                    return None
                continue
            value += (t.weight / total_w) * max(v - t.idle, 0.0) / (t.target - t.idle)
        return value
    raise KeyError(metric)
