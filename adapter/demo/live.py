"""The closed loop against the real server (``simulate --live``), and the offline replay that checks it.

Everything runs on 127.0.0.1 and is torn down on exit:

1. the step-by-step fleet model (``adapter.sim.fleet.Fleet``, with the offline engine's M/G/c waiting
   before saturation unless ``queueing=False``) advanced by ``FleetRunner`` on a compressed clock:
   ``speed`` simulated seconds per wall second, for the trace *and* the physics (model load, drain,
   queues), so a 5-hour run takes 15 minutes at the default speed 20;
2. its /metrics (``adapter.demo.exporter``: dcgm-exporter, vLLM and kube-state-metrics series) scraped by
   a throwaway Prometheus every ``scrape_interval_s`` wall seconds;
3. ``python -m adapter serve --insecure-plain-http --pod-source prometheus`` with the catalog's time
   windows (PromQL ranges, the forecast step) divided by ``speed``, so they cover the same simulated time;
4. the HPA model, synced every 15 *simulated* seconds: it lists the pods as the controller's pod lister
   would (from the fleet, as the Kubernetes API holds them), reads each Pods metric exactly as the
   controller does (``GET .../v1beta2/namespaces/<ns>/pods/%2A/<metric>?labelSelector=<scale selector>``,
   ``MilliValue()`` of every item), reconciles, and applies a rescale to the fleet.

Every sync is recorded (``SyncRecord``: the clock, replicas, pods and milli-values it read, the replicas it
chose). ``replay`` feeds the records to a *fresh* ``HPAModel`` whose replica count follows only its own
decisions: identical decisions at every sync prove that the live loop's HPA is the offline model, fed
nothing but what it read over HTTP, and that each decision reached the fleet (the next sync's replica count
is the previous decision). ``compare`` also runs the offline engine over the same span for a side-by-side
(not identical: live values lag by the scrape interval and the server's PromQL windows).

The adapter's own clocks are compressed too: its answer cache (``cache_ttl_seconds``), its pod-membership
cache (``--pod-cache-ttl``) and its forecast tick (``--forecast-tick``) are divided by ``speed``, so they hold
for the same simulated time as in a cluster.
"""

from __future__ import annotations

import contextlib
import json
import math
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import numpy as np
import numpy.typing as npt
import yaml

from adapter.api.groups import PREFIX
from adapter.catalog import DURATION, Catalog, duration_seconds, parse_catalog
from adapter.hpa.controller import ControllerConfig, HPAModel
from adapter.hpa.proposals import MetricReading
from adapter.hpa.replicas import PodInfo
from adapter.hpa.spec import HPASpec
from adapter.quantity import milli_value, parse_quantity
from adapter.sim.accounting import RunTotals, oracle_gpu_hours, summarize, violated_minutes
from adapter.sim.config import VLLM_E2E_LATENCY_BUCKETS
from adapter.sim.fleet import Fleet, FleetSnapshot, PodPhase
from adapter.sim.observer import pod_info
from adapter.sim.policies import Policy, average_usage
from adapter.sim.simulate import (
    MINUTE_S,
    PolicyRun,
    SimulationConfig,
    SimulationError,
    SyncRecord,
    initial_replicas,
    knee,
    latency_window,
    run_policy,
)
from adapter.sim.trace import ScaledTrace, TraceClock

API = f"{PREFIX}/v1beta2"
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


# -- the server's catalog on the compressed clock ---------------------------------------------------------


def _scaled_duration(text: str, speed: float, where: str) -> tuple[str, float]:
    if not DURATION.match(text):
        raise SimulationError(f"{where}: {text!r} is not a duration")
    wall = duration_seconds(text) / speed
    return f"{max(1, round(wall * 1000))}ms", wall


