"""``demo``: a simulated GPU/vLLM fleet, a real Prometheus scraping it, and the adapter serving from it.

Everything runs on 127.0.0.1 and is torn down on exit (Ctrl-C, SIGTERM, ``--duration`` or an error):

1. the fleet model (``adapter.sim``) driven by the real ServeGen trace (vendored package data);
2. its /metrics exporter (dcgm-exporter, vLLM and kube-state-metrics shaped series);
3. a throwaway Prometheus scraping it with ``honor_labels: true``, whose data dir is first **backfilled** with
   the fleet's load over the hours the forecaster reads (``adapter.demo.backfill``), so the forecast, the
   boost and the boosted composite answer from the first minute instead of after 10 hours;
4. ``python -m adapter serve`` against that Prometheus, pods from kube-state-metrics series, with the demo's
   Deployment listed under ``forecast.workloads`` so it is forecast before anyone asks;
5. with ``autoscale``, the HPA model (``adapter.demo.autoscaler.Autoscaler``: the design's HPA, reading
   ``llm_composite_load_boosted`` over HTTP as the controller does) resizes the fleet.

Time: like ``simulate --live``, everything runs on one compressed clock, ``speed`` simulated seconds per wall
second (default 60: an hour a minute) -- the trace, the fleet's physics (model loading, queues), the HPA's
15 s syncs and stabilization windows, and the adapter's own windows (the catalog's PromQL windows, forecast
step, caches; ``adapter.demo.catalogs.scaled_catalog``). A compressed clock shows the whole product in a minute,
but the adapter then reads request rates per *wall* second: ``llm_load_forecast`` is ``speed`` times the
simulated req/s the status line prints (the status line and the PNG divide it back).

It prints ready-to-paste ``kubectl get --raw`` commands, a status line every few seconds, and on exit writes a
PNG of what happened (load, replicas, composite and boost, P99 against the SLO).
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

import httpx
import yaml

from adapter.demo.adapter_process import AdapterProcess
from adapter.demo.autoscaler import Autoscaler
from adapter.demo.catalogs import catalog_document, scaled_catalog
from adapter.demo.exporter import MetricsExporter
from adapter.demo.render import HpaStatus
from adapter.demo.runner import FleetRunner
from adapter.demo.servers import DevServerError, free_port, scraping_prometheus
from adapter.demo.timeline import Sample, Timeline
from adapter.demo.tokenpods import TokenPods
from adapter.demo.view import AdapterView, kubectl_command, metric_paths, read_view, status_line
from adapter.sim.config import Deployment, FleetConfig
from adapter.sim.mix import DEFAULT_MIX, mix
from adapter.sim.slo import DEFAULT_SLO
from adapter.sim.tokenfleet import TokenEngine
from adapter.sim.trace import ScaledTrace, TraceClock, default_trace_path, load_trace

DEFAULT_SPEED = 60.0  # a simulated hour per wall minute
DEFAULT_SCRAPE_S = 0.5  # 4 scrapes in the 2-minute latency window at speed 60
HPA_SYNC_S = 15.0  # the controller's --horizontal-pod-autoscaler-sync-period default (simulated seconds)
SAMPLE_EVERY_S = 1.0  # wall seconds between timeline samples
DEMO_JOB = "llm-demo-fleet"
ADAPTER_JOB = "llm-hpa-adapter"


class DemoError(RuntimeError):
    """The demo could not bring one of its parts up (the message says which and why)."""


@dataclass(frozen=True)
class DemoOptions:
    """Everything the demo can be told; defaults are what ``adapter demo`` runs with."""

    pods: int = 4
    speed: float = DEFAULT_SPEED
    port: int = 0  # the adapter's port; 0 picks a free one
    exporter_port: int = 0
    duration: float | None = None  # seconds; None runs until interrupted
    scrape_interval_s: float = DEFAULT_SCRAPE_S
    namespace: str = "llm-demo"
    deployment: str = "llama-3-8b"
    load: float = 1.0  # trace peak as a multiple of the fleet's capacity
    start_hour: float = 6.0  # simulated time of day at which the demo starts (on the first day with history)
    trace_path: Path | None = None  # None: the vendored ServeGen trace
    exported_layout_node: str | None = None  # emit this node's DCGM series with exported_pod labels
    status_every_s: float = 5.0
    autoscale: bool = False  # run the HPA model against the adapter so replicas follow the load
    plot_path: Path | None = None  # None: a timestamped PNG in the system's temporary directory
    json_path: Path | None = None  # also write the timeline as JSON here
    backfill: bool = True  # write the forecaster's history into Prometheus before it starts
    ready_timeout_s: float = 60.0
    seed: int = 0
    profile: str = "llama3-8b-h100"  # the token-level vLLM engine of every pod (adapter.sim.profiles)

    def __post_init__(self) -> None:
        if self.pods < 1:
            raise ValueError("--pods must be at least 1")
        if not self.speed > 0:
            raise ValueError("--speed must be positive")
        if not 0.1 <= self.scrape_interval_s <= 5.0:
            raise ValueError("--scrape-interval must be between 0.1 and 5 seconds")
        if self.duration is not None and self.duration < 0:
            raise ValueError("--duration must not be negative")
        if not 0 <= self.start_hour < 24:
            raise ValueError("--start-hour must be in [0, 24)")


def first_start_s(start_hour: float, history_s: float) -> float:
    """Simulated start: ``start_hour`` on the first trace day with ``history_s`` of trace before it."""
    day = max(0, math.ceil((history_s - start_hour * 3600.0) / 86400.0))
    return day * 86400.0 + start_hour * 3600.0


def demo_catalog(doc: dict[str, Any], options: DemoOptions) -> dict[str, Any]:
    """The embedded catalog on the demo's clock (``scaled_catalog``), forecasting the demo's Deployment from
    the start (``forecast.workloads``) rather than from the first request."""
    out = scaled_catalog(doc, options.speed, options.scrape_interval_s)
    forecast = out.get("forecast")
    if isinstance(forecast, dict):
        workloads = list(forecast.get("workloads") or [])
        workloads.append({"namespace": options.namespace, "deployment": options.deployment})
        forecast["workloads"] = workloads
    return out


def engine_label(options: DemoOptions) -> str:
    """The engine the fleet runs, as the banner prints it."""
    return f"token engine {options.profile}, mix {DEFAULT_MIX}"


def build_fleet(options: DemoOptions, now: float) -> tuple[TokenPods, float, float]:
    """The demo's fleet at ``now``, its pods' saturation (requests/s a pod completes at most) and the per-pod
    load the trace's peak puts on ``options.pods`` pods at ``--load 1``: the knee of the default mix (every SLO
    bound holds at P99)."""
    engine = demo_engine(options.profile)
    dep = Deployment(name=options.deployment, namespace=options.namespace, model_name=engine.profile.model_name)
    config = engine.fleet_config(
        deployment=dep, load_delay_s=FleetConfig.load_delay_s, drain_timeout_s=FleetConfig.drain_timeout_s,
        seed=options.seed,
    )  # fmt: skip
    return TokenPods(engine, config, replicas=options.pods, now=now), config.capacity_rps, engine.knee()


def demo_engine(profile_name: str) -> TokenEngine:
    """The token-level engine of the demo: ``profile_name``, the default mix and the default SLO bounds."""
    from adapter.sim.profiles import profile
    from adapter.sim.slo import parse_slo

    return TokenEngine(profile(profile_name), mix(DEFAULT_MIX), parse_slo(DEFAULT_SLO))


def _wait_for_series(prom_url: str, namespace: str, timeout: float) -> None:
    """Wait until Prometheus holds the fleet's kube_pod_labels (the first scrape can take a moment)."""
    query = f'kube_pod_labels{{namespace="{namespace}"}}'
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=2.0, trust_env=False) as client:
        while time.monotonic() < deadline:
            try:
                body = client.get(f"{prom_url}/api/v1/query", params={"query": query}).json()
                if body.get("data", {}).get("result"):
                    return
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.1)
    raise DemoError(f"Prometheus at {prom_url} has not scraped the fleet after {timeout:g}s")


