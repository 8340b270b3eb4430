"""A deterministic model of one Deployment of vLLM pods on GPU nodes: queues, latency, and GPU telemetry.

Pure: no I/O, no clock, no threads. Callers pass time in (``advance(dt, rate)``, ``set_replicas(n, now)``)
and read frozen ``FleetSnapshot``s. Used by the demo's exporter and by an HPA what-if simulator.

The serving model is a fluid approximation of a continuous-batching engine, per pod:

* arrivals join the queue (``waiting``); the engine admits them into the batch (``running``) while fewer
  than ``batch_slots`` are running; a queue longer than ``max_queue`` rejects the excess;
* a running request takes ``S(n) = base_service_s * (1 + batch_slowdown * n / batch_slots)`` on average,
  so completions run at ``n / S(n)``, which reaches ``capacity_rps`` exactly at a full batch;
* a completing request has waited ``W = waiting / capacity_rps`` (the queue ahead drains at capacity)
  and its service time is lognormal with mean ``S(n)``; its latency ``W + service`` fills the e2e
  histogram, so ``sum/count`` and the P99 estimate agree with the queue (Little's law holds).

GPU utilization follows the M/G/inf "at least one request in flight" probability ``1 - exp(-running)``:
near 100 % whenever the pod is busy at all, as continuous batching shows on real GPUs, and ~0 when idle.

``Fleet(..., waits=WaitModel(config))`` adds the offline engine's waiting before saturation
(``adapter.sim.latency``): below capacity, completions get the M/G/c wait on top of their service time and
``waiting`` reads the M/G/c mean queue, so a closed loop sees the same physics as ``simulate``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from adapter.sim.config import PCI_BUSES, VLLM_E2E_LATENCY_BUCKETS, Deployment, FleetConfig, GpuModel
from adapter.sim.snapshot import FleetSnapshot, GpuSnapshot, PodPhase, PodSnapshot

__all__ = [
    "VLLM_E2E_LATENCY_BUCKETS",
    "Deployment",
    "Fleet",
    "FleetConfig",
    "FleetSnapshot",
    "GpuModel",
    "GpuSnapshot",
    "PodPhase",
    "PodSnapshot",
]

if TYPE_CHECKING:
    from adapter.sim.latency import WaitModel

_BUCKET_BOUNDS = np.asarray(VLLM_E2E_LATENCY_BUCKETS, dtype=np.float64)
# Kubernetes generates pod-template hashes and pod name suffixes from this alphabet (no vowels, no
# look-alike characters): k8s.io/apimachinery/pkg/util/rand/rand.go (``alphanums``).
_K8S_ALPHANUMS = "bcdfghjklmnpqrstvwxz2456789"
_PCI_BUSES = PCI_BUSES
_Z_P99 = 2.3263478740408408  # standard normal 0.99 quantile
_CUDA_CONTEXT_MIB = 520.0  # framebuffer a CUDA context takes before any weights are loaded
_EMPTY = 0.05  # a draining pod with less than this in flight (a fluid remnant) has finished


@dataclass
class _Gpu:
    node: str
    index: int
    uuid: str
    pci_bus_id: str
    pod: str | None = None
    xid: int = 0
    util_noise: float = 0.0
    power_noise: float = 0.0


@dataclass
class _Pod:
    name: str
    uid: str
    node: str
    gpu_indices: tuple[int, ...]
    created_at: float
    ready_at: float
    n_buckets: int
    phase: PodPhase = PodPhase.LOADING
    deleted_at: float | None = None
    waiting: float = 0.0
    running: float = 0.0
    batch: float = 0.0  # requests in the batch during the last step (what vLLM reports as running)
    arrival_rate: float = 0.0
    throughput: float = 0.0
    wait_s: float = 0.0
    service_s: float = 0.0
    completed: float = 0.0
    latency_sum: float = 0.0
    buckets: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.buckets = [0.0] * (self.n_buckets + 1)


class Fleet:
    """A Deployment's pods on GPU nodes, advanced in time by the caller. Deterministic for a given seed.

    ``replicas`` pods exist at construction; with ``warm=True`` (default) they are already ready at
    ``now``, otherwise they start loading. Not thread-safe: callers serialize access.
    """

    def __init__(
        self,
        config: FleetConfig,
        *,
        replicas: int,
        now: float = 0.0,
        warm: bool = True,
        waits: WaitModel | None = None,
    ) -> None:
        if replicas < 0:
            raise ValueError("replicas must not be negative")
        self.config = config
        self._waits = waits
        self._rng = random.Random(config.seed)
        self._now = float(now)
        self._nodes: list[list[_Gpu]] = []
        self._pods: list[_Pod] = []
        self._desired = 0
        self._arrival_rate = 0.0
        self._dropped = 0.0
        self.replicaset = f"{config.deployment.name}-{self._random_string(10)}"
        self.set_replicas(replicas, self._now)
        if warm:
            for pod in self._pods:
                # Pretend the pod was created one load delay ago, so it is ready right now.
                delay = pod.ready_at - pod.created_at
                pod.created_at, pod.ready_at = self._now - delay, self._now
                pod.phase = PodPhase.READY
            self._refresh_telemetry()

    # -- time and scaling -------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        """The model's clock (seconds): the construction time plus every ``advance``."""
        return self._now

    @property
    def desired_replicas(self) -> int:
        """The replica count last asked for."""
        return self._desired

    @property
    def dropped(self) -> float:
        """Requests lost so far: no ready pod, a full queue, or still in flight at the drain timeout."""
        return self._dropped

    def set_replicas(self, n: int, now: float) -> None:
        """Scale to ``n`` pods at time ``now`` (which must be the fleet's clock, ``self.now``).

        Scale-up adds loading pods that become ready after a delay drawn from ``load_delay_s``.
        Scale-down deletes like a ReplicaSet does: loading pods first (they vanish at once), then the
        newest ready pods, which stop receiving traffic and drain for up to ``drain_timeout_s``.
        """
        if n < 0:
            raise ValueError("replicas must not be negative")
        if abs(now - self._now) > 1e-6:
            raise ValueError(f"set_replicas at {now} but the fleet is at {self._now}: advance() first")
        self._desired = n
        active = [pod for pod in self._pods if pod.phase is not PodPhase.TERMINATING]
        if n > len(active):
            for _ in range(n - len(active)):
                self._create_pod()
        elif n < len(active):
            # ReplicaSet victim ranking (k8s pkg/controller/controller_utils.go ActivePods): not-ready
            # before ready, then the most recently created first.
            ranked = sorted(
                active,
                key=lambda p: (p.phase is PodPhase.READY, -p.created_at, p.name),
            )
            for victim in ranked[: len(active) - n]:
                if victim.phase is PodPhase.LOADING:
                    self._remove(victim)
                else:
                    victim.phase = PodPhase.TERMINATING
                    victim.deleted_at = self._now
        self._refresh_telemetry()

    def advance(self, dt: float, arrival_rate: float) -> None:
        """Move the clock on by ``dt`` seconds with ``arrival_rate`` requests/s arriving at the Service.

        Arrivals are split evenly over ready pods (a Service's round robin); with no ready pod they are
        dropped. Long intervals are integrated in steps of at most ``substep_s``.
        """
        if not dt >= 0 or not math.isfinite(dt):
            raise ValueError(f"dt must be a finite non-negative number, got {dt}")
        if not arrival_rate >= 0 or not math.isfinite(arrival_rate):
            raise ValueError(f"arrival_rate must be finite and non-negative, got {arrival_rate}")
        self._arrival_rate = float(arrival_rate)
        if dt == 0:
            return
        steps = max(1, math.ceil(dt / self.config.substep_s - 1e-9))
        h = dt / steps
        start = self._now
        before = {pod.name: pod.completed for pod in self._pods}
        arrived: dict[str, float] = {}
        for k in range(steps):
            self._update_phases(start + k * h)
            ready = [pod for pod in self._pods if pod.phase is PodPhase.READY]
            share = arrival_rate / len(ready) if ready else 0.0
            if not ready:
                self._dropped += arrival_rate * h
            for pod in self._pods:
                if pod.phase is PodPhase.LOADING:
                    continue
                rate = share if pod.phase is PodPhase.READY else 0.0
                arrived[pod.name] = arrived.get(pod.name, 0.0) + rate * h
                self._serve(pod, rate, h)
        self._now = start + dt
        self._update_phases(self._now)
        for pod in self._pods:
            pod.arrival_rate = arrived.get(pod.name, 0.0) / dt
            pod.throughput = (pod.completed - before.get(pod.name, 0.0)) / dt
        self._refresh_telemetry()

    def inject_xid(self, pod: str, gpu: int = 0, code: int = 79) -> None:
        """Make the ``gpu``-th GPU of ``pod`` report XID ``code`` (0 clears it); ``KeyError`` if no pod."""
        target = self._find(pod)
        node = self._node_gpus(target.node)
        node[target.gpu_indices[gpu]].xid = int(code)

    # -- reading ----------------------------------------------------------------------------------------

    def snapshot(self) -> FleetSnapshot:
        """An immutable view of the fleet now."""
        cfg = self.config
        dep = cfg.deployment
        owner = {pod.name: pod for pod in self._pods}
        gpus: list[GpuSnapshot] = []
        for node in self._nodes:
            for gpu in node:
                holder = owner.get(gpu.pod) if gpu.pod is not None else None
                util, fb, copy_util, power = self._gpu_readings(gpu, holder)
                gpus.append(
                    GpuSnapshot(
                        node=gpu.node,
                        index=gpu.index,
                        uuid=gpu.uuid,
                        pci_bus_id=gpu.pci_bus_id,
                        model_name=cfg.gpu.name,
                        pod=gpu.pod,
                        namespace=dep.namespace if gpu.pod is not None else None,
                        container=dep.container if gpu.pod is not None else None,
                        util_pct=util,
                        fb_used_mib=fb,
                        fb_free_mib=max(cfg.gpu.fb_total_mib - fb, 0.0),
                        mem_copy_util_pct=copy_util,
                        power_w=power,
                        xid=gpu.xid,
                    )
                )
        pods = tuple(self._pod_snapshot(pod) for pod in sorted(self._pods, key=lambda p: p.name))
        return FleetSnapshot(
            now=self._now,
            deployment=dep,
            replicaset=self.replicaset,
            desired_replicas=self._desired,
            pods=pods,
            gpus=tuple(gpus),
            arrival_rate=self._arrival_rate,
            dropped=self._dropped,
        )

    # -- the serving model ------------------------------------------------------------------------------

    def _service_time(self, running: float) -> float:
        cfg = self.config
        return cfg.base_service_s * (1.0 + cfg.batch_slowdown * min(running / cfg.batch_slots, 1.0))

    def _serve(self, pod: _Pod, rate: float, h: float) -> None:
        cfg = self.config
        slots = cfg.batch_slots
        pod.waiting += rate * h
        admit = min(pod.waiting, max(slots - pod.running, 0.0))
        pod.waiting -= admit
        pod.running += admit
        # The batch admitted here is what ran during the step; the completions below are taken out at
        # its end. Reporting this value (not the remainder) keeps Little's law exact in steady state.
        pod.batch = pod.running
        service = self._service_time(pod.running)
        done = pod.running * h / service  # <= running because h <= base_service_s <= service
        pod.running -= done
        wait = pod.waiting / cfg.capacity_rps
        if self._waits is not None and pod.waiting <= 1e-9 and 0.0 < rate < cfg.capacity_rps:
            self._record_waited(pod, done, rate, service)
        else:
            self._record(pod, done, wait, service)
        overflow = pod.waiting - cfg.max_queue
        if overflow > 0:
            pod.waiting = cfg.max_queue
            self._dropped += overflow
        pod.wait_s = pod.waiting / cfg.capacity_rps
        pod.service_s = service

    def _record(self, pod: _Pod, done: float, wait: float, mean_service: float) -> None:
        """Add ``done`` completions that waited ``wait`` s; lognormal service of mean ``mean_service``."""
        if done <= 0:
            return
        sigma = self.config.latency_sigma
        log_median = math.log(mean_service) - sigma * sigma / 2.0
        for i, le in enumerate(VLLM_E2E_LATENCY_BUCKETS):
            if le > wait:
                z = (math.log(le - wait) - log_median) / sigma
                pod.buckets[i] += done * 0.5 * math.erfc(-z / math.sqrt(2.0))
        pod.buckets[-1] += done
        pod.completed += done
        pod.latency_sum += done * (wait + mean_service)

    def _record_waited(self, pod: _Pod, done: float, rate: float, mean_service: float) -> None:
        """Add ``done`` completions at a steady ``rate`` below capacity: M/G/c wait + service (``waits``)."""
        if done <= 0 or self._waits is None:
            return
        cdf = self._waits.stationary_cdf(rate, _BUCKET_BOUNDS)
        for i, share in enumerate(cdf):
            pod.buckets[i] += done * float(share)
        pod.buckets[-1] += done
        pod.completed += done
        p, theta = self._waits.wait(rate)
        pod.latency_sum += done * ((p / theta if p > 0 else 0.0) + mean_service)

    def _p99(self, pod: _Pod) -> float:
        sigma = self.config.latency_sigma
        service = pod.service_s or self._service_time(pod.batch)
        return pod.wait_s + service * math.exp(_Z_P99 * sigma - sigma * sigma / 2.0)

    def _update_phases(self, t: float) -> None:
        cfg = self.config
        for pod in list(self._pods):
            if pod.phase is PodPhase.LOADING and t >= pod.ready_at:
                pod.phase = PodPhase.READY
            elif pod.phase is PodPhase.TERMINATING:
                assert pod.deleted_at is not None
                if pod.waiting + pod.running < _EMPTY:
                    self._remove(pod)
                elif t >= pod.deleted_at + cfg.drain_timeout_s:
                    self._dropped += pod.waiting + pod.running
                    self._remove(pod)

    # -- pods and GPUs ----------------------------------------------------------------------------------

    def _create_pod(self) -> None:
        cfg = self.config
        node_index, gpu_indices = self._allocate()
        names = {pod.name for pod in self._pods}
        name = f"{self.replicaset}-{self._random_string(5)}"
        while name in names:
            name = f"{self.replicaset}-{self._random_string(5)}"
        low, high = cfg.load_delay_s
        delay = self._rng.uniform(low, high)
        pod = _Pod(
            name=name,
            uid=self._random_uuid(),
            node=self._node_name(node_index),
            gpu_indices=gpu_indices,
            created_at=self._now,
            ready_at=self._now + delay,
            n_buckets=len(VLLM_E2E_LATENCY_BUCKETS),
        )
        pod.service_s = cfg.base_service_s
        for index in gpu_indices:
            self._nodes[node_index][index].pod = name
        self._pods.append(pod)

    def _allocate(self) -> tuple[int, tuple[int, ...]]:
        """First fit: the lowest free GPUs on the first node with enough of them; a new node otherwise."""
        need = self.config.gpus_per_pod
        for node_index, node in enumerate(self._nodes):
            free = [gpu.index for gpu in node if gpu.pod is None]
            if len(free) >= need:
                return node_index, tuple(free[:need])
        node_index = len(self._nodes)
        name = self._node_name(node_index)
        self._nodes.append(
            [
                _Gpu(
                    node=name,
                    index=i,
                    uuid=f"GPU-{self._random_uuid()}",
                    pci_bus_id=f"00000000:{_PCI_BUSES[i]:02X}:00.0",
                )
                for i in range(self.config.gpus_per_node)
            ]
        )
        return node_index, tuple(range(need))

    def _remove(self, pod: _Pod) -> None:
        for gpu in self._node_gpus(pod.node):
            if gpu.pod == pod.name:
                gpu.pod = None
        self._pods.remove(pod)

    def _find(self, name: str) -> _Pod:
        for pod in self._pods:
            if pod.name == name:
                return pod
        raise KeyError(name)

    def _node_gpus(self, node: str) -> list[_Gpu]:
        return self._nodes[int(node.rsplit("-", 1)[1]) - 1]

    @staticmethod
    def _node_name(index: int) -> str:
        return f"gpu-node-{index + 1}"

    def _random_string(self, n: int) -> str:
        return "".join(self._rng.choice(_K8S_ALPHANUMS) for _ in range(n))

    def _random_uuid(self) -> str:
        h = f"{self._rng.getrandbits(128):032x}"
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"

    # -- telemetry --------------------------------------------------------------------------------------

    def _refresh_telemetry(self) -> None:
        """Draw new measurement noise for every GPU (one draw per GPU per call, in a fixed order)."""
        for node in self._nodes:
            for gpu in node:
                gpu.util_noise = self._rng.gauss(0.0, 1.0)
                gpu.power_noise = self._rng.gauss(0.0, 1.0)

    def _gpu_readings(self, gpu: _Gpu, pod: _Pod | None) -> tuple[float, float, float, float]:
        """(util %, framebuffer used MiB, mem-copy util %, power W) for one GPU."""
        cfg = self.config
        idle_power = cfg.gpu.idle_power_w + 1.5 * gpu.power_noise
        if pod is None:
            return 0.0, 0.0, 0.0, idle_power
        weights = cfg.model_weights_mib / cfg.gpus_per_pod
        if pod.phase is PodPhase.LOADING:
            span = max(pod.ready_at - pod.created_at, 1e-9)
            progress = min(max((self._now - pod.created_at) / span, 0.0), 1.0)
            util = _clip(2.0 + gpu.util_noise, 0.0, 100.0)
            fb = _CUDA_CONTEXT_MIB + weights * progress
            return util, fb, _clip(15.0 * progress + gpu.util_noise, 0.0, 100.0), idle_power + 20.0 * progress
        batch = min(pod.batch / cfg.batch_slots, 1.0)
        busy = 1.0 - math.exp(-pod.batch)
        util = _clip(100.0 * busy + 1.0 * gpu.util_noise, 0.0, 100.0)
        fb = _CUDA_CONTEXT_MIB + weights + cfg.kv_cache_mib_per_gpu * batch
        fb = min(fb, cfg.gpu.fb_total_mib)
        copy_util = _clip(util * (0.25 + 0.45 * batch), 0.0, 100.0)
        dynamic = (cfg.gpu.max_power_w - cfg.gpu.idle_power_w) * busy * (0.35 + 0.65 * batch)
        return util, fb, copy_util, idle_power + dynamic + 3.0 * gpu.power_noise * busy

    def _mean_queue(self, pod: _Pod) -> float:
        """The M/G/c mean queue a ready pod without backlog shows (0 without ``waits``)."""
        rate = pod.arrival_rate
        if self._waits is None or pod.phase is not PodPhase.READY or pod.waiting > 1e-9:
            return 0.0
        if not 0.0 < rate < self.config.capacity_rps:
            return 0.0
        return self._waits.mean_queue(rate)

    def _pod_snapshot(self, pod: _Pod) -> PodSnapshot:
        cfg = self.config
        dep = cfg.deployment
        gpus = self._node_gpus(pod.node)
        return PodSnapshot(
            name=pod.name,
            uid=pod.uid,
            namespace=dep.namespace,
            node=pod.node,
            phase=pod.phase,
            created_at=pod.created_at,
            ready_at=pod.ready_at,
            deleted_at=pod.deleted_at,
            gpu_uuids=tuple(gpus[i].uuid for i in pod.gpu_indices),
            arrival_rate=pod.arrival_rate,
            throughput=pod.throughput,
            waiting=pod.waiting + self._mean_queue(pod),
            running=pod.batch,
            kv_cache_usage=cfg.kv_full_usage * min(pod.batch / cfg.batch_slots, 1.0),
            p99_latency_s=self._p99(pod),
            completed=pod.completed,
            latency_sum=pod.latency_sum,
            latency_buckets=tuple(pod.buckets),
        )


def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)