def scaled_catalog(doc: dict[str, Any], speed: float, scrape_interval_s: float) -> dict[str, Any]:
    """A copy of a catalog document whose time windows cover the same *simulated* time at ``speed``.

    Every metric ``window``, the forecast's ``window``, ``step`` and ``forget_after``, the answer cache's
    ``cache_ttl_seconds`` and the value store's ``refresh``, ``max_staleness`` and ``idle`` are divided by
    ``speed`` (durations written in ms). Raises ``SimulationError``
    when a PromQL window would hold fewer than four scrapes (``rate()`` needs two samples): lower ``speed``
    or the scrape interval.
    """
    out: dict[str, Any] = json.loads(json.dumps(doc))

    def need_scrapes(wall: float, where: str) -> None:
        if wall < 4 * scrape_interval_s:
            raise SimulationError(
                f"{where} becomes {wall:.2f} s of wall time at speed {speed:g}, under four scrapes of "
                f"{scrape_interval_s:g} s: lower --speed or --scrape-interval"
            )

    for name, metric in (out.get("metrics") or {}).items():
        if isinstance(metric, dict) and metric.get("window"):
            metric["window"], wall = _scaled_duration(str(metric["window"]), speed, f"metrics.{name}.window")
            need_scrapes(wall, f"metrics.{name}.window")
    forecast = out.get("forecast")
    if isinstance(forecast, dict):
        for key, default in (("window", None), ("step", "5m"), ("forget_after", "1h")):
            text = forecast.get(key, default)
            if text is None:
                continue
            forecast[key], wall = _scaled_duration(str(text), speed, f"forecast.{key}")
            if key in ("window", "step"):
                need_scrapes(wall, f"forecast.{key}")
    out["cache_ttl_seconds"] = float(out.get("cache_ttl_seconds", 0) or 0) / speed
    store = out.get("store")
    if isinstance(store, dict):  # the value store's refresh, staleness and idle time (defaults: 15s, 2x, 1h)
        for key, default in (("refresh", "15s"), ("max_staleness", None), ("idle", "1h")):
            text = store.get(key, default)
            if text is not None:
                store[key], _ = _scaled_duration(str(text), speed, f"store.{key}")
    parse_catalog(out)  # fail here, not in the server's log
    return out


def catalog_document(path: Path | None) -> dict[str, Any]:
    """The catalog YAML as a document: ``path``, or the embedded ``adapter/catalog.yaml``."""
    if path is None:
        text = resources.files("adapter").joinpath("catalog.yaml").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise SimulationError("the catalog is not a YAML mapping")
    return doc


# -- what the HPA controller sees ---------------------------------------------------------------------------


def pod_infos(snapshot: FleetSnapshot, cpu_request_milli: int) -> tuple[PodInfo, ...]:
    """The pods the scale selector lists, as the Kubernetes API holds them (``observer.pod_info``, the
    offline engine's conversion): a loading pod is Running but not Ready; a deleted (draining) pod has its
    deletion timestamp set."""
    return tuple(
        pod_info(
            pod.name,
            ready=pod.phase is PodPhase.READY,
            created=pod.created_at,
            ready_at=pod.ready_at,
            cpu_request_milli=cpu_request_milli,
            deleted=pod.phase is PodPhase.TERMINATING,
        )
        for pod in snapshot.pods
    )


def pods_metric_path(namespace: str, metric: str) -> str:
    """The path the HPA requests for a Pods metric (kubernetes/metrics versioned_client.go:
    ``GetForObjects`` with name ``*``, escaped as the client's URL builder does)."""
    return f"{API}/namespaces/{quote(namespace, safe='')}/pods/%2A/{quote(metric, safe='')}"


