"""The demo's fleet on the token-level engine: a ``TokenFleet`` seen as Kubernetes pods on GPU nodes.

``TokenPods`` drives ``adapter.sim.tokenfleet.TokenFleet(families=True)`` -- the physics ``simulate`` and
``calibrate --simulate`` use -- with the interface ``FleetRunner`` and the demo's
``Autoscaler`` read (``now``, ``advance(dt, rate)``, ``set_replicas``, ``snapshot()``), and gives every pod what a
cluster shows of it: a name in its ReplicaSet, a uid, a node and GPUs. Pure (no clock, no thread).

Per pod the exporter serves vLLM's own families (``engine_counters()``) and DCGM series driven by the same
state: GPU utilization ``100 (1 - exp(-running))`` (the duty cycle ``adapter.sim.observer`` gives the offline
replay and calibration, so the demo's GPU term means what the calibrated targets mean), framebuffer used =
CUDA context + weights + the KV cache's share in use, power from the duty cycle and the KV fill. A deleted pod's
backlog is accounted at once by the fleet (``TokenFleet._drain``), so a pod vanishes when deleted: no
Terminating phase is shown.
"""

from __future__ import annotations

import math
import random

import numpy as np

from adapter.sim.config import PCI_BUSES, FleetConfig
from adapter.sim.latency import SLO_QUANTILE
from adapter.sim.snapshot import FleetSnapshot, GpuSnapshot, PodPhase, PodSnapshot
from adapter.sim.tokenfleet import TokenEngine, TokenFleet
from adapter.sim.vllm_families import EngineCounters

_K8S_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery/pkg/util/rand (``alphanums``)
_CUDA_CONTEXT_MIB = 520.0  # framebuffer a CUDA context takes before any weights
_HORIZON_S = 30 * 86400.0  # the fleet's ledger span; minutes beyond it fold into the last one


