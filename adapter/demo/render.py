"""The simulated fleet as Prometheus text: dcgm-exporter, vLLM and kube-state-metrics series on one /metrics body.

``render_metrics(snapshot, ...)`` turns a ``FleetSnapshot`` into Prometheus text exposition shaped like the real
exporters (metric names, label names and order, HELP/TYPE lines as in tests/data/samples). Pure.

Every series carries the *workload's* ``namespace``/``pod`` labels, so Prometheus must scrape this target
with ``honor_labels: true`` (as the GPU Operator's ServiceMonitor does). One node's DCGM series can be
emitted in the ``exported_pod``/``exported_namespace`` layout instead, i.e. as they are stored when the
dcgm-exporter is scraped with ``honorLabels: false``, so both layouts reach the adapter at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from adapter.exposition import label_pairs
from adapter.sim.snapshot import FleetSnapshot, GpuSnapshot, PodPhase
from adapter.sim.vllm_families import EngineCounters, render_vllm

DCGM_DRIVER_VERSION = "580.105.08"  # as in the shared dcgm-exporter samples
DCGM_EXPORTER_NAMESPACE = "gpu-operator"  # where the GPU Operator runs dcgm-exporter
DCGM_EXPORTER_CONTAINER = "nvidia-dcgm-exporter"
VLLM_ENGINE = "0"
# vLLM emits request_success_total for each of these reasons (tests/data/samples/vllm.prom); the model
# finishes every request with "stop", the others stay 0 but exist, as on a real server.
VLLM_FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
KSM_POD_PHASES = ("Pending", "Succeeded", "Failed", "Unknown", "Running")

Labels = Sequence[tuple[str, str]]


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + label_pairs(labels) + "}"


def _float(value: float) -> str:
    """Python's shortest float repr, as prometheus_client prints (``7.0``, ``0.83``, ``1.7e+09``)."""
    return repr(float(value))


def _int(value: float) -> str:
    """An integer, as dcgm-exporter prints integer-valued fields (``93``)."""
    return str(round(value))


def _fixed6(value: float) -> str:
    """Six decimals, as dcgm-exporter prints double-valued fields (``612.418000``)."""
    return f"{value:.6f}"


class _Family:
    """One metric family: HELP/TYPE header and its samples, written together as the format requires."""

    def __init__(self, name: str, kind: str, help_text: str) -> None:
        self.name = name
        self.kind = kind
        self.help_text = help_text
        self.lines: list[str] = []

    def add(self, labels: Labels, value: str, suffix: str = "") -> None:
        self.lines.append(f"{self.name}{suffix}{_labels(labels)} {value}")

    def write(self, out: list[str]) -> None:
        if not self.lines:
            return
        out.append(f"# HELP {self.name} {self.help_text}")
        out.append(f"# TYPE {self.name} {self.kind}")
        out.extend(self.lines)


def _dcgm_labels(gpu: GpuSnapshot, *, exported: bool, exporter_pod: str) -> list[tuple[str, str]]:
    """Label set in dcgm-exporter's render order (internal/pkg/rendermetrics, 4.5.x; see landscape §3.1)."""
    labels = [
        ("gpu", str(gpu.index)),
        ("UUID", gpu.uuid),
        ("pci_bus_id", gpu.pci_bus_id),
        ("device", gpu.device),
        ("modelName", gpu.model_name),
        ("Hostname", gpu.node),
        ("DCGM_FI_DRIVER_VERSION", DCGM_DRIVER_VERSION),
    ]
    if exported:
        # What Prometheus stores with honor_labels: false: its target labels (the exporter's own pod)
        # take container/namespace/pod, and the workload's are renamed with an ``exported_`` prefix.
        labels += [
            ("container", DCGM_EXPORTER_CONTAINER),
            ("namespace", DCGM_EXPORTER_NAMESPACE),
            ("pod", exporter_pod),
        ]
        if gpu.pod is not None:
            labels += [
                ("exported_container", gpu.container or ""),
                ("exported_namespace", gpu.namespace or ""),
                ("exported_pod", gpu.pod),
            ]
        return labels
    # Idle GPUs carry empty attribution labels, as dcgm-exporter 2.x/3.x prints them (Prometheus drops
    # empty labels on ingestion, so they look the same as 4.x's missing labels once stored).
    labels += [
        ("container", gpu.container or ""),
        ("namespace", gpu.namespace or ""),
        ("pod", gpu.pod or ""),
    ]
    return labels