def read_pods_metric(client: httpx.Client, namespace: str, metric: str, selector: str) -> MetricReading:
    """One Pods-metric read as the HPA controller does it: ``{describedObject.name: MilliValue()}`` of every
    item, or a failed reading carrying the error (kubernetes pkg/controller/podautoscaler/metrics/client.go
    ``GetRawMetric``)."""
    try:
        response = client.get(pods_metric_path(namespace, metric), params={"labelSelector": selector})
    except httpx.HTTPError as exc:
        return MetricReading.failed(f"unable to fetch metrics from custom metrics API: {exc}")
    if response.status_code != 200:
        try:
            message = str(response.json().get("message", response.text))
        except ValueError:
            message = response.text.strip()
        return MetricReading.failed(f"unable to fetch metrics from custom metrics API: {message}")
    try:
        items = response.json()["items"]
        values = {str(i["describedObject"]["name"]): milli_value(parse_quantity(str(i["value"]))) for i in items}
    except (ValueError, KeyError, TypeError) as exc:
        return MetricReading.failed(f"unable to fetch metrics from custom metrics API: bad answer: {exc}")
    return MetricReading.pods(values)


class Autoscaler:
    """The HPA controller for one simulated Deployment served by the adapter.

    ``sync(now)`` is one controller sync: list the pods (from the fleet, as the pod lister would), read each
    Pods metric of the spec over HTTP (``read_pods_metric``), reconcile the model, and scale the fleet when
    it decides to. ``runner`` is an ``adapter.demo.exporter.FleetRunner`` (``snapshot``, ``set_replicas``).
    """

    def __init__(self, spec: HPASpec, runner: Any, client: httpx.Client, namespace: str, selector: str,
                 cpu_request_milli: int = 4000, config: ControllerConfig | None = None) -> None:  # fmt: skip
        for metric in spec.metrics:
            if metric.type != "Pods":
                raise SimulationError(f"the live loop reads Pods metrics only: {metric.describe()}")
        self.spec = spec
        self.model = HPAModel(spec, config)
        self.runner = runner
        self.client = client
        self.namespace = namespace
        self.selector = selector
        self.cpu_request_milli = cpu_request_milli

    def sync(self, now: float) -> tuple[SyncRecord, FleetSnapshot]:
        """One sync at ``now`` (seconds on the fleet's clock); returns its record and the fleet it saw."""
        snapshot: FleetSnapshot = self.runner.snapshot()
        pods = pod_infos(snapshot, self.cpu_request_milli)
        metrics = tuple(read_pods_metric(self.client, self.namespace, m.name, self.selector) for m in self.spec.metrics)
        current = snapshot.desired_replicas
        status = sum(1 for p in snapshot.pods if p.phase is not PodPhase.TERMINATING)
        decision = self.model.reconcile(now, spec_replicas=current, status_replicas=status, metrics=metrics,
                                        pods=pods)  # fmt: skip
        if decision.rescale:
            self.runner.set_replicas(decision.desired_replicas)
        return SyncRecord(now, current, status, pods, metrics, decision.desired_replicas), snapshot


# -- replay ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplayResult:
    """Replicas a fresh ``HPAModel`` chose from the recorded inputs, and the syncs where they differ from the
    recorded decision (or where the recorded replica count was not the previous decision)."""

    decisions: tuple[int, ...]
    mismatches: tuple[int, ...]

    @property
    def matches(self) -> bool:
        """True when every replayed decision equals the live one."""
        return not self.mismatches


def replay(spec: HPASpec, records: Sequence[SyncRecord], config: ControllerConfig | None = None) -> ReplayResult:
    """Re-run the recorded syncs through a fresh ``HPAModel``; its replica count is its own last decision
    (starting from the first record's), never the recorded one."""
    model = HPAModel(spec, config)
    decisions: list[int] = []
    mismatches: list[int] = []
    current = records[0].spec_replicas if records else 0
    for i, rec in enumerate(records):
        decision = model.reconcile(
            rec.now,
            spec_replicas=current,
            status_replicas=rec.status_replicas,
            metrics=rec.readings,
            pods=rec.pods,
        )
        decisions.append(decision.desired_replicas)
        if decision.desired_replicas != rec.desired or rec.spec_replicas != current:
            mismatches.append(i)
        current = decision.desired_replicas
    return ReplayResult(tuple(decisions), tuple(mismatches))


