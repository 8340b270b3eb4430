"""The offline HPA what-if engine: replay a load trace through the HPA v2 model and a GPU/vLLM fleet.

Per policy (``adapter.sim.policies``) and on the same trace, every ``sync_period_s`` (15 s, the
controller's default) of simulated time the engine:

1. observes the pods as the metrics pipeline would and hands the HPA the view of ``metric_delay_s``
   earlier (``adapter.sim.observer``: dcgm-exporter's 30 s collection and Prometheus' scrape make served
   values ~30 s old);
2. computes what the server would serve (``readings.readings``: the server's ``fuse`` for the composite,
   ``adapter.forecast_service.fit_history`` refit once per forecast step for the boost, ``adapter.sim.forecasting``,
   warmed with the trace's demand before the replay);
3. runs one ``HPAModel.reconcile`` and applies a rescale to the fleet;
4. advances the fleet to the next sync under the trace's arrival rate and mix (``adapter.sim.tokenfleet``:
   token-level vLLM engines, each in the steady state of its share of the load or behind a backlog, on the
   pods of ``adapter.sim.lifecycle`` with, optionally, a GPU pool whose extra nodes take minutes to arrive).

Every policy starts with the fleet sized for the first minute's load: ``ceil(rate / knee)`` ready pods,
where the knee is the per-pod load at which every stated SLO bound holds at P99 (``TokenEngine.knee``), so no
policy pays a start-up violation. Every run reports the oracle lower bound (``accounting.oracle_gpu_hours``):
the GPU-hours of a clairvoyant whose pods start instantly and each carry the knee load, and the run's
GPU-hours as a multiple of it.

Runtime (``benchmarks/sim_engine.py``, one worker on 2 shared cores): the 14-day shared trace (80,640 syncs per
policy) replays in 25 s for gpu and 66 s for boosted. The composite policies cost most: the server's ``fuse`` runs
at every sync, and the forecast refits once per 5-minute step; each pod's engine is the fast model's steady state,
cached per mix and arrival rate.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from adapter.catalog import Catalog
from adapter.hpa.controller import HPAModel
from adapter.hpa.proposals import MetricReading
from adapter.hpa.replicas import PodInfo
from adapter.sim.accounting import RunTotals, oracle_gpu_hours, static_peak_gpu_hours, summarize, violated_minutes
from adapter.sim.config import FleetConfig
from adapter.sim.forecasting import BoostTracker, history_span_s, in_flight, warmup_history
from adapter.sim.latency import SLO_QUANTILE, UPPER, histogram_quantile
from adapter.sim.lifecycle import MINUTE_S, GpuPool, SimulationError
from adapter.sim.observer import DEFAULT_METRIC_DELAY_S, Observer
from adapter.sim.policies import Policy
from adapter.sim.readings import LATENCY_KEY, CpuModel, average_usage, clairvoyant_reading, readings
from adapter.sim.tokenfleet import TOKEN_LATENCY_FAMILIES, TokenEngine, TokenFleet, oracle_gpu_hours_by_mix
from adapter.sim.trace import ScaledTrace

__all__ = [
    "MINUTE_S",
    "SLO_QUANTILE",
    "PolicyRun",
    "SimulationConfig",
    "SimulationError",
    "SimulationResult",
    "SyncRecord",
    "initial_replicas",
    "knee",
    "latency_window",
    "run_policy",
    "simulate",
]

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]

SYNC_PERIOD_S = 15.0  # kube-controller-manager --horizontal-pod-autoscaler-sync-period default
DEFAULT_LATENCY_WINDOW_S = 120.0
_EPS = 1e-9


@dataclass(frozen=True)
class SimulationConfig:
    """Everything but the policy: the pods (``fleet``), their engines and SLO (``engine``), time span,
    observation model.

    ``start_s`` is a trace time (seconds since the trace's day 0, 00:00) and a multiple of the sync
    period; ``duration_s`` None runs to the end of the trace. ``initial_replicas`` None starts every
    policy with ``ceil(rate / knee)`` ready pods for the load at ``start_s``. ``metric_delay_s`` is how old
    the values the HPA reads are (a multiple of the sync period). ``pool`` None: a new pod always finds a GPU.
    ``warm_forecast`` feeds the forecaster the trace's demand before ``start_s`` as history.
    """

    fleet: FleetConfig
    engine: TokenEngine
    start_s: float = 0.0
    duration_s: float | None = None
    sync_period_s: float = SYNC_PERIOD_S
    initial_replicas: int | None = None
    cpu: CpuModel = field(default_factory=CpuModel)
    record_syncs: bool = False
    metric_delay_s: float = DEFAULT_METRIC_DELAY_S
    pool: GpuPool | None = None
    warm_forecast: bool = True

    def __post_init__(self) -> None:
        if not self.sync_period_s > 0 or MINUTE_S % self.sync_period_s > _EPS:
            raise SimulationError("the sync period must divide a minute")
        if self.duration_s is not None and not self.duration_s > 0:
            raise SimulationError("the duration must be positive")
        if self.start_s < 0 or abs(self.start_s / self.sync_period_s - round(self.start_s / self.sync_period_s)) > _EPS:
            raise SimulationError("the start must be a non-negative multiple of the sync period")
        steps = self.metric_delay_s / self.sync_period_s
        if self.metric_delay_s < 0 or abs(steps - round(steps)) > 1e-6:
            raise SimulationError("the metric delay must be a non-negative multiple of the sync period")


def knee(config: SimulationConfig) -> float:
    """The largest per-pod load (requests/s) of the engine's mix at which every stated bound holds at P99 (0:
    not even an idle pod meets them)."""
    return config.engine.knee()


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


@dataclass
class SyncSeries:
    """What the run loop records at every sync (one slot per sync), handed to ``_finish``."""

    t: _F64
    rate: _F64
    desired: _I64
    ready: _I64
    loading: _I64
    usage: _F64
    boost: _F64
    ups: int = 0
    downs: int = 0
    records: list[SyncRecord] = field(default_factory=list)

    @classmethod
    def empty(cls, t: _F64) -> SyncSeries:
        """Zeroed series for the sync times ``t`` (usage NaN, boost 1)."""
        n = t.size
        return cls(
            t=t,
            rate=np.zeros(n),
            desired=np.zeros(n, dtype=np.int64),
            ready=np.zeros(n, dtype=np.int64),
            loading=np.zeros(n, dtype=np.int64),
            usage=np.full(n, np.nan),
            boost=np.ones(n),
        )


def initial_replicas(trace: ScaledTrace, config: SimulationConfig, min_replicas: int, max_replicas: int) -> int:
    """``config.initial_replicas``, or the pods the load at the start needs at the knee, in bounds (at
    saturation when no per-pod load meets the SLO)."""
    if config.initial_replicas is not None:
        n = config.initial_replicas
    else:
        per_pod = knee(config) or config.engine.model().saturation_rps
        n = math.ceil(trace.rate_at(config.start_s).rate / per_pod - 1e-9)
    return min(max(n, min_replicas, 1), max_replicas)


def end_time(trace: ScaledTrace, config: SimulationConfig) -> float:
    """When the run stops: ``start + duration``, or the end of the trace."""
    if config.duration_s is not None:
        return config.start_s + config.duration_s
    end = trace.trace.start_s + trace.trace.duration_s
    if end <= config.start_s:
        raise SimulationError("the start is after the end of the trace")
    return end


def peak_demand(trace: ScaledTrace, now: float, lead_s: float) -> float:
    """The trace's highest arrival rate over ``[now, now + lead_s]`` (req/s): the rate at ``now`` and at every
    window start inside the span (the rate is held within a window). What only a clairvoyant knows."""
    step, start = trace.trace.step_s, trace.trace.start_s
    first = start + (math.floor((now - start) / step + _EPS) + 1) * step
    times = [now, *np.arange(first, now + lead_s + _EPS, step)]
    return max(trace.rate_at(float(t)).rate for t in times)


def _policy_metrics(policy: Policy, catalog: Catalog) -> set[str]:
    """Every metric the policy reads: its own, what its boosted metrics boost, and their composites' terms."""
    names = set(policy.metric_names)
    names |= {base for n in list(names) if (base := catalog.boosted_base(n)) is not None}
    return names | {t.metric for n in names if n in catalog.composites for t in catalog.composites[n].terms}