def _dcgm_exporter_pod(node: str) -> str:
    """A stable DaemonSet-style pod name for the exporter on ``node`` (``nvidia-dcgm-exporter-<5 chars>``)."""
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    n = sum(ord(c) * 31**i for i, c in enumerate(node))
    suffix = ""
    for _ in range(5):
        n, r = divmod(n, len(alphabet))
        suffix += alphabet[r]
    return f"nvidia-dcgm-exporter-{suffix}"


def _render_dcgm(snapshot: FleetSnapshot, exported_nodes: frozenset[str], out: list[str]) -> None:
    util = _Family("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).")
    copy = _Family("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).")
    fb_free = _Family("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).")
    fb_used = _Family("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).")
    power = _Family("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).")
    # HELP text from dcgm-exporter's etc/default-counters.csv.
    xid = _Family("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.")
    for gpu in snapshot.gpus:
        labels = _dcgm_labels(gpu, exported=gpu.node in exported_nodes, exporter_pod=_dcgm_exporter_pod(gpu.node))
        util.add(labels, _int(gpu.util_pct))
        copy.add(labels, _int(gpu.mem_copy_util_pct))
        fb_free.add(labels, _int(gpu.fb_free_mib))
        fb_used.add(labels, _int(gpu.fb_used_mib))
        power.add(labels, _fixed6(gpu.power_w))
        xid.add(labels, str(gpu.xid))
    # Family order as in the real capture (tests/data/samples/dcgm_exporter_l4_full.prom).
    for family in (power, util, copy, fb_free, fb_used, xid):
        family.write(out)


def _render_ksm(snapshot: FleetSnapshot, epoch: float, out: list[str]) -> None:
    dep = snapshot.deployment
    rs_hash = snapshot.replicaset.rsplit("-", 1)[1]
    pod_labels = _Family("kube_pod_labels", "gauge", "[STABLE] Kubernetes labels converted to Prometheus labels.")
    owner = _Family("kube_pod_owner", "gauge", "[STABLE] Information about the Pod's owner.")
    phase = _Family("kube_pod_status_phase", "gauge", "[STABLE] The pods current phase.")
    ready = _Family("kube_pod_status_ready", "gauge", "[STABLE] Describes whether the pod is ready to serve requests.")
    deletion = _Family("kube_pod_deletion_timestamp", "gauge", "Unix deletion timestamp")
    rs_owner = _Family("kube_replicaset_owner", "gauge", "[STABLE] Information about the ReplicaSet's owner.")
    spec = _Family("kube_deployment_spec_replicas", "gauge", "[STABLE] Number of desired pods for a deployment.")
    status = _Family("kube_deployment_status_replicas", "gauge", "[STABLE] The number of replicas per deployment.")
    # kube-state-metrics v2 emits label_* only for labels allowed by --metric-labels-allowlist; the demo
    # behaves as if pods=[*] were allowed. Kubernetes adds pod-template-hash to every ReplicaSet pod.
    template_labels = {**dep.labels, "pod-template-hash": rs_hash}
    label_pairs = sorted(("label_" + _sanitize(k), v) for k, v in template_labels.items())
    for pod in snapshot.pods:
        ident = [("namespace", pod.namespace), ("pod", pod.name), ("uid", pod.uid)]
        pod_labels.add([*ident, *label_pairs], "1")
        owner.add(
            [
                ("namespace", pod.namespace),
                ("owner_is_controller", "true"),
                ("owner_kind", "ReplicaSet"),
                ("owner_name", snapshot.replicaset),
                ("pod", pod.name),
                ("uid", pod.uid),
            ],
            "1",
        )
        # A pod loading its model is Running (its container started) but not Ready.
        for name in KSM_POD_PHASES:
            phase.add([*ident, ("phase", name)], "1" if name == "Running" else "0")
        is_ready = pod.phase is PodPhase.READY
        for condition, value in (("true", is_ready), ("false", not is_ready), ("unknown", False)):
            ready.add([*ident, ("condition", condition)], "1" if value else "0")
        if pod.deleted_at is not None:
            deletion.add(ident, _float(math.floor(epoch + pod.deleted_at)))
    rs_owner.add(
        [
            ("namespace", dep.namespace),
            ("owner_is_controller", "true"),
            ("owner_kind", "Deployment"),
            ("owner_name", dep.name),
            ("replicaset", snapshot.replicaset),
        ],
        "1",
    )
    dep_labels = [("namespace", dep.namespace), ("deployment", dep.name)]
    spec.add(dep_labels, str(snapshot.desired_replicas))
    status.add(dep_labels, str(len(snapshot.pods)))
    for family in (pod_labels, owner, phase, ready, deletion, rs_owner, spec, status):
        family.write(out)


