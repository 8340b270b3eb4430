"""``adapter.sim.fleet``'s serving model solved piecewise exactly and vectorized over pods (``FluidFleet``).

The offline engine (``adapter.sim.simulate``) needs 80,640 syncs per policy for the 14-day trace; the
step-by-step ``Fleet`` would take hours. Within a pod the batch settles within one service time (~0.2 s),
so the state that matters at the 15 s scale is the queue, piecewise linear under a piecewise constant
arrival rate. ``tests/sim/test_simulate.py`` checks ``FluidFleet`` (with ``queueing=False``) against ``Fleet``.

Two things ``Fleet`` does not model, both on by default here (see ``adapter.sim.latency`` and ``GpuPool``):

* waiting before saturation: below capacity a request waits with the M/G/c probability and time of
  ``WaitModel`` (Poisson arrivals queue well before 100 %); above it, the fluid backlog adds its wait;
* GPU availability (opt-in, ``pool``): pods beyond the GPUs the cluster has stay Pending until the
  cluster autoscaler has added a node, then load their model.

Accounting, per simulated minute (``Ledger``): requests completed and how many took longer than the SLO,
requests dropped, pod-seconds (loading, pending and draining pods hold or wait for their GPUs too), the
fleet's waiting requests.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adapter.sim.config import FleetConfig
from adapter.sim.latency import UPPER as _UPPER
from adapter.sim.latency import WaitModel, normal_cdf

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]

MINUTE_S = 60.0
# A draining pod with less than this in flight has finished (the same threshold as adapter.sim.fleet).
_EMPTY = 0.05
_EPS = 1e-9


class SimulationError(ValueError):
    """The simulation cannot run with these inputs (the message says why)."""


@dataclass(frozen=True)
class GpuPool:
    """The GPUs a new pod can get (``FluidFleet(pool=...)``; None: always a free GPU, the old model).

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


