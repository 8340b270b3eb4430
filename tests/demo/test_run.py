"""The demo command's pure parts: options validation, suggested paths, the status line, CLI wiring."""

from __future__ import annotations

import io
import math
from pathlib import Path

import pytest

from adapter.__main__ import build_parser
from adapter.catalog import parse_catalog
from adapter.demo.catalogs import catalog_document
from adapter.demo.run import DemoOptions, demo_catalog, first_start_s, run_demo
from adapter.demo.runner import RunnerStatus
from adapter.demo.timeline import Sample, Timeline
from adapter.demo.view import AdapterView, kubectl_command, metric_paths, status_line
from adapter.sim.simulate import SimulationError
from adapter.sim.trace import RateSample, RateStatus


def test_metric_paths_cover_discovery_pods_and_the_deployment() -> None:
    paths = metric_paths("llm-demo", "llama-3-8b")
    api = "/apis/custom.metrics.k8s.io/v1beta2"
    selector = "?labelSelector=app%3Dllama-3-8b"
    dep = f"{api}/namespaces/llm-demo/deployments.apps/llama-3-8b"
    assert paths == [
        api,
        f"{api}/namespaces/llm-demo/pods/*/llm_composite_load{selector}",
        f"{api}/namespaces/llm-demo/pods/*/llm_composite_load_boosted{selector}",
        f"{api}/namespaces/llm-demo/pods/*/gpu_utilization_p90{selector}",
        f"{api}/namespaces/llm-demo/pods/*/inference_queue_depth{selector}",
        f"{dep}/llm_composite_load",
        f"{dep}/llm_load_forecast",
        f"{dep}/llm_load_boost",
        f"{dep}/llm_composite_load_boosted",
    ]
    assert kubectl_command("http://127.0.0.1:9", paths[0]) == (
        "kubectl --server=http://127.0.0.1:9 get --raw '/apis/custom.metrics.k8s.io/v1beta2'"
    )


STATUS = RunnerStatus(
    sim_time_s=86400 + 6 * 3600 + 300,
    rate=RateSample(sim_time_s=0.0, rate=12.34, status=RateStatus.GAP, raw=math.nan, window=3),
    desired=4, ready=3, loading=1, terminating=0,
    waiting=7.4, running=30.2, dropped=0.0, ttft_p99_s=2.5, itl_p99_s=0.0625,
)  # fmt: skip


def test_status_line_says_when_the_rate_is_held() -> None:
    line = status_line(STATUS)
    assert line.startswith("[day 1 06:05] arrivals   12.3 req/s (held: gap) | replicas 4 (ready 3, loading 1")
    assert line.endswith("waiting 7 running 30 | worst TTFT P99 2.50s, ITL P99 62ms")


def test_status_line_shows_the_forecast_and_boost_next_to_the_live_composite() -> None:
    view = AdapterView(composite=0.62, boost=1.618, boosted=0.756, forecast_rps=17.94)
    line = status_line(STATUS, view)
    assert line.endswith("| composite 0.62, boost 1.62: boosted 0.76 | forecast 17.9 req/s")
    pending = status_line(STATUS, AdapterView(composite=0.5, boost=1.0, boosted=0.5,
                                              forecast_reason="insufficient_history"))  # fmt: skip
    assert pending.endswith("| composite 0.50, boost 1.00: boosted 0.50 | forecast - (insufficient_history)")
    assert status_line(STATUS, AdapterView()).endswith("| composite -, boost -: boosted - | forecast - (no answer)")


def test_the_demo_starts_on_the_first_day_with_the_forecasters_history_before_it() -> None:
    assert first_start_s(6.0, 10 * 3600.0) == 86400 + 6 * 3600  # 10 h do not fit before 06:00 on day 0
    assert first_start_s(12.0, 10 * 3600.0) == 12 * 3600
    assert first_start_s(6.0, 30 * 3600.0) == 86400 + 6 * 3600  # exactly 30 h before it
    assert first_start_s(6.0, 31 * 3600.0) == 2 * 86400 + 6 * 3600


def test_demo_catalog_runs_on_the_demo_clock_and_forecasts_the_deployment() -> None:
    doc = catalog_document(None)
    options = DemoOptions(speed=60.0, scrape_interval_s=0.5, namespace="ns", deployment="dep")
    served = parse_catalog(demo_catalog(doc, options))
    original = parse_catalog(doc)
    assert served.forecast is not None and original.forecast is not None
    assert served.forecast.step_s == pytest.approx(original.forecast.step_s / 60.0)
    assert ("ns", "dep") in served.forecast.workloads
    latency = served.metrics["inference_latency_p99_seconds"].window_seconds
    assert latency is not None and latency < 60  # 2 min / 60 in whole seconds
    # A speed whose windows would hold fewer than four scrapes is refused with the way out in the message.
    with pytest.raises(SimulationError, match="lower --speed or --scrape-interval"):
        demo_catalog(doc, DemoOptions(speed=288.0, scrape_interval_s=0.5))


def test_timeline_writes_a_png_and_refuses_an_empty_run(tmp_path: Path) -> None:
    timeline = Timeline(speed=60.0, autoscale=True, slo_ttft_s=2.0, slo_itl_s=0.1)
    with pytest.raises(ValueError, match="two samples"):
        timeline.write_png(tmp_path / "none.png")
    for i in range(5):
        timeline.add(Sample(sim_time_s=86400 + 60.0 * i, arrivals_rps=10.0 + i, desired=3 + i % 2, ready=3,
                            composite=0.6, boost=1.2 if i else math.nan, boosted=0.72, ttft_p99_s=0.3,
                            itl_p99_s=0.05))  # fmt: skip
    out = timeline.write_png(tmp_path / "sub" / "run.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="--pods"):
        DemoOptions(pods=0)
    with pytest.raises(ValueError, match="--scrape-interval"):
        DemoOptions(scrape_interval_s=15.0)
    with pytest.raises(ValueError, match="--start-hour"):
        DemoOptions(start_hour=24.0)
    with pytest.raises(ValueError, match="--speed"):
        DemoOptions(speed=0.0)


def test_cli_registers_demo_with_its_flags() -> None:
    args = build_parser().parse_args(["demo", "--pods", "6", "--profile", "llama3-70b-h100-tp4", "--duration", "5"])
    assert args.func.__module__ == "adapter.cli.demo"
    assert (args.pods, args.profile, args.duration, args.speed) == (6, "llama3-70b-h100-tp4", 5.0, None)
    with pytest.raises(SystemExit):  # the pods are token-level engines: their GPUs come from the profile
        build_parser().parse_args(["demo", "--gpus-per-pod", "3"])


def test_cli_demo_flags_for_the_closed_loop_the_plot_and_the_backfill() -> None:
    args = build_parser().parse_args(["demo", "--autoscale", "--plot", "/tmp/x.png", "--no-backfill"])
    assert (args.autoscale, args.plot, args.backfill) == (True, Path("/tmp/x.png"), False)
    defaults = build_parser().parse_args(["demo"])
    assert (defaults.autoscale, defaults.plot, defaults.backfill, defaults.scrape_interval) == (False, None, True, None)


def test_run_demo_refuses_a_bad_trace_and_a_speed_its_windows_cannot_follow(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n")
    out = io.StringIO()
    assert run_demo(DemoOptions(trace_path=bad), out=out) == 1
    assert out.getvalue().startswith(f"demo failed: cannot read the trace {bad}")
    out = io.StringIO()
    assert run_demo(DemoOptions(speed=288.0), out=out) == 1
    assert "under four scrapes of 0.5 s: lower --speed or --scrape-interval" in out.getvalue()
