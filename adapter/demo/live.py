"""The closed loop against the real server (``simulate --live``): a simulated fleet, a real Prometheus scraping
it, the real adapter, and the HPA model reading the adapter over HTTP.

Everything runs on 127.0.0.1 and is torn down on exit:

1. the fleet: token-level vLLM engines (``adapter.demo.tokenpods.TokenPods`` around ``adapter.sim.tokenfleet``,
   the physics of the offline ``simulate``, with the trace's per-window mix when it has token columns), advanced
   by ``FleetRunner`` on a compressed clock: ``speed`` simulated seconds per wall second, for the trace *and* the
   physics (model load, drain, queues), so a 5-hour run takes 15 minutes at the default speed 20;
2. its /metrics (``adapter.demo.render``: dcgm-exporter, vLLM's own families and kube-state-metrics series)
   scraped by a throwaway Prometheus every ``scrape_interval_s`` wall seconds;
3. ``python -m adapter serve --insecure-plain-http --pod-source prometheus`` with the catalog's time windows
   (PromQL ranges, the forecast step) divided by ``speed``, so they cover the same simulated time
   (``adapter.demo.catalogs.scaled_catalog``);
4. the HPA model (``adapter.demo.autoscaler.Autoscaler``), synced every 15 *simulated* seconds.

Every sync is recorded (``SyncRecord``); ``adapter.demo.autoscaler.replay`` proves the live HPA is the offline model
fed what it read, and ``adapter.demo.live_report`` sets the run beside the offline engine on the same span.

The run's figures come from the fleet itself: its own ledger, per simulated minute, as the offline engine's
(completions, requests and output tokens over each stated TTFT/ITL/e2e bound, drops, pod-seconds), so the live
and offline summaries count the same things.

The adapter's own clocks are compressed too: its answer cache (``cache_ttl_seconds``), its pod-membership
cache (``--pod-cache-ttl``) and its forecast tick (``--forecast-tick``) are divided by ``speed``, so they hold
for the same simulated time as in a cluster.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt
import yaml

from adapter.catalog import parse_catalog
from adapter.demo.adapter_process import AdapterProcess
from adapter.demo.autoscaler import Autoscaler, ReplayResult, replay
from adapter.demo.catalogs import catalog_document, scaled_catalog
from adapter.demo.exporter import MetricsExporter
from adapter.demo.runner import FleetRunner
from adapter.demo.servers import DevServerError, scraping_prometheus
from adapter.demo.tokenpods import TokenPods
from adapter.sim.accounting import RunTotals, oracle_gpu_hours, summarize
from adapter.sim.policies import Policy
from adapter.sim.readings import average_usage
from adapter.sim.simulate import (
    MINUTE_S,
    SimulationConfig,
    SimulationError,
    SyncRecord,
    initial_replicas,
    latency_window,
)
from adapter.sim.snapshot import PodPhase
from adapter.sim.tokenfleet import TokenEngine, oracle_gpu_hours_by_mix
from adapter.sim.trace import ScaledTrace, TraceClock

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class LiveOptions:
    """How the live loop runs. ``warmup_s`` (simulated seconds the fleet runs before the first sync, so
    Prometheus holds a latency window) defaults to the catalog's latency window + 60 s."""

    speed: float = 20.0
    scrape_interval_s: float = 0.5
    warmup_s: float | None = None
    tick_s: float = 0.05  # wall seconds between fleet advances
    catalog_path: Path | None = None
    ready_timeout_s: float = 60.0
    request_timeout_s: float = 5.0
    log: Callable[[str], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.speed > 0:
            raise SimulationError("--speed must be positive")
        if not 0.1 <= self.scrape_interval_s <= 15:
            raise SimulationError("--scrape-interval must be between 100ms and 15s")
        if not self.tick_s > 0:
            raise SimulationError("tick_s must be positive")


# -- accounting -------------------------------------------------------------------------------------------------


def token_summary(
    pods: TokenPods, trace: ScaledTrace, start_s: float, minutes: int, desired: _I64, ups: int, downs: int
) -> dict[str, float | int | str | None]:
    """The summary of ``minutes`` simulated minutes from ``start_s`` (a whole minute of the fleet's ledger) on
    token engines, counted as the offline engine counts them: the fleet's own ledger, violation minutes per stated
    bound (``ttft_violation_minutes`` ...), and the oracle at each minute's knee (of that minute's mix when the
    trace has token columns)."""
    fleet = pods.fleet
    engine: TokenEngine = fleet.engine
    first = round((start_s - fleet.start) / MINUTE_S)
    span = slice(first, first + minutes)
    led = fleet.ledger
    gpus = fleet.config.gpus_per_pod
    totals = RunTotals(
        completions=led.completions[span], over_slo=led.over_slo[span], dropped=led.dropped[span],
        pod_seconds=led.pod_seconds[span], desired=desired, scale_ups=ups, scale_downs=downs,
        peak_queue=float(led.max_waiting[span].max(initial=0.0)), gpus_per_pod=gpus,
    )  # fmt: skip
    arrivals = led.arrivals[span] / MINUTE_S
    oracle: float | None
    if trace.mix_at(start_s) is not None:
        mixes = [trace.mix_at(start_s + m * MINUTE_S) or (None, None) for m in range(minutes)]
        knees = np.asarray([engine.knee(*mx) for mx in mixes])
        saturation = np.asarray([engine.model(*mx).saturation_rps for mx in mixes])
        oracle = oracle_gpu_hours_by_mix(arrivals, knees, saturation, gpus)
    else:
        per_pod = engine.knee()
        oracle = oracle_gpu_hours(arrivals, per_pod, gpus) if per_pod > 0 else None
    summary = summarize(totals, oracle_gpu_hours=oracle)
    for bound, broken in fleet.bound_minutes().items():
        summary[f"{bound}_violation_minutes"] = int(broken[span].sum())
    return summary


# -- the loop ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveResult:
    """A live run: what every sync read and decided, its replay, and figures like an offline run's.

    ``sync_ttft`` / ``sync_itl``: the worst ready pod's TTFT and ITL P99 at each sync (the demo's status-line
    figure, ``TokenPods.latency_p99``)."""

    policy: str
    records: tuple[SyncRecord, ...]
    sync_t: _F64
    sync_rate: _F64
    sync_ready: _I64
    sync_usage: _F64
    read_errors: int
    late_syncs: int
    replay: ReplayResult
    summary: dict[str, float | int | str | None]
    start_s: float
    initial_replicas: int
    wall_s: float
    speed: float
    scrape_interval_s: float = 0.0
    sync_ttft: _F64 = field(default_factory=lambda: np.zeros(0))
    sync_itl: _F64 = field(default_factory=lambda: np.zeros(0))
    slo: dict[str, float] = field(default_factory=dict)  # the bounds the minutes were judged against

    @property
    def sync_desired(self) -> _I64:
        """Replicas after each sync's decision."""
        return np.asarray([r.desired for r in self.records], dtype=np.int64)


class _SimClock:
    """Simulated time on a compressed wall clock; frozen at ``sim_start`` until ``go()``."""

    def __init__(self, sim_start: float, speed: float) -> None:
        self.sim_start, self.speed = sim_start, speed
        self.wall_start: float | None = None

    def go(self) -> None:
        self.wall_start = time.monotonic()

    def __call__(self) -> float:
        if self.wall_start is None:
            return self.sim_start
        return self.sim_start + (time.monotonic() - self.wall_start) * self.speed

    def wall_at(self, sim: float) -> float:
        assert self.wall_start is not None
        return self.wall_start + (sim - self.sim_start) / self.speed


@contextlib.contextmanager
def _server_stack(
    fleet: TokenPods, trace: ScaledTrace, clock: _SimClock, catalog_doc: dict[str, Any], options: LiveOptions
) -> Iterator[tuple[FleetRunner, str]]:
    """Exporter + Prometheus + adapter around ``fleet``; yields (runner, adapter URL). Stops all on exit."""
    say = options.log or (lambda _text: None)
    with contextlib.ExitStack() as stack:
        # The runner's time base is the simulated clock: the trace and the physics both run at ``speed``.
        runner = FleetRunner(
            fleet,
            trace,
            TraceClock(wall_start=clock.sim_start, speed=1.0, sim_start=clock.sim_start),
            tick_s=options.tick_s,
            monotonic=clock,
        )
        stack.callback(runner.stop)
        exporter = MetricsExporter(runner)
        exporter.start()
        stack.callback(exporter.stop)
        interval = f"{max(1, round(options.scrape_interval_s * 1000))}ms"
        prom = scraping_prometheus(exporter.target, job="llm-sim-fleet", interval=interval)
        stack.callback(prom.close)
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-hpa-simulate-")))
        catalog_path = workdir / "catalog.yaml"
        catalog_path.write_text(yaml.safe_dump(catalog_doc, sort_keys=False), encoding="utf-8")
        try:
            prom.start()
            # The server's own clocks, compressed like everything else (defaults 10 s and 5 s).
            adapter = AdapterProcess(
                prom.url,
                workdir,
                extra_args=[
                    "--config",
                    str(catalog_path),
                    "--pod-cache-ttl",
                    f"{10.0 / options.speed:g}",
                    "--forecast-tick",
                    f"{5.0 / options.speed:g}",
                ],
            )
            stack.callback(adapter.stop)
            adapter.start(options.ready_timeout_s)
        except DevServerError as exc:
            raise SimulationError(str(exc)) from None
        url = adapter.url
        say(f"live: exporter {exporter.url}, prometheus {prom.url} (scrape {interval}), adapter {url}")
        yield runner, url


def run_live(policy: Policy, trace: ScaledTrace, config: SimulationConfig, options: LiveOptions) -> LiveResult:
    """Run ``policy`` in the closed loop for ``config.duration_s`` simulated seconds (see the module doc).

    The fleet (token-level engines of ``config.engine``'s profile, mix and SLO) starts at ``config.start_s`` with
    the initial replicas; the first HPA sync follows a warm-up of whole simulated minutes. Raises
    ``SimulationError`` for a policy the live loop cannot serve (only Pods metrics: there is no metrics-server for
    cpu) or when a server cannot be started.
    """
    for metric in policy.hpa.metrics:
        if metric.type != "Pods":
            raise SimulationError(f"--live reads Pods metrics only (no metrics-server here): {metric.describe()}")
    if config.duration_s is None:
        raise SimulationError("--live needs a duration")
    say = options.log or (lambda _text: None)
    doc = catalog_document(options.catalog_path)
    catalog = parse_catalog(doc)
    live_doc = scaled_catalog(doc, options.speed, options.scrape_interval_s)
    period = config.sync_period_s
    warmup = options.warmup_s if options.warmup_s is not None else latency_window(catalog) + 60.0
    # Whole minutes, so the run's minutes are the fleet ledger's (the sync period divides a minute).
    hpa_start = config.start_s + math.ceil(warmup / MINUTE_S - 1e-9) * MINUTE_S
    spec = policy.hpa
    replicas = initial_replicas(trace, replace(config, start_s=hpa_start), spec.min_replicas, spec.max_replicas)
    fleet = TokenPods(config.engine, config.fleet, replicas=replicas, now=config.start_s)
    clock = _SimClock(config.start_s, options.speed)
    n_syncs = max(1, math.ceil(config.duration_s / period - 1e-9))
    deployment = config.fleet.deployment
    selector = ",".join(f"{k}={v}" for k, v in sorted(deployment.labels.items()))
    records: list[SyncRecord] = []
    rates, readies, usages = np.zeros(n_syncs), np.zeros(n_syncs, dtype=np.int64), np.full(n_syncs, np.nan)
    ttfts, itls = np.full(n_syncs, np.nan), np.full(n_syncs, np.nan)
    errors = late = ups = downs = 0
    started = time.monotonic()
    with (
        _server_stack(fleet, trace, clock, live_doc, options) as (runner, url),
        httpx.Client(base_url=url, timeout=options.request_timeout_s, trust_env=False) as client,
    ):
        autoscaler = Autoscaler(spec, runner, client, deployment.namespace, selector, config.cpu.request_milli)
        clock.go()
        runner.start()
        say(
            f"live: {policy.name}, {replicas} pods, {config.duration_s / 3600:g} simulated hours at speed "
            f"{options.speed:g} (~{(warmup + config.duration_s) / options.speed / 60:.1f} wall minutes)"
        )
        for i in range(n_syncs):
            now = hpa_start + i * period
            delay = clock.wall_at(now) - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            elif -delay * options.speed > period:
                late += 1  # the previous sync overran a whole period
            record, snapshot = autoscaler.sync(now)
            metrics = record.readings
            errors += sum(1 for r in metrics if r.error is not None)
            if record.desired != record.spec_replicas:
                ups, downs = (ups + 1, downs) if record.desired > record.spec_replicas else (ups, downs + 1)
            records.append(record)
            status = runner.status()
            ttfts[i], itls[i] = status.ttft_p99_s, status.itl_p99_s
            rates[i] = trace.rate_at(now).rate
            readies[i] = snapshot.count(PodPhase.READY)
            usage = average_usage(metrics[0])
            usages[i] = np.nan if usage is None else usage
            if i % max(1, round(600 / period)) == 0:
                say(
                    f"live: sim {now / 3600:6.2f} h  arrivals {rates[i]:7.1f}/s  "
                    f"replicas {record.desired:3d}"
                    f" (ready {readies[i]})  metric {usages[i]:.3f}  read errors {errors}"
                )
        runner.stop()
        # The last sync's period runs to its end, as offline: the minutes all hold a whole minute of load.
        fleet.advance(max(hpa_start + n_syncs * period - fleet.now, 0.0), trace.rate_at(fleet.now).rate)
    wall = time.monotonic() - started
    desired = np.asarray([r.desired for r in records], dtype=np.int64)
    minutes = max(1, math.ceil(config.duration_s / MINUTE_S - 1e-9))
    summary = token_summary(fleet, trace, hpa_start, minutes, desired, ups, downs)
    slo = dict(fleet.engine.slo.stated)
    return LiveResult(
        policy=policy.name,
        records=tuple(records),
        sync_t=hpa_start + np.arange(n_syncs, dtype=np.float64) * period,
        sync_rate=rates,
        sync_ready=readies,
        sync_usage=usages,
        read_errors=errors,
        late_syncs=late,
        replay=replay(spec, records),
        summary=summary,
        start_s=hpa_start,
        initial_replicas=replicas,
        wall_s=wall,
        speed=options.speed,
        scrape_interval_s=options.scrape_interval_s,
        sync_ttft=ttfts,
        sync_itl=itls,
        slo=slo,
    )