@dataclass(frozen=True)
class HpaStatus:
    """The HorizontalPodAutoscaler of the demo's closed loop, as kube-state-metrics exports it."""

    namespace: str
    name: str
    min_replicas: int
    max_replicas: int
    current_replicas: int
    desired_replicas: int


def _render_hpa(hpa: HpaStatus, out: list[str]) -> None:
    # Names, HELP text and labels as kube-state-metrics v2 (docs/horizontalpodautoscaler-metrics.md).
    ident = [("namespace", hpa.namespace), ("horizontalpodautoscaler", hpa.name)]
    for name, help_text, value in (
        ("kube_horizontalpodautoscaler_spec_max_replicas",
         "[STABLE] Upper limit for the number of pods that can be set by the autoscaler; cannot be smaller "
         "than MinReplicas.", hpa.max_replicas),
        ("kube_horizontalpodautoscaler_spec_min_replicas",
         "[STABLE] Lower limit for the number of pods that can be set by the autoscaler, default 1.",
         hpa.min_replicas),
        ("kube_horizontalpodautoscaler_status_current_replicas",
         "[STABLE] Current number of replicas of pods managed by this autoscaler.", hpa.current_replicas),
        ("kube_horizontalpodautoscaler_status_desired_replicas",
         "[STABLE] Desired number of replicas of pods managed by this autoscaler.", hpa.desired_replicas),
    ):  # fmt: skip
        family = _Family(name, "gauge", help_text)
        family.add(ident, str(value))
        family.write(out)


def _sanitize(label: str) -> str:
    """Kubernetes label key → Prometheus label name as kube-state-metrics does (invalid chars → ``_``)."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in label)


def _render_engines(snapshot: FleetSnapshot, engines: Mapping[str, EngineCounters], out: list[str]) -> None:
    """vLLM's families of token-level engines (``adapter.sim.vllm_families``), one engine per serving pod."""
    dep = snapshot.deployment
    rows = [
        ([("container", dep.container), ("namespace", pod.namespace), ("pod", pod.name)], engines[pod.name])
        for pod in snapshot.pods
        if pod.serving and pod.name in engines
    ]
    if rows:
        out.append(render_vllm(rows, model_name=dep.model_name, engine=VLLM_ENGINE).rstrip("\n"))


def render_metrics(
    snapshot: FleetSnapshot,
    *,
    epoch: float = 0.0,
    exported_nodes: Iterable[str] = (),
    hpa: HpaStatus | None = None,
    engines: Mapping[str, EngineCounters],
) -> str:
    """Prometheus text exposition (format 0.0.4) for the whole fleet.

    ``epoch`` is the Unix time at fleet time 0 (used for ``kube_pod_deletion_timestamp``).
    GPUs on ``exported_nodes`` get the ``exported_pod``/``exported_namespace`` label layout.
    ``hpa``, when an autoscaler drives the fleet, adds its kube-state-metrics series. ``engines`` (the vLLM
    engines' counters by pod name) give each serving pod vLLM's families.
    """
    out: list[str] = []
    _render_dcgm(snapshot, frozenset(exported_nodes), out)
    _render_engines(snapshot, engines, out)
    _render_ksm(snapshot, epoch, out)
    if hpa is not None:
        _render_hpa(hpa, out)
    return "\n".join(out) + "\n"