def latencies_read(policy: Policy, catalog: Catalog) -> frozenset[str]:
    """The latency P99s the policy's metrics depend on (keys of ``TokenFleet.latency_histograms``)."""
    metrics = _policy_metrics(policy, catalog)
    return frozenset(LATENCY_KEY[name] for name in metrics if name in LATENCY_KEY)


def latency_window(catalog: Catalog) -> float:
    """The window of the catalog's latency metrics (seconds; the first of e2e, TTFT, ITL and the guard's that
    states one), the default 2 min if none does."""
    for name in LATENCY_KEY:
        metric = catalog.metrics.get(name)
        if metric is not None and metric.window_seconds is not None:
            return float(metric.window_seconds)
    return DEFAULT_LATENCY_WINDOW_S


def _tracker(policy: Policy, trace: ScaledTrace, config: SimulationConfig) -> BoostTracker | None:
    if policy.forecast is None:
        return None
    pre = warmup_history(trace, config.start_s, history_span_s(policy.forecast)) if config.warm_forecast else None
    return BoostTracker(policy.forecast, config.start_s, pre)


def run_policy(policy: Policy, trace: ScaledTrace, config: SimulationConfig, catalog: Catalog) -> PolicyRun:
    """Simulate one policy over the configured span of ``trace`` (deterministic for a given seed)."""
    started = time.perf_counter()
    t0 = config.start_s
    t_end = end_time(trace, config)
    spec = policy.hpa
    replicas = initial_replicas(trace, config, spec.min_replicas, spec.max_replicas)
    latencies = latencies_read(policy, catalog)
    fleet = TokenFleet(
        config.engine,
        config.fleet,
        replicas=replicas,
        start=t0,
        end=t_end,
        pool=config.pool,
        families=frozenset(TOKEN_LATENCY_FAMILIES[k] for k in latencies if k in TOKEN_LATENCY_FAMILIES),
    )
    observer = Observer(
        fleet,
        latency_window_s=latency_window(catalog),
        cpu=config.cpu,
        sync_period_s=config.sync_period_s,
        seed=config.fleet.seed,
        deployment=config.fleet.deployment.name,
        delay_s=config.metric_delay_s,
        latencies=latencies,
    )
    tracker = _tracker(policy, trace, config)
    model = HPAModel(spec)
    needs_latency = bool(latencies)
    n_syncs = max(1, math.ceil((t_end - t0) / config.sync_period_s - _EPS))
    series = SyncSeries.empty(t0 + np.arange(n_syncs, dtype=np.float64) * config.sync_period_s)
    trace_step, trace_start = trace.trace.step_s, trace.trace.start_s
    for i in range(n_syncs):
        now = float(series.t[i])
        boost = 1.0
        if tracker is not None:
            tracker.observe(now, *in_flight(fleet, now))
            boost = tracker.boost(now, fleet.ledger.completions)
        pods = observer.pods(now)
        if policy.lead_s is None:
            metrics = readings(spec, observer.observed(now, latency=needs_latency), catalog, boost)
        else:  # the yardstick reads the trace, not the pods: no view to take
            # As old as every other metric (--metric-delay): the yardstick differs in what it knows, not when.
            seen = max(now - config.metric_delay_s, trace.trace.start_s)
            metrics = [clairvoyant_reading(peak_demand(trace, seen, policy.lead_s), pods)]
        current = fleet.desired
        decision = model.reconcile(now, spec_replicas=current, status_replicas=len(pods), metrics=metrics, pods=pods)
        if decision.rescale:
            if decision.desired_replicas > current:
                series.ups += 1
            else:
                series.downs += 1
            fleet.set_replicas(decision.desired_replicas, now)
        if config.record_syncs:
            series.records.append(SyncRecord(now, current, len(pods), pods, tuple(metrics), decision.desired_replicas))
        ready = fleet.ready_mask(now)
        series.desired[i], series.ready[i] = fleet.desired, int(ready.sum())
        series.loading[i], series.boost[i] = int(ready.size - ready.sum()), boost
        usage = average_usage(metrics[0])
        series.usage[i] = np.nan if usage is None else usage
        series.rate[i] = trace.rate_at(now).rate
        until = min(now + config.sync_period_s, t_end)
        while fleet.now < until - _EPS:
            a = fleet.now
            boundary = trace_start + (math.floor((a - trace_start) / trace_step + _EPS) + 1) * trace_step
            window_mix = trace.mix_at(a)
            fleet.set_mix(*(window_mix or (None, None)))
            fleet.advance(min(until, boundary), trace.rate_at(a).rate)
    return _finish(policy, config, fleet, tracker, started, series, minute_knees(trace, config, fleet))


