"""The simulated fleet's configuration vocabulary: the accelerator, the Deployment, the fleet's parameters.

Shared by the fleet (``adapter.sim.lifecycle``, ``adapter.sim.tokenfleet``), the snapshots of it the demo exports
(``adapter.sim.snapshot``) and the tools that build them, so that none of them imports another for its types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypeVar

_T = TypeVar("_T")

# vLLM's e2e latency histogram bucket upper bounds (seconds), as served by a real vLLM V1 server
# (shared/data/samples/vllm.prom, ``vllm:e2e_request_latency_seconds_bucket``; +Inf is implicit).
VLLM_E2E_LATENCY_BUCKETS: tuple[float, ...] = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0,
    120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip

# PCI bus numbers of the eight GPUs on a DGX-H100-like node (shape as in the shared dcgm sample).
PCI_BUSES = (0x18, 0x2A, 0x3A, 0x5D, 0x9A, 0xAB, 0xBA, 0xDB)


@dataclass(frozen=True)
class GpuModel:
    """The accelerator type on every node (defaults: H100 SXM 80 GB, idle power as in the shared sample)."""

    name: str = "NVIDIA H100 80GB HBM3"
    fb_total_mib: float = 81559.0
    idle_power_w: float = 68.0
    max_power_w: float = 700.0


@dataclass(frozen=True)
class Deployment:
    """The Deployment the pods belong to; ``labels`` always include ``app=<name>``."""

    name: str = "llama-3-8b"
    namespace: str = "llm-demo"
    model_name: str = "meta-llama/Meta-Llama-3-8B-Instruct"
    container: str = "vllm"
    extra_labels: tuple[tuple[str, str], ...] = ()

    @property
    def labels(self) -> dict[str, str]:
        """Pod template labels: ``app=<name>`` plus ``extra_labels``."""
        return {"app": self.name, **dict(self.extra_labels)}


@dataclass(frozen=True)
class FleetConfig:
    """Static parameters of the fleet. Validated at construction (``ValueError`` names the bad field)."""

    deployment: Deployment = field(default_factory=Deployment)
    gpus_per_pod: int = 2
    gpus_per_node: int = 8
    gpu: GpuModel = field(default_factory=GpuModel)
    capacity_rps: float = 10.0  # saturated throughput of one pod (requests/s; TokenEngine: at its default mix)
    max_queue: float = 512.0  # waiting requests beyond this are rejected
    load_delay_s: tuple[float, float] = (90.0, 180.0)  # model-load time range for a new pod
    drain_timeout_s: float = 120.0  # terminationGracePeriod: what is still in flight then is lost
    model_weights_mib: float = 15_400.0  # whole model (bf16 Llama-3-8B), split over the pod's GPUs
    seed: int = 0

    def __post_init__(self) -> None:
        if self.gpus_per_pod < 1 or self.gpus_per_node < 1 or self.gpus_per_node % self.gpus_per_pod:
            raise ValueError(f"gpus_per_pod ({self.gpus_per_pod}) must divide gpus_per_node ({self.gpus_per_node})")
        if self.gpus_per_node > len(PCI_BUSES):
            raise ValueError(f"gpus_per_node must be at most {len(PCI_BUSES)}")
        if not self.capacity_rps > 0:
            raise ValueError("capacity_rps must be positive")
        if self.max_queue < 0 or self.drain_timeout_s < 0:
            raise ValueError("max_queue and drain_timeout_s must not be negative")
        low, high = self.load_delay_s
        if not 0 <= low <= high:
            raise ValueError(f"load_delay_s must be a range 0 <= low <= high, got {self.load_delay_s}")


def named(table: Mapping[str, _T], name: str, what: str) -> _T:
    """``table[name]``, or ``ValueError`` naming the ``what`` and listing the known names."""
    try:
        return table[name]
    except KeyError:
        raise ValueError(f"unknown {what} {name!r}; known: {', '.join(sorted(table))}") from None
