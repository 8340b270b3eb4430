"""The pods of one Deployment over time, without their serving physics (``PodLifecycle``).

What every simulated replay needs of Kubernetes, vectorized over pods: the replica count the HPA sets, pods
that load their model for a delay before they serve, a ReplicaSet's scale-down order, deleted pods that drain,
GPUs that may have to wait for a node (``GpuPool``), and the per-minute accounting of a run (``Ledger``):
requests completed and how many broke the SLO, requests dropped, pod-seconds (loading, pending and draining
pods hold or wait for their GPUs too), the fleet's waiting requests. The serving model -- what a ready pod does
with its share of the arrivals, what a deleted one does with what it holds -- is the subclass's:
``adapter.sim.tokenfleet.TokenFleet``.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adapter.sim.config import FleetConfig
from adapter.sim.latency import UPPER as _UPPER

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]

MINUTE_S = 60.0
_EPS = 1e-9


class SimulationError(ValueError):
    """The simulation cannot run with these inputs (the message says why)."""


@dataclass(frozen=True)
class GpuPool:
    """The GPUs a new pod can get (``TokenFleet(pool=...)``; None: always a free GPU).

    ``warm_gpus`` GPUs are up at once (the nodes the cluster has); a pod beyond them waits, Pending, for a
    node of ``FleetConfig.gpus_per_node`` GPUs that the cluster autoscaler adds after a delay drawn from
    ``node_provision_s`` (default 3-7 min: the autoscaler reacts to a Pending pod within its 10 s scan,
    kubernetes/autoscaler cluster-autoscaler/FAQ.md, then the cloud boots the VM and the GPU operator
    installs the driver and device plugin before the node offers ``nvidia.com/gpu``), then loads its
    model. ``max_gpus`` caps the cluster (None: no cap); pods beyond it never start. Added nodes are kept
    for the rest of the run (the autoscaler's scale-down waits 10 min of idleness, longer than most dips).
    """

    warm_gpus: int
    node_provision_s: tuple[float, float] = (180.0, 420.0)
    max_gpus: int | None = None

    def __post_init__(self) -> None:
        low, high = self.node_provision_s
        if self.warm_gpus < 0 or not 0 <= low <= high:
            raise SimulationError("GpuPool: warm_gpus must be >= 0 and node_provision_s a range low <= high")
        if self.max_gpus is not None and self.max_gpus < self.warm_gpus:
            raise SimulationError("GpuPool: max_gpus must not be below warm_gpus")


@dataclass
class Ledger:
    """Per-minute totals of one run (index 0 = the minute starting at the run's start)."""

    arrivals: _F64
    completions: _F64
    over_slo: _F64
    dropped: _F64
    pod_seconds: _F64
    max_waiting: _F64
    buckets: _F64  # (minutes, len(VLLM buckets) + 1) completions per latency bucket (not cumulative)

    @classmethod
    def empty(cls, minutes: int) -> Ledger:
        """A ledger of ``minutes`` zeroed minutes."""
        z = np.zeros(minutes)
        return cls(z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), np.zeros((minutes, _UPPER.size + 1)))


class PodLifecycle:
    """Pods, scaling, GPU pool and ledger of a fleet (module docstring); subclasses serve (``_flow``, ``_drain``).

    Pods load for a delay drawn uniformly from ``load_delay_s`` (one draw per created pod, in creation order,
    from ``random.Random(seed)``, so every policy gets the same sequence), plus the wait for a GPU node with a
    ``pool``. Scale-down removes pods like a ReplicaSet (loading pods first, then the newest); a removed ready
    pod drains what it holds (``_drain``: accounted at once, up to ``drain_timeout_s``) and holds its GPUs while
    it does. Per pod the fleet keeps its backlog, the requests in its batch and its cumulative e2e histogram in
    vLLM's buckets, which the serving model updates.
    """

    def __init__(
        self,
        config: FleetConfig,
        *,
        replicas: int,
        start: float,
        end: float,
        pool: GpuPool | None = None,
    ) -> None:
        if replicas < 0:
            raise SimulationError("replicas must not be negative")
        if not end > start:
            raise SimulationError("the run must end after it starts")
        self.config = config
        self._rng = random.Random(config.seed)
        self._node_rng = random.Random(config.seed + 1)  # node delays never shift the pods' load delays
        self.pool = pool
        self._node_ready: list[float] = []  # ready time of each node the autoscaler added
        self.start = start
        self.now = start
        self.ledger = Ledger.empty(max(1, math.ceil((end - start) / MINUTE_S - _EPS)))
        self._ids: _I64 = np.zeros(0, dtype=np.int64)
        self._created: _F64 = np.zeros(0)
        self._ready_at: _F64 = np.zeros(0)
        self._q: _F64 = np.zeros(0)
        self._n: _F64 = np.zeros(0)
        self._cum: _F64 = np.zeros((0, _UPPER.size + 1))  # cumulative latency histogram per pod
        self._next_id = 0
        self._desired = 0
        self.set_replicas(replicas, start)
        # Warm start: the initial pods (on GPUs the cluster already has) were created one load delay ago
        # and are ready now.
        delays = self._ready_at - self._created
        self._created = start - delays
        self._ready_at = np.full(self._ids.size, start)

    # -- reading ------------------------------------------------------------------------------------

    @property
    def desired(self) -> int:
        """The replica count last asked for."""
        return self._desired

    @property
    def ids(self) -> _I64:
        """Pod ids (ascending: creation order) of every pod that has not been deleted."""
        return self._ids

    def ready_mask(self, at: float | None = None) -> npt.NDArray[np.bool_]:
        """True for pods that are ready (serving traffic) at ``at`` (default: now)."""
        t = self.now if at is None else at
        out: npt.NDArray[np.bool_] = self._ready_at <= t + _EPS
        return out

    @property
    def waiting(self) -> _F64:
        """Queue depth per pod (0 for loading pods)."""
        return self._q

    @property
    def queue_depth(self) -> _F64:
        """What ``vllm:num_requests_waiting`` reads per pod: the backlog (0 for pods not serving)."""
        return self._q.copy()

    @property
    def running(self) -> _F64:
        """Requests in the batch per pod."""
        return self._n

    @property
    def cumulative_latency(self) -> _F64:
        """Cumulative latency histogram per pod (+Inf column = completions), as vLLM's counters."""
        return self._cum

    def latency_histograms(self) -> dict[str, tuple[_F64, _F64]]:
        """Per latency the pods export (``e2e``; a token fleet adds ``ttft`` and ``itl``): the bucket upper
        bounds and the cumulative histogram per pod (``ids`` order, +Inf column last)."""
        return {"e2e": (_UPPER, self._cum)}

    @property
    def created(self) -> _F64:
        """Creation time per pod."""
        return self._created

    @property
    def ready_at(self) -> _F64:
        """Time each pod becomes (or became) ready."""
        return self._ready_at

    def minute(self, t: float) -> int:
        """Ledger index of the minute holding ``t`` (clamped to the ledger)."""
        m = int((t - self.start + _EPS) // MINUTE_S)
        return min(max(m, 0), self.ledger.arrivals.size - 1)

    # -- scaling ------------------------------------------------------------------------------------

    def set_replicas(self, n: int, now: float) -> None:
        """Scale to ``n`` pods at ``now`` (the fleet's clock): new pods start loading; scale-down
        deletes loading pods first, then the most recently created, as a ReplicaSet does."""
        if n < 0:
            raise SimulationError("replicas must not be negative")
        if abs(now - self.now) > 1e-6:
            raise SimulationError(f"set_replicas at {now} but the fleet is at {self.now}")
        self._desired = n
        active = self._ids.size
        if n > active:
            low, high = self.config.load_delay_s
            k = n - active
            delays = np.array([self._rng.uniform(low, high) for _ in range(k)])
            delays = delays + self._gpu_wait(active, k, now)
            self._ids = np.concatenate((self._ids, np.arange(self._next_id, self._next_id + k)))
            self._next_id += k
            self._created = np.concatenate((self._created, np.full(k, now)))
            self._ready_at = np.concatenate((self._ready_at, now + delays))
            self._q = np.concatenate((self._q, np.zeros(k)))
            self._n = np.concatenate((self._n, np.zeros(k)))
            self._cum = np.concatenate((self._cum, np.zeros((k, _UPPER.size + 1))))
        elif n < active:
            ready = self.ready_mask(now)
            # ReplicaSet victim ranking (k8s pkg/controller/controller_utils.go ActivePods): not ready
            # before ready, then newest first. np.lexsort sorts by its last key first.
            order = np.lexsort((-self._ids, -self._created, ready))
            victims = order[: active - n]
            draining = victims[ready[victims]]
            if draining.size:
                self._drain(draining)
            keep = np.ones(active, dtype=bool)
            keep[victims] = False
            self._ids, self._created, self._ready_at = (
                self._ids[keep],
                self._created[keep],
                self._ready_at[keep],
            )
            self._q, self._n, self._cum = self._q[keep], self._n[keep], self._cum[keep]

    def _gpu_wait(self, active: int, k: int, now: float) -> _F64:
        """How long each of ``k`` new pods (after ``active`` existing ones) waits for its GPUs: 0 on the
        pool's warm GPUs or on an added node that is up; else until its node is (inf beyond ``max_gpus``)."""
        out = np.zeros(k)
        pool = self.pool
        if pool is None:
            return out
        per_pod, per_node = self.config.gpus_per_pod, self.config.gpus_per_node
        for j in range(k):
            first_gpu = (active + j) * per_pod  # GPUs are handed out in order; nodes are kept
            if first_gpu + per_pod <= pool.warm_gpus:
                continue
            if pool.max_gpus is not None and first_gpu + per_pod > pool.max_gpus:
                out[j] = math.inf
                continue
            node = (first_gpu + per_pod - pool.warm_gpus - 1) // per_node
            while len(self._node_ready) <= node:
                low, high = pool.node_provision_s
                self._node_ready.append(now + self._node_rng.uniform(low, high))
            out[j] = max(self._node_ready[node] - now, 0.0)
        return out

    # -- time ---------------------------------------------------------------------------------------

    def advance(self, until: float, rate: float) -> None:
        """Move the clock to ``until`` with ``rate`` requests/s arriving, split at pod readiness and
        minute boundaries so that every piece has a constant set of ready pods and one ledger minute."""
        if not (rate >= 0 and math.isfinite(rate)):
            raise SimulationError(f"arrival rate must be finite and non-negative, got {rate}")
        while self.now < until - _EPS:
            a = self.now
            b = min(until, self.start + (self.minute(a) + 1) * MINUTE_S)
            pending = self._ready_at[self._ready_at > a + _EPS]
            if pending.size:
                b = min(b, float(pending.min()))
            self._flow(a, b, rate)
            self.now = b
        self.now = max(self.now, until)

    def _open_piece(self, a: float, b: float, rate: float) -> tuple[int, _I64]:
        """Book a piece's pod-seconds and arrivals; (its ledger minute, the ready pods). With no ready pod the
        arrivals are dropped (the Service has no endpoint) and the pods are empty."""
        d = b - a
        m = self.minute(a)
        led = self.ledger
        led.pod_seconds[m] += d * self._ids.size
        led.arrivals[m] += rate * d
        idx = np.flatnonzero(self.ready_mask(a))
        if idx.size == 0:
            led.dropped[m] += rate * d
        return m, idx

    def _flow(self, a: float, b: float, rate: float) -> None:
        """Serve ``rate`` requests/s at the Service from ``a`` to ``b`` (constant ready pods, one ledger minute)."""
        raise NotImplementedError

    def _drain(self, idx: _I64) -> None:
        """Account what deleted ready pods ``idx`` still hold: they finish it without new arrivals, up to the
        drain timeout, and hold their GPUs meanwhile."""
        raise NotImplementedError
