"""The offline HPA what-if engine: replay a load trace through the HPA v2 model and a GPU/vLLM fleet.

Per policy (``adapter.sim.policies``) and on the same trace, every ``sync_period_s`` (15 s, the
controller's default) of simulated time the engine:

1. observes the pods as the metrics pipeline would (``FluidFleet.view``: per-GPU utilization with
   dcgm-exporter's rounding, vLLM queue depth, P99 from the latency histogram over the catalog's window);
2. computes what the server would serve (``policies.readings``: the server's ``fuse`` for the composite,
   ``adapter.workloads.fit_history`` refit once per forecast step for the boost);
3. runs one ``HPAModel.reconcile`` and applies a rescale to the fleet;
4. advances the fleet to the next sync under the trace's arrival rate.

Physics (the same for every policy) is ``adapter.sim.fleet``'s fluid model of a continuous-batching pod,
with the same ``FleetConfig``, but solved exactly between events instead of integrated in 0.5 s steps
(``FluidFleet``): a 14-day trace is 80,640 syncs per policy, and the step-by-step ``Fleet`` would need
hours. Within a pod the batch settles within one service time (~0.2 s), so the state that matters at
the 15 s scale is the queue, which is piecewise linear under a piecewise constant arrival rate;
``tests/sim/test_simulate.py`` checks ``FluidFleet`` against ``Fleet`` on the same scenario.

Accounting, per simulated minute: requests completed and how many took longer than the SLO (their
latency is queue wait + a lognormal service time, as in ``Fleet``), requests dropped, pod-seconds
(loading and draining pods hold their GPUs too), the fleet's waiting requests. A minute violates the SLO
when more than 1 % of its requests (dropped ones included) exceeded it, i.e. its P99 is above the SLO.

Runtime: the 14-day shared trace (80,640 syncs per policy) takes 30 s (cpu) to 150 s (composite) per
policy on one core; the five comparison policies in 2 processes took 224 s (measured on a shared 2-core
machine; ``benchmarks/simulate_report.py offline``). The composite policies cost most: the server's
``fuse`` runs at every sync, and the forecast refits once per 5-minute step (ses: ~1 ms a fit).
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import cast

import numpy as np
import numpy.typing as npt

from adapter.hpa.controller import HPAModel
from adapter.hpa.proposals import MetricReading
from adapter.hpa.replicas import PodInfo
from adapter.settings import Catalog, ForecastDef
from adapter.sim.fleet import VLLM_E2E_LATENCY_BUCKETS, FleetConfig
from adapter.sim.policies import LATENCY_METRIC, CpuModel, PodView, Policy, average_usage, readings
from adapter.sim.trace import ScaledTrace
from adapter.workloads import ForecastService, ForecastState, fit_history

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]

SYNC_PERIOD_S = 15.0  # kube-controller-manager --horizontal-pod-autoscaler-sync-period default
MINUTE_S = 60.0
SLO_QUANTILE = 0.99
DEFAULT_LATENCY_WINDOW_S = 120.0
# A draining pod with less than this in flight has finished (the same threshold as adapter.sim.fleet).
_EMPTY = 0.05
_EPS = 1e-9
_UPPER = np.asarray(VLLM_E2E_LATENCY_BUCKETS, dtype=np.float64)


class SimulationError(ValueError):
    """The simulation cannot run with these inputs (the message says why)."""


def normal_cdf(z: _F64) -> _F64:
    """Standard normal CDF, vectorized: 0.5 * erfc(-z / sqrt(2)) with the Chebyshev-fitted erfc of
    Numerical Recipes (``erfcc``, fractional error below 1.2e-7 everywhere); numpy has no erf."""
    x = -np.asarray(z, dtype=np.float64) / math.sqrt(2.0)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    poly = -1.26551223 + t * (
        1.00002368
        + t
        * (
            0.37409196
            + t
            * (
                0.09678418
                + t
                * (
                    -0.18628806
                    + t
                    * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277))))
                )
            )
        )
    )
    erfc = t * np.exp(-a * a + poly)
    erfc = np.where(x >= 0, erfc, 2.0 - erfc)
    out: _F64 = 0.5 * erfc
    return out


def histogram_quantile(q: float, upper: _F64, cumulative: _F64) -> _F64:
    """Prometheus ``histogram_quantile`` for each row of ``cumulative`` (prometheus/prometheus
    promql/quantile.go ``bucketQuantile``): linear interpolation inside the bucket holding rank
    ``q x count``; the upper bound of the last finite bucket when the rank falls in +Inf; NaN for an
    empty histogram. ``cumulative[:, i]`` counts observations <= ``upper[i]``; the last column is +Inf.
    """
    rows = cumulative.shape[0]
    n_finite = upper.size
    out = np.full(rows, np.nan)
    total = cumulative[:, -1]
    ok = total > 0
    if not np.any(ok):
        return out
    rank = q * total
    b = np.argmax(cumulative >= rank[:, None], axis=1)
    in_inf = b >= n_finite
    out[ok & in_inf] = upper[-1]
    finite = ok & ~in_inf
    if np.any(finite):
        r = np.flatnonzero(finite)
        bb = b[r]
        start = np.where(bb > 0, upper[np.maximum(bb - 1, 0)], 0.0)
        prev = np.where(bb > 0, cumulative[r, np.maximum(bb - 1, 0)], 0.0)
        count = cumulative[r, bb] - prev
        out[r] = start + (upper[bb] - start) * ((rank[r] - prev) / count)
    return out


@dataclass(frozen=True)
class SimulationConfig:
    """Everything but the policy: physics (``fleet``), SLO, time span, observation model.

    ``start_s`` is a trace time (seconds since the trace's day 0, 00:00) and a multiple of the sync
    period; ``duration_s`` None runs to the end of the trace. ``initial_replicas`` None starts every
    policy with ``ceil(rate / (0.8 x capacity))`` ready pods for the load at ``start_s``.
    """

    fleet: FleetConfig
    slo_p99_s: float = 0.8
    start_s: float = 0.0
    duration_s: float | None = None
    sync_period_s: float = SYNC_PERIOD_S
    initial_replicas: int | None = None
    cpu: CpuModel = field(default_factory=CpuModel)
    samples: int = 6  # integration points per interval for the latency distribution
    record_syncs: bool = False

    def __post_init__(self) -> None:
        if not self.slo_p99_s > 0:
            raise SimulationError("the SLO must be positive")
        if not self.sync_period_s > 0 or MINUTE_S % self.sync_period_s > _EPS:
            raise SimulationError("the sync period must divide a minute")
        if self.duration_s is not None and not self.duration_s > 0:
            raise SimulationError("the duration must be positive")
        if (
            self.start_s < 0
            or abs(self.start_s / self.sync_period_s - round(self.start_s / self.sync_period_s)) > _EPS
        ):
            raise SimulationError("the start must be a non-negative multiple of the sync period")
        if self.samples < 1:
            raise SimulationError("samples must be at least 1")


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
        return cls(
            z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), z.copy(), np.zeros((minutes, _UPPER.size + 1))
        )


class FluidFleet:
    """``adapter.sim.fleet``'s serving model, solved piecewise exactly and vectorized over pods.

    Per ready pod with arrival rate ``lam`` (the Service's even split) and queue ``q``: while ``q > 0``
    or ``lam >= capacity`` the batch is full and the pod completes ``capacity`` requests/s, so ``q``
    changes at ``lam - capacity`` (capped at ``max_queue``; the excess is dropped); otherwise the batch
    holds ``n*`` requests with ``n* / S(n*) = lam``. A completing request waited ``q / capacity``
    and its service time is lognormal with mean ``S(n)``: the same formulas as ``Fleet``. Pods load
    for a delay drawn uniformly from ``load_delay_s`` (one draw per created pod, in creation order, from
    ``random.Random(seed)``, so every policy gets the same sequence). Scale-down removes pods like a
    ReplicaSet (loading pods first, then the newest); a removed ready pod drains what it holds at full
    speed (accounted at once, up to ``drain_timeout_s``) and holds its GPUs while it does.
    """

    def __init__(
        self, config: FleetConfig, *, replicas: int, start: float, end: float, slo_s: float, samples: int = 6
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
        # Warm start: the initial pods were created one load delay ago and are ready now.
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
    def running(self) -> _F64:
        """Requests in the batch per pod."""
        return self._n

    @property
    def cumulative_latency(self) -> _F64:
        """Cumulative latency histogram per pod (+Inf column = completions), as vLLM's counters."""
        return self._cum

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

    def _service(self, n: _F64) -> _F64:
        cfg = self.config
        out: _F64 = cfg.base_service_s * (1.0 + cfg.batch_slowdown * np.minimum(n / self._slots, 1.0))
        return out

    def _n_star(self, lam: float) -> float:
        """Requests in the batch when a pod serves ``lam`` < capacity without a queue: n / S(n) = lam."""
        cfg = self.config
        b, k = cfg.base_service_s, cfg.batch_slowdown
        return lam * b / (1.0 - lam * b * k / self._slots)

    def _record(self, m: int, weights: _F64, wait: _F64, service: _F64) -> _F64:
        """Book completions ``weights`` (samples x pods) that waited ``wait`` with mean service ``service``.

        Returns, per pod, the completions at or below each finite bucket bound (pods x buckets, cumulative).
        """
        sigma = self._sigma
        mlog = np.log(service) - sigma * sigma / 2.0
        diff = self._bounds[None, None, :] - wait[:, :, None]
        valid = diff > 0
        z = (np.log(np.where(valid, diff, 1.0)) - mlog[:, :, None]) / sigma
        cdf = np.where(valid, normal_cdf(z), 0.0)
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

    def _flow(self, a: float, b: float, rate: float) -> None:
        d = b - a
        m = self.minute(a)
        led = self.ledger
        led.pod_seconds[m] += d * self._ids.size
        led.arrivals[m] += rate * d
        idx = np.flatnonzero(self.ready_mask(a))
        if idx.size == 0:
            led.dropped[m] += rate * d  # no ready pod: the Service has no endpoint
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
        per_pod = self._record(m, per_sample, q_s / mu, self._service(n_s))
        self._cum[idx, :-1] += per_pod
        self._cum[idx, -1] += done
        led.dropped[m] += float(dropped.sum())
        waiting = float(max(q_s.sum(axis=1).max(), q_end.sum(), q0.sum()))
        led.max_waiting[m] = max(led.max_waiting[m], waiting)
        self._q[idx] = q_end
        self._n[idx] = n_end


def history_points(spec: ForecastDef) -> int:
    """How many points one forecast fit sees: the server's own ``ForecastService.points_needed``,
    called on an object that carries only the spec (it reads nothing else), so the two cannot drift."""
    holder = SimpleNamespace(spec=spec)
    return ForecastService.points_needed(cast(ForecastService, holder))


class BoostTracker:
    """The forecast boost as the server computes it, from the fleet's own completions.

    The server's load history is ``sum over pods of rate(vllm:request_success_total[window])`` on the
    forecast step grid; here: completions over ``[T - window, T)`` / window for each step ``T`` (NaN
    before the run had a full window). Once per new step the history ending at the step is refit with
    ``adapter.workloads.fit_history`` (the server's function) and its ``boost`` is used until the next.
    """

    def __init__(self, spec: ForecastDef, start: float) -> None:
        window = spec.load.window_seconds
        if window is None or spec.step_s % MINUTE_S or window % MINUTE_S:
            raise SimulationError("the forecast step and load window must be whole minutes")
        self.spec = spec
        self.start = start
        self.points = history_points(spec)
        self.window_min = int(window // MINUTE_S)
        self.state: ForecastState | None = None
        self.step_ts = -math.inf
        self.fits = 0
        self.reasons: dict[str, int] = {}
        self.fit_seconds = 0.0

    def history(self, step_ts: float, completions: _F64) -> _F64:
        """The load on the step grid ending at ``step_ts`` (req/s), NaN where no full window exists."""
        cs = np.concatenate(([0.0], np.cumsum(completions)))
        steps = step_ts - (self.points - 1 - np.arange(self.points)) * self.spec.step_s
        end = np.rint((steps - self.start) / MINUTE_S).astype(np.int64)
        begin = end - self.window_min
        ok = (begin >= 0) & (end < cs.size)
        values = np.full(self.points, np.nan)
        values[ok] = (cs[end[ok]] - cs[begin[ok]]) / (self.window_min * MINUTE_S)
        return values

    def boost(self, now: float, completions: _F64) -> float:
        """The boost to apply at ``now`` (refitting first when a new step has begun)."""
        step_ts = math.floor(now / self.spec.step_s) * self.spec.step_s
        if step_ts > self.step_ts and step_ts - self.window_min * MINUTE_S >= self.start - _EPS:
            self.step_ts = step_ts
            self.state = fit_history(self.history(step_ts, completions), step_ts=step_ts, spec=self.spec)
            self.fits += 1
            self.fit_seconds += self.state.fit_seconds
            self.reasons[self.state.reason] = self.reasons.get(self.state.reason, 0) + 1
        return 1.0 if self.state is None else self.state.boost


@dataclass(frozen=True)
class SyncRecord:
    """One HPA sync as the controller saw it: the inputs of ``reconcile`` and the replicas it chose."""

    now: float
    spec_replicas: int
    status_replicas: int
    pods: tuple[PodInfo, ...]
    readings: tuple[MetricReading, ...]
    desired: int


@dataclass(frozen=True)
class PolicyRun:
    """One policy's run: per-sync and per-minute series plus the figures of the report.

    Sync arrays (``sync_*``) hold one value per HPA sync: time, arrival rate, replicas after the
    decision, ready and loading pods, the HPA's average metric value (NaN when it read nothing), boost.
    Minute arrays (``minute_*``) come from the ledger; ``minute_p99`` is histogram_quantile(0.99) over
    the minute's completions in vLLM's buckets (what a dashboard would show), ``minute_violated`` uses
    the exact fraction over the SLO.
    """

    policy: str
    description: str
    summary: dict[str, float | int | str | None]
    forecast: dict[str, object] | None
    sync_t: _F64
    sync_rate: _F64
    sync_desired: _I64
    sync_ready: _I64
    sync_loading: _I64
    sync_usage: _F64
    sync_boost: _F64
    minute_t: _F64
    minute_arrivals: _F64
    minute_p99: _F64
    minute_violated: npt.NDArray[np.bool_]
    minute_pods: _F64
    minute_waiting: _F64
    syncs: tuple[SyncRecord, ...] = ()


@dataclass(frozen=True)
class SimulationResult:
    """Every policy's run on the same trace, with the inputs that define the comparison."""

    runs: tuple[PolicyRun, ...]
    inputs: dict[str, object]
    runtime_s: float


def initial_replicas(
    trace: ScaledTrace, config: SimulationConfig, min_replicas: int, max_replicas: int
) -> int:
    """``config.initial_replicas``, or enough pods for the starting load at 80 % of capacity, in bounds."""
    if config.initial_replicas is not None:
        n = config.initial_replicas
    else:
        n = math.ceil(trace.rate_at(config.start_s).rate / (0.8 * config.fleet.capacity_rps))
    return min(max(n, min_replicas, 1), max_replicas)


def end_time(trace: ScaledTrace, config: SimulationConfig) -> float:
    """When the run stops: ``start + duration``, or the end of the trace."""
    if config.duration_s is not None:
        return config.start_s + config.duration_s
    end = trace.trace.start_s + trace.trace.duration_s
    if end <= config.start_s:
        raise SimulationError("the start is after the end of the trace")
    return end


class Observer:
    """Turns the fleet's state into the ``PodView`` the metrics pipeline would see at a sync.

    GPU utilization per GPU is ``100 (1 - exp(-batch))`` (2 % while loading) plus N(0, 1) noise, rounded
    as dcgm-exporter prints it; the latency P99 is histogram_quantile(0.99) over the pod's histogram
    increase in the last ``latency_window_s`` (a pod without completions there has none).
    """

    def __init__(
        self,
        fleet: FluidFleet,
        *,
        latency_window_s: float,
        cpu: CpuModel,
        sync_period_s: float,
        seed: int,
        deployment: str,
    ) -> None:
        self.fleet = fleet
        self.window = latency_window_s
        self.cpu = cpu
        self._rng = np.random.default_rng(seed)
        self._history: deque[tuple[float, _I64, _F64]] = deque(
            maxlen=int(math.ceil(latency_window_s / sync_period_s)) + 2
        )
        self._prefix = deployment
        self._names: dict[int, str] = {}
        self._infos: dict[tuple[int, bool], PodInfo] = {}

    def name(self, pod_id: int) -> str:
        """The pod name of a fleet pod id."""
        name = self._names.get(pod_id)
        if name is None:
            name = self._names[pod_id] = f"{self._prefix}-{pod_id:06d}"
        return name

    @staticmethod
    def _since(ids: _I64, cum: _F64, old_ids: _I64, old_cum: _F64) -> _F64:
        pos = np.searchsorted(old_ids, ids)
        found = pos < old_ids.size
        found[found] = old_ids[pos[found]] == ids[found]
        base = np.zeros_like(cum)
        base[found] = old_cum[pos[found]]
        out: _F64 = cum - base
        return out

    def view(self, now: float, *, latency: bool = True) -> PodView:
        """The pods as observed at ``now`` (call once per sync: it records the histogram history).

        ``latency=False`` skips the latency P99 (all NaN) for policies that do not read it.
        """
        fleet = self.fleet
        ids, cum = fleet.ids, fleet.cumulative_latency
        ready = fleet.ready_mask(now)
        cfg = fleet.config
        noise = self._rng.normal(size=(ids.size, cfg.gpus_per_pod))
        busy = np.where(ready, 100.0 * (1.0 - np.exp(-fleet.running)), 2.0)
        gpu = np.clip(np.rint(busy[:, None] + noise), 0.0, 100.0)
        p99 = np.full(ids.size, np.nan)
        completions_rate = np.zeros(ids.size)
        if self._history and latency:
            base = self._history[0]
            for entry in self._history:
                if entry[0] <= now - self.window + _EPS:
                    base = entry
            window = self._since(ids, cum, base[1], base[2])
            p99 = histogram_quantile(SLO_QUANTILE, _UPPER, window)
        if self._history:
            last = self._history[-1]
            if now > last[0]:
                completions_rate = self._since(ids, cum, last[1], last[2])[:, -1] / (now - last[0])
        self._history.append((now, ids.copy(), cum.copy()))
        cpu = self.cpu.idle_milli + self.cpu.per_rps_milli * completions_rate
        return PodView(
            now=now,
            names=tuple(self.name(int(i)) for i in ids),
            serving=ready,
            gpu_util=gpu,
            queue=np.rint(fleet.waiting),
            latency_p99=p99,
            cpu_milli=cpu,
        )

    def pods(self, now: float) -> tuple[PodInfo, ...]:
        """The pods the HPA lists through the scale selector: loading pods are Running but not Ready."""
        fleet = self.fleet
        ready = fleet.ready_mask(now)
        out = []
        for pod_id, is_ready, created, ready_at in zip(
            fleet.ids, ready, fleet.created, fleet.ready_at, strict=True
        ):
            key = (int(pod_id), bool(is_ready))
            info = self._infos.get(key)
            if info is None:
                info = PodInfo(
                    name=self.name(key[0]),
                    phase="Running",
                    ready=key[1],
                    start_time=float(created),
                    ready_transition_time=float(ready_at) if key[1] else float(created),
                    requests_milli={"cpu": self.cpu.request_milli},
                )
                self._infos.pop((key[0], not key[1]), None)
                self._infos[key] = info
            out.append(info)
        return tuple(out)


def reads_latency(policy: Policy, catalog: Catalog) -> bool:
    """True when one of the policy's metrics depends on the latency P99 (itself or through a composite)."""
    names = set(policy.metric_names)
    if catalog.forecast is not None and catalog.forecast.boosted in names:
        names.add(catalog.forecast.base)
    if LATENCY_METRIC in names:
        return True
    return any(
        t.metric == LATENCY_METRIC
        for n in names
        if n in catalog.composites
        for t in catalog.composites[n].terms
    )


def latency_window(catalog: Catalog) -> float:
    """The window of the catalog's latency metric (seconds), the default 2 min if it has none."""
    metric = catalog.metrics.get(LATENCY_METRIC)
    if metric is None or metric.window_seconds is None:
        return DEFAULT_LATENCY_WINDOW_S
    return float(metric.window_seconds)


def run_policy(policy: Policy, trace: ScaledTrace, config: SimulationConfig, catalog: Catalog) -> PolicyRun:
    """Simulate one policy over the configured span of ``trace`` (deterministic for a given seed)."""
    started = time.perf_counter()
    t0 = config.start_s
    t_end = end_time(trace, config)
    spec = policy.hpa
    fleet = FluidFleet(
        config.fleet,
        replicas=initial_replicas(trace, config, spec.min_replicas, spec.max_replicas),
        start=t0,
        end=t_end,
        slo_s=config.slo_p99_s,
        samples=config.samples,
    )
    observer = Observer(
        fleet,
        latency_window_s=latency_window(catalog),
        cpu=config.cpu,
        sync_period_s=config.sync_period_s,
        seed=config.fleet.seed,
        deployment=config.fleet.deployment.name,
    )
    tracker = BoostTracker(policy.forecast, t0) if policy.forecast is not None else None
    model = HPAModel(spec)
    needs_latency = reads_latency(policy, catalog)
    n_syncs = max(1, math.ceil((t_end - t0) / config.sync_period_s - _EPS))
    sync_t = t0 + np.arange(n_syncs, dtype=np.float64) * config.sync_period_s
    sync_rate, sync_usage, sync_boost = np.zeros(n_syncs), np.full(n_syncs, np.nan), np.ones(n_syncs)
    sync_desired = np.zeros(n_syncs, dtype=np.int64)
    sync_ready, sync_loading = np.zeros(n_syncs, dtype=np.int64), np.zeros(n_syncs, dtype=np.int64)
    records: list[SyncRecord] = []
    ups = downs = 0
    trace_step, trace_start = trace.trace.step_s, trace.trace.start_s
    for i in range(n_syncs):
        now = float(sync_t[i])
        boost = tracker.boost(now, fleet.ledger.completions) if tracker is not None else 1.0
        view = observer.view(now, latency=needs_latency)
        metrics = readings(spec, view, catalog, boost)
        pods = observer.pods(now)
        current = fleet.desired
        decision = model.reconcile(
            now, spec_replicas=current, status_replicas=len(pods), metrics=metrics, pods=pods
        )
        if decision.rescale:
            if decision.desired_replicas > current:
                ups += 1
            else:
                downs += 1
            fleet.set_replicas(decision.desired_replicas, now)
        if config.record_syncs:
            records.append(
                SyncRecord(now, current, len(pods), pods, tuple(metrics), decision.desired_replicas)
            )
        ready = fleet.ready_mask(now)
        sync_desired[i], sync_ready[i] = fleet.desired, int(ready.sum())
        sync_loading[i], sync_boost[i] = int(ready.size - ready.sum()), boost
        usage = average_usage(metrics[0])
        sync_usage[i] = np.nan if usage is None else usage
        sync_rate[i] = trace.rate_at(now).rate
        until = min(now + config.sync_period_s, t_end)
        while fleet.now < until - _EPS:
            a = fleet.now
            boundary = trace_start + (math.floor((a - trace_start) / trace_step + _EPS) + 1) * trace_step
            fleet.advance(min(until, boundary), trace.rate_at(a).rate)
    return _finish(
        policy,
        config,
        fleet,
        tracker,
        started,
        ups,
        downs,
        records,
        sync_t,
        sync_rate,
        sync_desired,
        sync_ready,
        sync_loading,
        sync_usage,
        sync_boost,
    )


def _finish(
    policy: Policy,
    config: SimulationConfig,
    fleet: FluidFleet,
    tracker: BoostTracker | None,
    started: float,
    ups: int,
    downs: int,
    records: list[SyncRecord],
    sync_t: _F64,
    sync_rate: _F64,
    sync_desired: _I64,
    sync_ready: _I64,
    sync_loading: _I64,
    sync_usage: _F64,
    sync_boost: _F64,
) -> PolicyRun:
    led = fleet.ledger
    minutes = led.arrivals.size
    served = led.completions + led.dropped
    bad = led.over_slo + led.dropped
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(served > 0, bad / np.where(served > 0, served, 1.0), 0.0)
    violated = fraction > 1.0 - SLO_QUANTILE + 1e-12
    cumulative = np.cumsum(led.buckets, axis=1)
    minute_p99 = histogram_quantile(SLO_QUANTILE, _UPPER, cumulative)
    minute_t = fleet.start + np.arange(minutes, dtype=np.float64) * MINUTE_S
    gpus = fleet.config.gpus_per_pod
    pod_hours = float(led.pod_seconds.sum()) / 3600.0
    total = float(served.sum())
    summary: dict[str, float | int | str | None] = {
        "slo_violation_minutes": int(violated.sum()),
        "minutes": int(minutes),
        "gpu_hours": pod_hours * gpus,
        "pod_hours": pod_hours,
        "scale_events": ups + downs,
        "scale_ups": ups,
        "scale_downs": downs,
        "peak_queue": float(led.max_waiting.max()),
        "mean_replicas": float(sync_desired.mean()),
        "max_replicas": int(sync_desired.max()),
        "min_replicas": int(sync_desired.min()),
        "requests": total,
        "dropped": float(led.dropped.sum()),
        "over_slo_fraction": float(bad.sum() / total) if total > 0 else 0.0,
        "runtime_s": time.perf_counter() - started,
    }
    forecast: dict[str, object] | None = None
    if tracker is not None:
        forecast = {
            "model": tracker.spec.model,
            "fits": tracker.fits,
            "reasons": dict(sorted(tracker.reasons.items())),
            "fit_seconds": tracker.fit_seconds,
            "mean_boost": float(sync_boost.mean()),
            "boosted_sync_share": float(np.mean(sync_boost > 1.0)),
        }
    return PolicyRun(
        policy=policy.name,
        description=policy.description,
        summary=summary,
        forecast=forecast,
        sync_t=sync_t,
        sync_rate=sync_rate,
        sync_desired=sync_desired,
        sync_ready=sync_ready,
        sync_loading=sync_loading,
        sync_usage=sync_usage,
        sync_boost=sync_boost,
        minute_t=minute_t,
        minute_arrivals=led.arrivals / MINUTE_S,
        minute_p99=minute_p99,
        minute_violated=violated,
        minute_pods=led.pod_seconds / MINUTE_S,
        minute_waiting=led.max_waiting,
        syncs=tuple(records),
    )


def simulate(
    policies: Sequence[Policy],
    trace: ScaledTrace,
    config: SimulationConfig,
    catalog: Catalog,
    *,
    workers: int = 1,
    progress: Callable[[str], None] | None = None,
) -> SimulationResult:
    """Run every policy on the same trace and physics (in ``workers`` processes when > 1)."""
    if not policies:
        raise SimulationError("no policy to simulate")
    started = time.perf_counter()
    runs: list[PolicyRun] = []
    if workers > 1 and len(policies) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(policies))) as pool:
            futures = [pool.submit(run_policy, p, trace, config, catalog) for p in policies]
            for policy, future in zip(policies, futures, strict=True):
                runs.append(future.result())
                if progress is not None:
                    progress(policy.name)
    else:
        for policy in policies:
            runs.append(run_policy(policy, trace, config, catalog))
            if progress is not None:
                progress(policy.name)
    t_end = end_time(trace, config)
    inputs: dict[str, object] = {
        "start_s": config.start_s,
        "end_s": t_end,
        "duration_s": t_end - config.start_s,
        "slo_p99_s": config.slo_p99_s,
        "sync_period_s": config.sync_period_s,
        "trace_peak_rps": trace.peak_rps,
        "trace_scale": trace.scale,
        "initial_replicas": initial_replicas(
            trace, config, policies[0].hpa.min_replicas, policies[0].hpa.max_replicas
        ),
        "physics": physics(config.fleet),
        "cpu_model": {
            "request_milli": config.cpu.request_milli,
            "idle_milli": config.cpu.idle_milli,
            "per_rps_milli": config.cpu.per_rps_milli,
        },
    }
    return SimulationResult(runs=tuple(runs), inputs=inputs, runtime_s=time.perf_counter() - started)


def physics(cfg: FleetConfig) -> dict[str, object]:
    """The fleet parameters that define the physics, with the latencies they imply (for the report)."""
    z99 = 2.3263478740408408
    factor = math.exp(z99 * cfg.latency_sigma - cfg.latency_sigma**2 / 2.0)
    return {
        "capacity_rps": cfg.capacity_rps,
        "base_service_s": cfg.base_service_s,
        "batch_slowdown": cfg.batch_slowdown,
        "latency_sigma": cfg.latency_sigma,
        "batch_slots": cfg.batch_slots,
        "max_queue": cfg.max_queue,
        "load_delay_s": list(cfg.load_delay_s),
        "drain_timeout_s": cfg.drain_timeout_s,
        "gpus_per_pod": cfg.gpus_per_pod,
        "p99_idle_s": cfg.base_service_s * factor,
        "p99_full_batch_s": cfg.full_batch_service_s * factor,
        "gpu_util_full_batch_pct": 100.0 * (1.0 - math.exp(-cfg.batch_slots)),
        "seed": cfg.seed,
    }
