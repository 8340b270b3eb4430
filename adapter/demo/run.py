"""``demo``: a simulated GPU/vLLM fleet, a real Prometheus scraping it, and the adapter serving from it.

Everything runs on 127.0.0.1 and is torn down on exit (Ctrl-C, SIGTERM, ``--duration`` or an error):

1. the fleet model (``adapter.sim``) driven by the real ServeGen trace, compressed by ``speed``;
2. its /metrics exporter (dcgm-exporter, vLLM and kube-state-metrics shaped series);
3. a throwaway Prometheus scraping it with ``honor_labels: true``;
4. ``python -m adapter serve`` against that Prometheus, pods from kube-state-metrics series.

Then it prints ready-to-paste ``kubectl get --raw`` commands and a live status line.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TextIO
from urllib.parse import quote

import httpx

from adapter.demo.exporter import FleetRunner, MetricsExporter, RunnerStatus
from adapter.sim.fleet import Deployment, Fleet, FleetConfig
from adapter.sim.trace import (
    RateTrace,
    ScaledTrace,
    TraceClock,
    default_trace_path,
    format_sim_time,
    load_trace,
    synthetic_trace,
)

API_PREFIX = "/apis/custom.metrics.k8s.io/v1beta2"
POD_METRICS = ("llm_composite_load", "gpu_utilization_p90", "inference_queue_depth")
OBJECT_METRIC = "llm_composite_load"
DEFAULT_SPEED = 288.0  # a simulated day in 5 wall minutes


class DemoError(RuntimeError):
    """The demo could not bring one of its parts up (the message says which and why)."""


@dataclass(frozen=True)
class DemoOptions:
    """Everything the demo can be told; defaults are what ``adapter demo`` runs with."""

    pods: int = 4
    gpus_per_pod: int = 2
    speed: float = DEFAULT_SPEED
    port: int = 0  # the adapter's port; 0 picks a free one
    exporter_port: int = 0
    duration: float | None = None  # seconds; None runs until interrupted
    scrape_interval_s: float = 2.0
    namespace: str = "llm-demo"
    deployment: str = "llama-3-8b"
    capacity_rps: float = 10.0
    load: float = 1.0  # trace peak as a multiple of the fleet's capacity
    start_hour: float = 6.0  # simulated time of day (day 0) at which the demo starts
    trace_path: Path | None = None  # None: the shared ServeGen trace, or a synthetic one if absent
    exported_layout_node: str | None = None  # emit this node's DCGM series with exported_pod labels
    status_every_s: float = 5.0
    autoscale: bool = False  # run the HPA model against the adapter so replicas follow the load
    ready_timeout_s: float = 60.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.pods < 1:
            raise ValueError("--pods must be at least 1")
        if not self.speed > 0:
            raise ValueError("--speed must be positive")
        if not 2.0 <= self.scrape_interval_s <= 5.0:
            raise ValueError("--scrape-interval must be between 2 and 5 seconds")
        if self.duration is not None and self.duration < 0:
            raise ValueError("--duration must not be negative")


def metric_paths(namespace: str, deployment: str) -> list[str]:
    """API paths the demo suggests: discovery, pod metrics by ``app=<deployment>``, one Deployment metric."""
    selector = quote(f"app={deployment}", safe="")
    paths = [API_PREFIX]
    paths += [f"{API_PREFIX}/namespaces/{namespace}/pods/*/{m}?labelSelector={selector}" for m in POD_METRICS]
    paths.append(f"{API_PREFIX}/namespaces/{namespace}/deployments.apps/{deployment}/{OBJECT_METRIC}")
    return paths


def kubectl_command(server: str, path: str) -> str:
    """A ready-to-paste ``kubectl get --raw`` against a plain-HTTP adapter."""
    return f"kubectl --server={server} get --raw '{path}'"


def status_line(status: RunnerStatus) -> str:
    """One line: simulated time, arrival rate (and whether it is held over a gap), replicas, queue, P99."""
    rate = f"{status.rate.rate:6.1f} req/s"
    if status.rate.held:
        rate += f" (held: {status.rate.status.value})"
    return (
        f"[{format_sim_time(status.sim_time_s)}] arrivals {rate} | replicas {status.desired} "
        f"(ready {status.ready}, loading {status.loading}, terminating {status.terminating}) | "
        f"waiting {status.waiting:.0f} running {status.running:.0f} | worst P99 {status.worst_p99_s:.1f}s"
    )


def _load_trace(options: DemoOptions, out: TextIO) -> RateTrace:
    path = options.trace_path or default_trace_path()
    if path is None:
        print("note: shared ServeGen trace not found; playing a synthetic diurnal trace", file=out)
        return synthetic_trace()
    return load_trace(path)


def _wait_for_series(prom_url: str, namespace: str, timeout: float) -> None:
    """Wait until Prometheus holds the fleet's kube_pod_labels (the first scrape can take ~5 s)."""
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
            time.sleep(0.25)
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


