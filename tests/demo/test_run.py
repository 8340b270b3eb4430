"""The demo command's pure parts: options validation, suggested paths, the status line, CLI wiring."""

from __future__ import annotations

import math

import pytest

from adapter.__main__ import build_parser
from adapter.demo.exporter import RunnerStatus
from adapter.demo.run import DemoOptions, kubectl_command, metric_paths, status_line
from adapter.sim.trace import RateSample, RateStatus


def test_metric_paths_cover_discovery_pods_and_the_deployment() -> None:
    paths = metric_paths("llm-demo", "llama-3-8b")
    api = "/apis/custom.metrics.k8s.io/v1beta2"
    selector = "?labelSelector=app%3Dllama-3-8b"
    assert paths == [
        api,
        f"{api}/namespaces/llm-demo/pods/*/llm_composite_load{selector}",
        f"{api}/namespaces/llm-demo/pods/*/gpu_utilization_p90{selector}",
        f"{api}/namespaces/llm-demo/pods/*/inference_queue_depth{selector}",
        f"{api}/namespaces/llm-demo/deployments.apps/llama-3-8b/llm_composite_load",
    ]
    assert kubectl_command("http://127.0.0.1:9", paths[0]) == (
        "kubectl --server=http://127.0.0.1:9 get --raw '/apis/custom.metrics.k8s.io/v1beta2'"
    )


def test_status_line_says_when_the_rate_is_held() -> None:
    status = RunnerStatus(
        sim_time_s=86400 + 6 * 3600 + 300,
        rate=RateSample(sim_time_s=0.0, rate=12.34, status=RateStatus.GAP, raw=math.nan, window=3),
        desired=4, ready=3, loading=1, terminating=0,
        waiting=7.4, running=30.2, worst_p99_s=6.25, dropped=0.0,
    )  # fmt: skip
    line = status_line(status)
    assert line.startswith("[day 1 06:05] arrivals   12.3 req/s (held: gap) | replicas 4 (ready 3, loading 1")
    assert line.endswith("waiting 7 running 30 | worst P99 6.2s")


def test_bad_options_are_rejected() -> None:
    with pytest.raises(ValueError, match="--pods"):
        DemoOptions(pods=0)
    with pytest.raises(ValueError, match="--scrape-interval"):
        DemoOptions(scrape_interval_s=15.0)
    with pytest.raises(ValueError, match="--speed"):
        DemoOptions(speed=0.0)


def test_cli_registers_demo_with_its_flags() -> None:
    args = build_parser().parse_args(["demo", "--pods", "6", "--gpus-per-pod", "8", "--duration", "5"])
    assert args.func.__module__ == "adapter.cli.demo"
    assert (args.pods, args.gpus_per_pod, args.duration, args.speed) == (6, 8, 5.0, None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["demo", "--gpus-per-pod", "3"])
