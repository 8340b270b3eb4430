"""What a simulated fleet looks like at one instant, as a cluster shows it: pods, their GPUs, the whole fleet.

The demo's fleet (``adapter.demo.tokenpods.TokenPods``) produces these frozen snapshots; the exporter
(``adapter.demo.render``), the demo's HPA (``adapter.demo.autoscaler``) and the backfill read them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from adapter.sim.config import Deployment

__all__ = ["FleetSnapshot", "GpuSnapshot", "PodPhase", "PodSnapshot"]


class PodPhase(StrEnum):
    """Lifecycle of a simulated pod."""

    LOADING = "loading"  # scheduled, model weights loading; not ready, gets no traffic, no vLLM metrics yet
    READY = "ready"  # receives its share of arrivals
    TERMINATING = "terminating"  # deleted: no new arrivals, drains what it holds, then vanishes


@dataclass(frozen=True)
class GpuSnapshot:
    """One physical GPU at one instant, with the pod holding it (``pod`` None for an idle GPU)."""

    node: str
    index: int
    uuid: str
    pci_bus_id: str
    model_name: str
    pod: str | None
    namespace: str | None
    container: str | None
    util_pct: float
    fb_used_mib: float
    fb_free_mib: float
    mem_copy_util_pct: float
    power_w: float
    xid: int

    @property
    def device(self) -> str:
        """The device node name dcgm-exporter reports (``nvidia<index>``)."""
        return f"nvidia{self.index}"


@dataclass(frozen=True)
class PodSnapshot:
    """One pod at one instant.

    ``latency_buckets`` are cumulative (fractional) e2e counts at each bound of ``VLLM_E2E_LATENCY_BUCKETS``
    (+Inf is ``completed``). Counters never decrease while the pod exists.
    """

    name: str
    uid: str
    namespace: str
    node: str
    phase: PodPhase
    created_at: float
    ready_at: float
    deleted_at: float | None
    gpu_uuids: tuple[str, ...]
    arrival_rate: float  # requests/s routed to this pod over the last advance
    waiting: float  # queue depth (vllm:num_requests_waiting)
    running: float  # in the batch (vllm:num_requests_running)
    kv_cache_usage: float  # 0..1 (vllm:kv_cache_usage_perc)
    completed: float
    latency_buckets: tuple[float, ...]

    @property
    def serving(self) -> bool:
        """True when the vLLM server is up and exposes /metrics (ready or draining)."""
        return self.phase is not PodPhase.LOADING

    @property
    def in_flight(self) -> float:
        """Requests held by the pod: waiting plus running."""
        return self.waiting + self.running


@dataclass(frozen=True)
class FleetSnapshot:
    """The whole fleet at time ``now``: every live pod and every GPU on the fleet's nodes."""

    now: float
    deployment: Deployment
    replicaset: str
    desired_replicas: int
    pods: tuple[PodSnapshot, ...]
    gpus: tuple[GpuSnapshot, ...]
    arrival_rate: float
    dropped: float

    def count(self, phase: PodPhase) -> int:
        """Number of pods in ``phase``."""
        return sum(1 for pod in self.pods if pod.phase is phase)

    def pod(self, name: str) -> PodSnapshot:
        """The pod called ``name`` (``KeyError`` if it does not exist)."""
        for pod in self.pods:
            if pod.name == name:
                return pod
        raise KeyError(name)