@contextlib.contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """Turn SIGTERM into SystemExit while the demo runs (main thread only), so cleanup still happens."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def default_plot_path() -> Path:
    """Where the PNG goes unless ``--plot`` says otherwise: the temp dir, named by the local start time."""
    return Path(tempfile.gettempdir()) / time.strftime("llm-hpa-demo-%Y%m%d-%H%M%S.png")


def run_demo(options: DemoOptions, *, out: TextIO = sys.stdout) -> int:
    """Run the demo until interrupted or ``options.duration`` elapses; 0 on a clean run, 1 on failure.

    Every child (exporter threads, Prometheus, the adapter) is stopped before returning, also on error. The
    PNG is written after a clean stop (duration or Ctrl-C) and its path printed.
    """
    from adapter.catalog import parse_catalog
    from adapter.demo.backfill import BackfillError, history_span_s, load_history, write_blocks
    from adapter.sim.simulate import SimulationError

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    timeline = Timeline(speed=options.speed, autoscale=options.autoscale)
    bounds = demo_engine(options.profile).slo
    timeline.slo_ttft_s, timeline.slo_itl_s = bounds.ttft_s, bounds.itl_s
    clean = False
    with _sigterm_as_exit(), contextlib.ExitStack() as stack:
        try:
            trace_path = options.trace_path or default_trace_path()
            try:
                trace = load_trace(trace_path)
            except (OSError, ValueError) as exc:  # pandas' parser errors are ValueErrors
                raise DemoError(f"cannot read the trace {trace_path}: {exc}") from None
            doc = catalog_document(None)
            forecast = parse_catalog(doc).forecast
            try:
                served_doc = demo_catalog(doc, options)
            except SimulationError as exc:
                raise DemoError(str(exc)) from None
            history_s = history_span_s(forecast) if forecast is not None else 0.0
            # Days are counted from the trace's first window (ServeGen's starts at 0, 00:00 of day 0).
            sim_start = trace.start_s + first_start_s(options.start_hour, history_s)
            fleet, capacity_rps, per_pod_rps = build_fleet(options, sim_start)
            scaled = ScaledTrace.for_fleet(trace, replicas=options.pods, capacity_rps=per_pod_rps, load=options.load)
            timeline.trace_peak_rps = scaled.peak_rps
            # One compressed clock for everything: sim = sim_start + (monotonic - wall0) * speed. It starts
            # now, when the history ends, so history and live scrapes meet without a gap.
            wall0, unix0 = time.monotonic(), time.time()
            clock = TraceClock(wall_start=wall0, speed=options.speed, sim_start=sim_start)

            def sim_now() -> float:
                return clock.sim_time(time.monotonic())

            # The runner's time base is the simulated clock: the trace and the physics both run at ``speed``.
            exported = [options.exported_layout_node] if options.exported_layout_node else []
            runner = FleetRunner(
                fleet, scaled, TraceClock(wall_start=sim_start, speed=1.0, sim_start=sim_start),
                tick_s=0.1, exported_nodes=exported, monotonic=sim_now,
            )  # fmt: skip
            stack.callback(runner.stop)
            exporter = MetricsExporter(runner, port=options.exporter_port)
            exporter.start()
            stack.callback(exporter.stop)
            interval = f"{max(1, round(options.scrape_interval_s * 1000))}ms"
            prom = scraping_prometheus(exporter.target, job=DEMO_JOB, interval=interval)
            stack.callback(prom.close)
            # Prometheus also scrapes the adapter's own /metrics (composite, boost, forecast per workload), as
            # in a cluster, so every panel of the Grafana dashboard has data against the demo's Prometheus.
            adapter_port = options.port or free_port()
            prom.scrape_configs.append({
                "job_name": ADAPTER_JOB, "honor_labels": True, "scrape_interval": interval,
                "scrape_timeout": interval, "static_configs": [{"targets": [f"127.0.0.1:{adapter_port}"]}],
            })  # fmt: skip
            if options.backfill and forecast is not None:
                started = time.monotonic()
                history = load_history(
                    fleet.snapshot(), scaled, sim_end=sim_start, span_s=history_s,
                    interval_s=options.scrape_interval_s * options.speed, speed=options.speed,
                    wall_end=unix0, capacity_rps=capacity_rps,
                    target_labels=(("instance", exporter.target), ("job", DEMO_JOB)),
                )  # fmt: skip
                write_blocks(history, prom.prepare())
                say(
                    f"backfilled     {history_s / 3600:.1f} simulated hours of load "
                    f"({history_s / options.speed:.0f} s on the demo clock) in {time.monotonic() - started:.1f}s"
                )
            runner.start()
            prom.start()
            say(
                f"fleet exporter  {exporter.url}/metrics  "
                f"({options.pods} pods x {fleet.config.gpus_per_pod} GPUs, {engine_label(options)}, "
                f"deployment {options.namespace}/{options.deployment}, trace x{options.speed:g})"
            )
            say(f"prometheus      {prom.url}  (scrapes the fleet and the adapter every {interval}, honor_labels: true)")
            _wait_for_series(prom.url, options.namespace, timeout=30.0)

            logdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-hpa-demo-")))
            catalog_path = logdir / "catalog.yaml"
            catalog_path.write_text(yaml.safe_dump(served_doc, sort_keys=False), encoding="utf-8")
            # The adapter's own clocks, compressed like everything else (defaults 10 s and 5 s).
            adapter = AdapterProcess(prom.url, logdir, port=adapter_port, extra_args=[
                "--config", str(catalog_path),
                "--pod-cache-ttl", f"{10.0 / options.speed:g}",
                "--forecast-tick", f"{5.0 / options.speed:g}"])  # fmt: skip
            stack.callback(adapter.stop)
            adapter.start(options.ready_timeout_s)
            server = adapter.url
            say(f"adapter         {server}  (log: {adapter.log_path})")
            say()
            say("Ready. Try:")
            for path in metric_paths(options.namespace, options.deployment):
                say("  " + kubectl_command(server, path))
            say()
            say(
                f"The demo runs on a x{options.speed:g} clock (the adapter's windows too): llm_load_forecast is in "
                f"requests per wall second, x{options.speed:g} the simulated rate the status line shows."
            )
            client = stack.enter_context(httpx.Client(base_url=server, timeout=5.0, trust_env=False))
            autoscaler = None
            if options.autoscale:
                from adapter.sim.policies import design_hpa

                spec = design_hpa(
                    namespace=options.namespace,
                    deployment=options.deployment,
                    max_replicas=max(8, 4 * options.pods),
                )
                autoscaler = Autoscaler(spec, runner, client, options.namespace, f"app={options.deployment}")
                timeline.max_replicas = spec.max_replicas
                say(
                    f"Autoscaling: the HPA model reads {spec.metrics[0].name} from the adapter every "
                    f"{HPA_SYNC_S:g} simulated s (target 1, {spec.min_replicas}-{spec.max_replicas} replicas, "
                    "the design's behavior)."
                )
            say("Ctrl-C stops everything." if options.duration is None else f"Running for {options.duration:g}s.")

            deadline = None if options.duration is None else time.monotonic() + options.duration
            next_status = next_sample = time.monotonic()
            next_sync = sim_now()
            view = AdapterView()
            while deadline is None or time.monotonic() < deadline:
                adapter.check_alive()
                if autoscaler is not None and sim_now() >= next_sync:
                    record, _ = autoscaler.sync(next_sync)
                    runner.set_hpa_status(HpaStatus(
                        namespace=options.namespace, name=options.deployment,
                        min_replicas=autoscaler.spec.min_replicas, max_replicas=autoscaler.spec.max_replicas,
                        current_replicas=record.status_replicas, desired_replicas=record.desired,
                    ))  # fmt: skip
                    next_sync = max(next_sync + HPA_SYNC_S, sim_now())
                if time.monotonic() >= next_sample:
                    view = read_view(client, options.namespace, options.deployment, options.speed)
                    status = runner.status()
                    timeline.add(Sample(
                        sim_time_s=status.sim_time_s, arrivals_rps=status.rate.rate, desired=status.desired,
                        ready=status.ready, composite=view.composite,
                        boost=view.boost, boosted=view.boosted, forecast_rps=view.forecast_rps,
                        ttft_p99_s=status.ttft_p99_s, itl_p99_s=status.itl_p99_s,
                    ))  # fmt: skip
                    next_sample += SAMPLE_EVERY_S
                if time.monotonic() >= next_status:
                    say(status_line(runner.status(), view))
                    next_status += options.status_every_s
                time.sleep(0.02)
            clean = True
        except KeyboardInterrupt:
            say("\nstopping ...")
            clean = True
        except (DemoError, DevServerError, BackfillError) as exc:
            say(f"demo failed: {exc}")
            return 1
    if clean and len(timeline.samples) < 2:
        say("no plot: the demo stopped before it had two samples")
    elif clean:
        plot = options.plot_path or default_plot_path()
        try:
            timeline.write_png(plot)
        except (OSError, ValueError) as exc:
            say(f"could not write the plot: {exc}")
            return 1
        say(f"plot written: {plot}")
    if clean and options.json_path is not None:
        try:
            timeline.write_json(options.json_path)
        except OSError as exc:
            say(f"could not write the timeline: {exc}")
            return 1
        say(f"timeline written: {options.json_path}")
    return 0