def run_demo(options: DemoOptions, *, out: TextIO = sys.stdout) -> int:
    """Run the demo until interrupted or ``options.duration`` elapses; 0 on a clean run, 1 on failure.

    Every child (exporter threads, Prometheus, the adapter) is stopped before returning, also on error.
    """
    from adapter.devservers import AdapterProcess, DevServerError, scraping_prometheus

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    with _sigterm_as_exit(), contextlib.ExitStack() as stack:
        try:
            trace = _load_trace(options, out)
            config = FleetConfig(
                deployment=Deployment(name=options.deployment, namespace=options.namespace),
                gpus_per_pod=options.gpus_per_pod,
                capacity_rps=options.capacity_rps,
                # Short chat completions, so the P99 sits near the catalog's 0.8 s target at full load and
                # the demo's composite reads around 1 at the trace's peak (long generations would need a
                # larger latency target in the catalog).
                base_service_s=0.25,
                substep_s=0.25,
                seed=options.seed,
            )
            fleet = Fleet(config, replicas=options.pods)
            scaled = ScaledTrace.for_fleet(
                trace, replicas=options.pods, capacity_rps=options.capacity_rps, load=options.load
            )
            clock = TraceClock(
                wall_start=time.monotonic(), speed=options.speed, sim_start=options.start_hour * 3600.0
            )
            exported = [options.exported_layout_node] if options.exported_layout_node else []
            runner = FleetRunner(fleet, scaled, clock, exported_nodes=exported)
            runner.start()
            stack.callback(runner.stop)
            exporter = MetricsExporter(runner, port=options.exporter_port)
            exporter.start()
            stack.callback(exporter.stop)

            interval = f"{options.scrape_interval_s:g}s"
            prom = scraping_prometheus(exporter.target, job="llm-demo-fleet", interval=interval)
            stack.callback(prom.close)
            prom.start()
            say(
                f"fleet exporter  {exporter.url}/metrics  "
                f"({options.pods} pods x {options.gpus_per_pod} GPUs, "
                f"deployment {options.namespace}/{options.deployment}, trace x{options.speed:g})"
            )
            say(f"prometheus      {prom.url}  (scrapes every {interval}, honor_labels: true)")
            _wait_for_series(prom.url, options.namespace, timeout=30.0)

            logdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="llm-hpa-demo-")))
            adapter = AdapterProcess(prom.url, logdir, port=options.port)
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
                "Ctrl-C stops everything."
                if options.duration is None
                else f"Running for {options.duration:g}s."
            )

            autoscaler = None
            if options.autoscale:
                from adapter.sim.live import Autoscaler
                from adapter.sim.policies import design_hpa

                spec = design_hpa(
                    namespace=options.namespace,
                    deployment=options.deployment,
                    max_replicas=max(8, 4 * options.pods),
                )
                client = stack.enter_context(httpx.Client(base_url=server, timeout=5.0, trust_env=False))
                autoscaler = Autoscaler(spec, runner, client, options.namespace, f"app={options.deployment}")
                say(
                    f"Autoscaling: the HPA model reads {spec.metrics[0].name} from the adapter every 15 s "
                    f"(target 1, {spec.min_replicas}-{spec.max_replicas} replicas, the design's behavior)."
                )
            deadline = None if options.duration is None else time.monotonic() + options.duration
            next_status = time.monotonic()
            next_sync = time.monotonic()
            while deadline is None or time.monotonic() < deadline:
                adapter.check_alive()
                if autoscaler is not None and time.monotonic() >= next_sync:
                    # The fleet's physics runs in wall seconds, so the controller's clock is the wall clock.
                    autoscaler.sync(time.monotonic())
                    next_sync += 15.0
                if time.monotonic() >= next_status:
                    say(status_line(runner.status()))
                    next_status += options.status_every_s
                time.sleep(0.1)
            return 0
        except KeyboardInterrupt:
            say("\nstopping ...")
            return 0
        except (DemoError, DevServerError) as exc:
            say(f"demo failed: {exc}")
            return 1