class FluidFleet:
    """``adapter.sim.fleet``'s serving model, solved piecewise exactly and vectorized over pods.

    Per ready pod with arrival rate ``lam`` (the Service's even split) and queue ``q``: while ``q > 0``
    or ``lam >= capacity`` the batch is full and the pod completes ``capacity`` requests/s, so ``q``
    changes at ``lam - capacity`` (capped at ``max_queue``; the excess is dropped); otherwise the batch
    holds ``n*`` requests with ``n* / S(n*) = lam``. A completing request from the backlog waited
    ``q / capacity``, with a lognormal service time of mean ``S(n)``: the same formulas as ``Fleet``.
    Without a backlog, the latency is ``WaitModel``'s M/G/c wait plus the service time (``queueing=False``:
    the service time alone, as in ``Fleet``). Pods load
    for a delay drawn uniformly from ``load_delay_s`` (one draw per created pod, in creation order, from
    ``random.Random(seed)``, so every policy gets the same sequence). Scale-down removes pods like a
    ReplicaSet (loading pods first, then the newest); a removed ready pod drains what it holds at full
    speed (accounted at once, up to ``drain_timeout_s``) and holds its GPUs while it does.
    """

    def __init__(
        self,
        config: FleetConfig,
        *,
        replicas: int,
        start: float,
        end: float,
        slo_s: float,
        samples: int = 6,
        queueing: bool = True,
        arrival_cv2: float = 1.0,
        pool: GpuPool | None = None,
    ) -> None:
        if replicas < 0:
            raise SimulationError("replicas must not be negative")
        if not end > start:
            raise SimulationError("the run must end after it starts")
        self.config = config
        self._mu = config.capacity_rps
        self._slots = config.batch_slots
        self._sigma = config.latency_sigma
        self._bounds = np.concatenate(([slo_s], _UPPER))
        self._samples = samples
        self._rng = random.Random(config.seed)
        self._node_rng = random.Random(config.seed + 1)  # node delays never shift the pods' load delays
        self.waits = WaitModel(config, arrival_cv2=arrival_cv2, enabled=queueing)
        self.pool = pool
        self._node_ready: list[float] = []  # ready time of each node the autoscaler added
        self._rate = 0.0  # arrival rate at the Service over the last piece
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
        """What ``vllm:num_requests_waiting`` reads per pod: the backlog, or below capacity the M/G/c
        mean queue at the pod's current share of the arrivals (0 for pods not serving)."""
        ready = self.ready_mask()
        out = self._q.copy()
        count = int(ready.sum())
        if count:
            lam = self._rate / count
            if lam < self._mu:
                out[ready & (self._q <= 0)] += self.waits.mean_queue(lam)
        return out

    @property
    def running(self) -> _F64:
        """Requests in the batch per pod."""
        return self._n

    @property
    def kv_cache_usage(self) -> _F64:
        """What ``vllm:kv_cache_usage_perc`` reads per pod (0..1): ``adapter.sim.fleet``'s full-batch usage times
        the batch's fill."""
        cfg = self.config
        out: _F64 = cfg.kv_full_usage * np.minimum(self._n / cfg.batch_slots, 1.0)
        return out

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

    def _service(self, n: _F64) -> _F64:
        cfg = self.config
        out: _F64 = cfg.base_service_s * (1.0 + cfg.batch_slowdown * np.minimum(n / self._slots, 1.0))
        return out

    def _n_star(self, lam: float) -> float:
        """Requests in the batch when a pod serves ``lam`` < capacity without a queue: n / S(n) = lam."""
        cfg = self.config
        b, k = cfg.base_service_s, cfg.batch_slowdown
        return lam * b / (1.0 - lam * b * k / self._slots)

    def _shifted_cdf(self, wait: _F64, service: _F64) -> _F64:
        """P(latency <= bound) for completions that waited ``wait`` (samples x pods) with a lognormal
        service of mean ``service``: samples x pods x (SLO, bucket bounds)."""
        sigma = self._sigma
        mlog = np.log(service) - sigma * sigma / 2.0
        diff = self._bounds[None, None, :] - wait[:, :, None]
        valid = diff > 0
        z = (np.log(np.where(valid, diff, 1.0)) - mlog[:, :, None]) / sigma
        out: _F64 = np.where(valid, normal_cdf(z), 0.0)
        return out

    def _record(self, m: int, weights: _F64, wait: _F64, service: _F64) -> _F64:
        """Book completions ``weights`` (samples x pods) that waited ``wait`` with mean service ``service``."""
        return self._book(m, weights, self._shifted_cdf(wait, service))

    def _book(self, m: int, weights: _F64, cdf: _F64) -> _F64:
        """Book completions ``weights`` (samples x pods) with latency CDF ``cdf`` (samples x pods x bounds).

        Returns, per pod, the completions at or below each finite bucket bound (pods x buckets, cumulative).
        """
        led = self.ledger
        led.over_slo[m] += float(np.sum(weights * (1.0 - cdf[:, :, 0])))
        per_pod: _F64 = np.einsum("sp,spk->pk", weights, cdf[:, :, 1:])
        total = float(weights.sum())
        led.completions[m] += total
        inc = np.diff(np.concatenate(([0.0], per_pod.sum(axis=0), [total])))
        led.buckets[m] += inc
        return per_pod

    def _drain(self, idx: _I64) -> None:
        """Account the remaining work of deleted ready pods ``idx``: they finish what they hold at full
        speed (no new arrivals), up to the drain timeout, and hold their GPUs meanwhile."""
        cfg = self.config
        mu = self._mu
        m = self.minute(self.now)
        q0, n0 = self._q[idx], self._n[idx]
        timeout = cfg.drain_timeout_s
        queue_time = q0 / mu
        served_q = np.minimum(q0, mu * timeout)
        lost = (q0 - served_q) + np.where(queue_time > timeout, n0, 0.0)
        s_now = self._service(n0)
        tail = np.where(n0 > _EMPTY, s_now * np.log(np.maximum(n0, _EMPTY) / _EMPTY), 0.0)
        self.ledger.pod_seconds[m] += float(np.sum(np.minimum(queue_time + tail, timeout)))
        self.ledger.dropped[m] += float(lost.sum())
        # Queued requests complete at capacity while the queue ahead of them shrinks; the batch in flight
        # completes with no wait. Midpoint samples over the drain, as in _flow.
        s = self._samples
        frac = (np.arange(s) + 0.5) / s
        span = np.minimum(queue_time, timeout)
        wait = np.maximum(q0[None, :] - mu * frac[:, None] * span[None, :], 0.0) / mu
        weights = np.repeat(served_q[None, :] / s, s, axis=0)
        full = np.full_like(wait, self.config.full_batch_service_s)
        self._record(m, weights, wait, full)
        batch_done = np.where(queue_time > timeout, 0.0, n0)
        self._record(m, batch_done[None, :], np.zeros((1, idx.size)), s_now[None, :])

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
        self._rate = rate
        idx = np.flatnonzero(self.ready_mask(a))
        if idx.size == 0:
            led.dropped[m] += rate * d
        return m, idx

    def _flow(self, a: float, b: float, rate: float) -> None:
        d = b - a
        m, idx = self._open_piece(a, b, rate)
        led = self.ledger
        if idx.size == 0:
            return
        mu, slots, qmax = self._mu, self._slots, self.config.max_queue
        lam = rate / idx.size
        q0, n0 = self._q[idx], self._n[idx]
        s = self._samples
        tau = (np.arange(s) + 0.5) / s * d
        dropped = np.zeros(idx.size)
        if lam >= mu:
            raw_end = q0 + (lam - mu) * d
            q_end = np.minimum(raw_end, qmax)
            dropped = np.maximum(raw_end - qmax, 0.0)
            n_end = np.full(idx.size, slots)
            q_s = np.minimum(q0[None, :] + (lam - mu) * tau[:, None], qmax)
            n_s = np.full_like(q_s, slots)
            rate_s = np.full_like(q_s, mu)
        else:
            n_star = self._n_star(lam)
            q_end = np.maximum(q0 - (mu - lam) * d, 0.0)
            n_end = np.where(q_end > 0, slots, n_star)
            if not np.any(q0 > 0):
                q_s = np.zeros((1, idx.size))
                n_s = np.full_like(q_s, n_star)
                rate_s = np.full_like(q_s, lam)
            else:
                q_s = np.maximum(q0[None, :] - (mu - lam) * tau[:, None], 0.0)
                busy = q_s > 0
                n_s = np.where(busy, slots, n_star)
                rate_s = np.where(busy, mu, lam)
        done = lam * d + q0 + n0 - q_end - n_end - dropped
        # A batch cannot fill faster than requests arrive: a short piece leaves it part-filled.
        n_end = np.where(done < 0, n_end + done, n_end)
        done = np.maximum(done, 0.0)
        # Completions spread over the samples in proportion to the completion rate there (evenly when
        # nothing arrives and only the batch in flight finishes).
        rate_s = np.where(rate_s.sum(axis=0) > 0, rate_s, 1.0)
        per_sample = rate_s * (done / rate_s.sum(axis=0))[None, :]
        backlog = q_s > 0
        if lam < mu and not np.all(backlog):
            # No backlog: the M/G/c wait plus the service time, the same for every pod at this rate.
            steady = self.waits.stationary_cdf(lam, self._bounds)
            if np.any(backlog):
                cdf = np.where(backlog[:, :, None], self._shifted_cdf(q_s / mu, self._service(n_s)), steady)
            else:
                cdf = np.broadcast_to(steady, (*q_s.shape, steady.size))
        else:
            cdf = self._shifted_cdf(q_s / mu, self._service(n_s))
        per_pod = self._book(m, per_sample, cdf)
        self._cum[idx, :-1] += per_pod
        self._cum[idx, -1] += done
        led.dropped[m] += float(dropped.sum())
        extra = self.waits.mean_queue(lam) * idx.size if lam < mu else 0.0
        waiting = float(max(q_s.sum(axis=1).max(), q_end.sum(), q0.sum())) + (extra if math.isfinite(extra) else 0.0)
        led.max_waiting[m] = max(led.max_waiting[m], waiting)
        self._q[idx] = q_end
        self._n[idx] = n_end