def minute_knees(trace: ScaledTrace, config: SimulationConfig, fleet: TokenFleet) -> tuple[_F64, _F64] | None:
    """Per ledger minute, the knee and the saturation of that minute's mix (a trace with token columns), else
    None."""
    if trace.mix_at(config.start_s) is None:
        return None
    engine = config.engine
    knees, saturation = np.zeros(fleet.ledger.arrivals.size), np.zeros(fleet.ledger.arrivals.size)
    for m in range(knees.size):
        window_mix = trace.mix_at(fleet.start + m * MINUTE_S) or (None, None)
        knees[m] = engine.knee(*window_mix)
        saturation[m] = engine.model(*window_mix).saturation_rps
    return knees, saturation


def _finish(
    policy: Policy,
    config: SimulationConfig,
    fleet: TokenFleet,
    tracker: BoostTracker | None,
    started: float,
    series: SyncSeries,
    knees: tuple[_F64, _F64] | None = None,
) -> PolicyRun:
    led = fleet.ledger
    minutes = led.arrivals.size
    per_pod = knee(config)
    oracle = oracle_gpu_hours(led.arrivals / MINUTE_S, per_pod, fleet.config.gpus_per_pod) if per_pod > 0 else None
    static = static_peak_gpu_hours(led.arrivals / MINUTE_S, per_pod, fleet.config.gpus_per_pod) if per_pod > 0 else None
    if knees is not None:
        oracle = oracle_gpu_hours_by_mix(led.arrivals / MINUTE_S, knees[0], knees[1], fleet.config.gpus_per_pod)
        per_minute = np.where(knees[0] > 0, knees[0], knees[1])
        static = static_peak_gpu_hours(led.arrivals / MINUTE_S, per_minute, fleet.config.gpus_per_pod)
    totals = RunTotals(
        completions=led.completions,
        over_slo=led.over_slo,
        dropped=led.dropped,
        pod_seconds=led.pod_seconds,
        desired=series.desired,
        scale_ups=series.ups,
        scale_downs=series.downs,
        peak_queue=float(led.max_waiting.max()),
        gpus_per_pod=fleet.config.gpus_per_pod,
    )
    summary = summarize(totals, oracle_gpu_hours=oracle)
    summary["static_peak_gpu_hours"] = static
    summary["x_static_peak"] = float(summary["gpu_hours"] or 0) / static if static else None
    for bound, broken in fleet.bound_minutes().items():
        summary[f"{bound}_violation_minutes"] = int(broken.sum())
    summary["runtime_s"] = time.perf_counter() - started
    forecast: dict[str, object] | None = None
    if tracker is not None:
        forecast = {
            "model": tracker.spec.model,
            "fits": tracker.fits,
            "reasons": dict(sorted(tracker.reasons.items())),
            "fit_seconds": tracker.fit_seconds,
            "warmup_minutes": int(np.isfinite(tracker.pre).sum()),
            "mean_boost": float(series.boost.mean()),
            "boosted_sync_share": float(np.mean(series.boost > 1.0)),
        }
    return PolicyRun(
        policy=policy.name,
        description=policy.description,
        summary=summary,
        forecast=forecast,
        sync_t=series.t,
        sync_rate=series.rate,
        sync_desired=series.desired,
        sync_ready=series.ready,
        sync_loading=series.loading,
        sync_usage=series.usage,
        sync_boost=series.boost,
        minute_t=fleet.start + np.arange(minutes, dtype=np.float64) * MINUTE_S,
        minute_arrivals=led.arrivals / MINUTE_S,
        minute_p99=histogram_quantile(SLO_QUANTILE, UPPER, np.cumsum(led.buckets, axis=1)),
        minute_violated=violated_minutes(led.completions, led.over_slo, led.dropped),
        minute_pods=led.pod_seconds / MINUTE_S,
        minute_waiting=led.max_waiting,
        syncs=tuple(series.records),
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
        "sync_period_s": config.sync_period_s,
        "metric_delay_s": config.metric_delay_s,
        "gpu_pool": None
        if config.pool is None
        else {
            "warm_gpus": config.pool.warm_gpus,
            "node_provision_s": list(config.pool.node_provision_s),
            "max_gpus": config.pool.max_gpus,
        },
        "warm_forecast": config.warm_forecast,
        "trace_peak_rps": trace.peak_rps,
        "trace_scale": trace.scale,
        "knee_rps_per_pod": knee(config),
        "oracle_gpu_hours": runs[0].summary["oracle_gpu_hours"],
        "static_peak_gpu_hours": runs[0].summary.get("static_peak_gpu_hours"),
        "initial_replicas": initial_replicas(trace, config, policies[0].hpa.min_replicas, policies[0].hpa.max_replicas),
        "physics": config.engine.describe(),
        "slo": config.engine.slo.stated,
        "cpu_model": {
            "request_milli": config.cpu.request_milli,
            "idle_milli": config.cpu.idle_milli,
            "per_rps_milli": config.cpu.per_rps_milli,
        },
    }
    return SimulationResult(runs=tuple(runs), inputs=inputs, runtime_s=time.perf_counter() - started)