class TokenPods:
    """A Deployment of token-level vLLM engines (module docstring). Deterministic for a given seed."""

    def __init__(self, engine: TokenEngine, config: FleetConfig, *, replicas: int, now: float) -> None:
        self.config = config
        self.engine = engine
        self.fleet = TokenFleet(engine, config, replicas=replicas, start=now, end=now + _HORIZON_S, families=True)
        self._rng = random.Random(config.seed)
        self.replicaset = f"{config.deployment.name}-{self._random_string(10)}"
        self._names: dict[int, tuple[str, str]] = {}  # pod id -> (name, uid)
        self._slots: dict[int, int] = {}  # pod id -> GPU slot (node-major)
        self._uuids: list[str] = []  # per GPU slot
        self._noise: list[float] = []
        self._rate = 0.0
        self._sync_pods()

    # -- time and scaling ---------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The fleet's clock (seconds)."""
        return float(self.fleet.now)

    @property
    def desired_replicas(self) -> int:
        """The replica count last asked for."""
        return self.fleet.desired

    @property
    def dropped(self) -> float:
        """Requests lost so far (no ready pod, a full queue, a drain cut short)."""
        return float(self.fleet.ledger.dropped.sum())

    def advance(self, dt: float, arrival_rate: float) -> None:
        """Move on ``dt`` seconds with ``arrival_rate`` requests/s at the Service."""
        if not dt >= 0 or not math.isfinite(dt):
            raise ValueError(f"dt must be a finite non-negative number, got {dt}")
        self._rate = float(arrival_rate)
        if dt > 0:
            self.fleet.advance(self.fleet.now + dt, arrival_rate)
        self._noise = [self._rng.gauss(0.0, 1.0) for _ in self._uuids]

    def set_mix(self, means: tuple[float, float] | None) -> None:
        """The (prompt, output) tokens per request of the requests arriving from now on (None: the engine's mix)."""
        self.fleet.set_mix(*(means or (None, None)))

    def set_replicas(self, n: int, now: float) -> None:
        """Scale to ``n`` pods at ``now`` (the fleet's clock), as a ReplicaSet does."""
        self.fleet.set_replicas(n, now)
        self._sync_pods()

    # -- reading ------------------------------------------------------------------------------------

    def engine_counters(self) -> dict[str, EngineCounters]:
        """vLLM's families per serving pod, by pod name."""
        ready = self.fleet.ready_mask()
        counters = self.fleet.engine_counters()
        return {self._names[int(i)][0]: c for i, c, r in zip(self.fleet.ids, counters, ready, strict=True) if r}

    def latency_p99(self) -> tuple[float, float]:
        """(TTFT P99, ITL P99) in seconds of a request completing now on the worst ready pod: the engine's
        steady state at the pod's share of the load, plus the wait behind its backlog (0, 0 with no ready pod)."""
        fleet = self.fleet
        ready = fleet.ready_mask()
        count = int(ready.sum())
        if count == 0:
            return 0.0, 0.0
        model = fleet._model
        mu = model.saturation_rps
        lam = self._rate / count
        point = model.at(min(lam, mu * (1.0 - 1e-6)))
        backlog = float(fleet.waiting[ready].max()) / mu
        return point.ttft_quantile(SLO_QUANTILE) + backlog, point.itl_quantile(SLO_QUANTILE)

    def snapshot(self) -> FleetSnapshot:
        """The fleet now, as pods and GPUs (``adapter.sim.snapshot``'s types)."""
        cfg = self.config
        dep = cfg.deployment
        fleet = self.fleet
        ready = fleet.ready_mask()
        usage = fleet.kv_cache_usage
        waiting = fleet.queue_depth
        count = int(ready.sum())
        share = self._rate / count if count else 0.0
        per_node = cfg.gpus_per_node // cfg.gpus_per_pod
        owner: dict[int, tuple[str, int]] = {}
        pods = []
        for k, pid in enumerate(int(i) for i in fleet.ids):
            name, uid = self._names[pid]
            slot = self._slots[pid]
            for g in range(cfg.gpus_per_pod):
                owner[slot * cfg.gpus_per_pod + g] = (name, k)
            cum = fleet.cumulative_latency[k]
            pods.append(
                PodSnapshot(
                    name=name, uid=uid, namespace=dep.namespace, node=self._node(slot // per_node),
                    phase=PodPhase.READY if ready[k] else PodPhase.LOADING,
                    created_at=float(fleet.created[k]), ready_at=float(fleet.ready_at[k]), deleted_at=None,
                    gpu_uuids=tuple(self._uuids[slot * cfg.gpus_per_pod + g] for g in range(cfg.gpus_per_pod)),
                    arrival_rate=share if ready[k] else 0.0,
                    waiting=float(waiting[k]), running=float(fleet.running[k]), kv_cache_usage=float(usage[k]),
                    completed=float(cum[-1]), latency_buckets=tuple(float(x) for x in cum[:-1]),
                )
            )  # fmt: skip
        gpus = []
        for index, uuid in enumerate(self._uuids):
            node_slot, local = divmod(index, cfg.gpus_per_node)
            held = owner.get(index)
            noise = self._noise[index] if index < len(self._noise) else 0.0
            util, fb, copy, power = self._readings(held, ready, usage, noise)
            gpus.append(
                GpuSnapshot(
                    node=self._node(node_slot), index=local, uuid=uuid,
                    pci_bus_id=f"00000000:{PCI_BUSES[local]:02X}:00.0",
                    model_name=cfg.gpu.name, pod=held[0] if held else None,
                    namespace=dep.namespace if held else None, container=dep.container if held else None,
                    util_pct=util, fb_used_mib=fb, fb_free_mib=cfg.gpu.fb_total_mib - fb,
                    mem_copy_util_pct=copy, power_w=power, xid=0,
                )
            )  # fmt: skip
        return FleetSnapshot(
            now=self.now, deployment=dep, replicaset=self.replicaset, desired_replicas=fleet.desired,
            pods=tuple(pods), gpus=tuple(gpus), arrival_rate=self._rate, dropped=self.dropped,
        )  # fmt: skip

    # -- internals ----------------------------------------------------------------------------------

    def _readings(
        self, held: tuple[str, int] | None, ready: np.ndarray, usage: np.ndarray, noise: float
    ) -> tuple[float, float, float, float]:
        """(util %, FB used MiB, mem-copy util %, power W) of one GPU."""
        cfg = self.config
        idle_power = cfg.gpu.idle_power_w + 1.5 * noise
        if held is None:
            return 0.0, 0.0, 0.0, idle_power
        k = held[1]
        weights = cfg.model_weights_mib / cfg.gpus_per_pod
        if not ready[k]:
            return min(max(2.0 + noise, 0.0), 100.0), _CUDA_CONTEXT_MIB + weights, 0.0, idle_power + 20.0
        busy = 1.0 - math.exp(-float(self.fleet.running[k]))
        kv = float(usage[k])
        room = max(cfg.gpu.fb_total_mib - _CUDA_CONTEXT_MIB - weights, 0.0)
        fb = min(_CUDA_CONTEXT_MIB + weights + 0.9 * room * kv, cfg.gpu.fb_total_mib)
        util = min(max(100.0 * busy + noise, 0.0), 100.0)
        copy = min(max(util * (0.25 + 0.45 * kv), 0.0), 100.0)
        dynamic = (cfg.gpu.max_power_w - cfg.gpu.idle_power_w) * busy * (0.35 + 0.65 * kv)
        return util, fb, copy, idle_power + dynamic + 3.0 * noise * busy

    def _sync_pods(self) -> None:
        """Name new pods, give them free GPU slots; forget deleted ones."""
        ids = {int(i) for i in self.fleet.ids}
        for pid in [p for p in self._names if p not in ids]:
            del self._names[pid]
            del self._slots[pid]
        used = set(self._slots.values())
        for pid in sorted(ids - set(self._names)):
            name = f"{self.replicaset}-{self._random_string(5)}"
            h = f"{self._rng.getrandbits(128):032x}"
            self._names[pid] = (name, f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
            slot = next(s for s in range(len(used) + 1) if s not in used)
            used.add(slot)
            self._slots[pid] = slot
        per_node = self.config.gpus_per_node // self.config.gpus_per_pod
        nodes = (max(used, default=0) // per_node) + 1
        while len(self._uuids) < nodes * self.config.gpus_per_node:
            h = f"{self._rng.getrandbits(128):032x}"
            self._uuids.append(f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")

    @staticmethod
    def _node(index: int) -> str:
        return f"gpu-node-{index + 1}"

    def _random_string(self, n: int) -> str:
        return "".join(self._rng.choice(_K8S_ALPHANUMS) for _ in range(n))