# -- accounting on the step-by-step fleet ---------------------------------------------------------------


def _count_at_most(cumulative: Sequence[float], completed: float, bound: float) -> float:
    """Observations <= ``bound`` from cumulative vLLM buckets, interpolated linearly inside a bucket (as
    histogram_quantile assumes); exact when ``bound`` is a bucket bound (the default SLO 0.8 s is one)."""
    lower, below = 0.0, 0.0
    for le, count in zip(VLLM_E2E_LATENCY_BUCKETS, cumulative, strict=False):
        if bound <= le:
            return below + (count - below) * (bound - lower) / (le - lower)
        lower, below = le, count
    return completed


class _Accounts:
    """Per simulated minute: completions, completions over the SLO, drops, pod-seconds, from snapshots."""

    def __init__(self, start: float, duration: float, slo_s: float) -> None:
        minutes = max(1, math.ceil(duration / MINUTE_S - 1e-9))
        self.start, self.slo = start, slo_s
        self.completions = np.zeros(minutes)
        self.over = np.zeros(minutes)
        self.dropped = np.zeros(minutes)
        self.pod_seconds = np.zeros(minutes)
        self.peak_waiting = 0.0
        self._seen: dict[str, tuple[float, float]] = {}
        self._dropped = 0.0
        self._first = True

    def add(self, now: float, snapshot: FleetSnapshot, period: float) -> None:
        m = min(max(int((now - self.start) // MINUTE_S), 0), self.completions.size - 1)
        seen: dict[str, tuple[float, float]] = {}
        for pod in snapshot.pods:
            ok = _count_at_most(pod.latency_buckets, pod.completed, self.slo)
            seen[pod.name] = (pod.completed, ok)
            done0, ok0 = self._seen.get(pod.name, (0.0, 0.0))
            if not self._first:
                self.completions[m] += pod.completed - done0
                self.over[m] += (pod.completed - done0) - (ok - ok0)
        if not self._first:
            self.dropped[m] += snapshot.dropped - self._dropped
        self._seen, self._dropped, self._first = seen, snapshot.dropped, False
        self.pod_seconds[m] += len(snapshot.pods) * period
        self.peak_waiting = max(self.peak_waiting, sum(p.waiting for p in snapshot.pods))

    def violated(self) -> npt.NDArray[np.bool_]:
        return violated_minutes(self.completions, self.over, self.dropped)


# -- the loop ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LiveResult:
    """A live run: what every sync read and decided, its replay, and figures like an offline run's."""

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
    fleet: Fleet, trace: ScaledTrace, clock: _SimClock, catalog_doc: dict[str, Any], options: LiveOptions
) -> Iterator[tuple[Any, str]]:
    """Exporter + Prometheus + adapter around ``fleet``; yields (runner, adapter URL). Stops all on exit."""
    from adapter.demo.exporter import FleetRunner, MetricsExporter
    from adapter.demo.servers import AdapterProcess, DevServerError, scraping_prometheus

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

    The fleet starts at ``config.start_s`` with the initial replicas; the first HPA sync follows a warm-up.
    Raises ``SimulationError`` for a policy the live loop cannot serve (only Pods metrics: there is no
    metrics-server for cpu) or when a server cannot be started.
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
    hpa_start = math.ceil((config.start_s + warmup) / period) * period
    spec = policy.hpa
    replicas = initial_replicas(trace, replace(config, start_s=hpa_start), spec.min_replicas, spec.max_replicas)
    # The same waiting before saturation as the offline engine (none with queueing=False).
    fleet = Fleet(
        config.fleet,
        replicas=replicas,
        now=config.start_s,
        waits=config.wait_model() if config.queueing else None,
    )
    clock = _SimClock(config.start_s, options.speed)
    n_syncs = max(1, math.ceil(config.duration_s / period - 1e-9))
    deployment = config.fleet.deployment
    selector = ",".join(f"{k}={v}" for k, v in sorted(deployment.labels.items()))
    accounts = _Accounts(hpa_start, config.duration_s, config.slo_p99_s)
    records: list[SyncRecord] = []
    rates, readies, usages = np.zeros(n_syncs), np.zeros(n_syncs, dtype=np.int64), np.full(n_syncs, np.nan)
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
            accounts.add(now, snapshot, period)
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
    wall = time.monotonic() - started
    desired = np.asarray([r.desired for r in records], dtype=np.int64)
    per_pod = knee(config)
    minute_rates = np.asarray([trace.rate_at(hpa_start + m * MINUTE_S).rate for m in range(accounts.completions.size)])
    totals = RunTotals(
        completions=accounts.completions,
        over_slo=accounts.over,
        dropped=accounts.dropped,
        pod_seconds=accounts.pod_seconds,
        desired=desired,
        scale_ups=ups,
        scale_downs=downs,
        peak_queue=accounts.peak_waiting,
        gpus_per_pod=config.fleet.gpus_per_pod,
    )
    oracle = oracle_gpu_hours(minute_rates, per_pod, config.fleet.gpus_per_pod) if per_pod > 0 else None
    summary = summarize(totals, oracle_gpu_hours=oracle)
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
    )


def offline_twin(
    policy: Policy, trace: ScaledTrace, config: SimulationConfig, live: LiveResult, catalog: Catalog
) -> PolicyRun:
    """The offline engine over the live run's span, from the same initial replicas and physics (the live
    fleet waits before saturation as the offline one does); the values the live HPA reads are about one
    scrape interval old, so that is the twin's ``metric_delay_s`` (rounded to whole syncs)."""
    scrape_sim_s = live.scrape_interval_s * live.speed
    twin = replace(
        config,
        start_s=live.start_s,
        duration_s=float(live.sync_t.size) * config.sync_period_s,
        initial_replicas=live.initial_replicas,
        metric_delay_s=round(scrape_sim_s / config.sync_period_s) * config.sync_period_s,
    )
    return run_policy(policy, trace, twin, catalog)


def compare(live: LiveResult, offline: PolicyRun) -> dict[str, Any]:
    """Side-by-side figures of a live run and the offline engine on the same span (informative only)."""
    n = min(live.sync_t.size, offline.sync_t.size)
    a = live.sync_desired[:n].astype(np.float64)
    b = offline.sync_desired[:n].astype(np.float64)
    corr = float(np.corrcoef(a, b)[0, 1]) if n > 1 and a.std() > 0 and b.std() > 0 else None
    return {
        "syncs": n,
        "replicas_mean_abs_diff": float(np.mean(np.abs(a - b))) if n else None,
        "replicas_correlation": corr,
        "same_replicas_share": float(np.mean(a == b)) if n else None,
        "live": live.summary,
        "offline": offline.summary,
    }


def live_document(
    policy: Policy, live: LiveResult, comparison: dict[str, Any], inputs: dict[str, Any]
) -> dict[str, Any]:
    """The JSON written by ``simulate --live``."""
    return {
        "mode": "live",
        "policy": policy.name,
        "description": policy.description,
        "inputs": inputs,
        "speed": live.speed,
        "wall_s": live.wall_s,
        "syncs": len(live.records),
        "read_errors": live.read_errors,
        "late_syncs": live.late_syncs,
        "replay": {
            "matches": live.replay.matches,
            "mismatches": list(live.replay.mismatches[:20]),
            "mismatch_count": len(live.replay.mismatches),
        },
        "live": live.summary,
        "offline_comparison": comparison,
        "series": {
            "t": live.sync_t.tolist(),
            "arrival_rps": live.sync_rate.round(3).tolist(),
            "live_replicas": live.sync_desired.tolist(),
            "live_ready": live.sync_ready.tolist(),
            "live_metric": [None if math.isnan(v) else round(float(v), 4) for v in live.sync_usage],
        },
    }
