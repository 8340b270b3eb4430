"""The demo's history: OpenMetrics text of the fleet's load, loaded by the real promtool into a real Prometheus."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest

from adapter.catalog import parse_catalog
from adapter.demo.backfill import BackfillError, history_span_s, load_history, write_blocks
from adapter.demo.catalogs import catalog_document
from adapter.demo.servers import PrometheusProcess
from adapter.demo.tokenpods import TokenPods
from adapter.sim.config import Deployment
from adapter.sim.forecasting import history_points
from adapter.sim.trace import RateTrace, ScaledTrace
from tests.support.sim import ENGINE, PHYSICS

DEP = Deployment(name="llama-3-8b", namespace="llm-demo")
SPEED = 60.0


def _trace() -> ScaledTrace:
    # 10-minute windows at 10, 20, 30, ... req/s (peak 80): easy to check a rate against.
    rates = np.arange(1.0, 9.0) * 10.0
    return ScaledTrace(RateTrace(step_s=600.0, rates=rates, suspect=np.zeros(rates.size, dtype=bool)), peak_rps=80.0)


def _fleet(pods: int = 2) -> TokenPods:
    return TokenPods(ENGINE, replace(PHYSICS, deployment=DEP), replicas=pods, now=4800.0)


def test_history_span_covers_the_forecasters_lookback_and_one_window() -> None:
    forecast = parse_catalog(catalog_document(None)).forecast
    assert forecast is not None
    span = history_span_s(forecast)
    assert history_points(forecast) == forecast.history_points  # the default model looks back that far
    assert span >= forecast.history_points * forecast.step_s + (forecast.load.window_seconds or 0)


def test_load_history_is_the_trace_split_over_pods_as_monotone_counters_on_the_compressed_clock() -> None:
    text = load_history(_fleet().snapshot(), _trace(), sim_end=4800.0, span_s=3600.0, interval_s=60.0,
                        speed=SPEED, wall_end=1_000_000.0, capacity_rps=100.0,
                        target_labels=(("instance", "127.0.0.1:1"), ("job", "demo")))  # fmt: skip
    lines = text.splitlines()
    assert lines[-1] == "# EOF"
    stop = [ln for ln in lines if 'finished_reason="stop"' in ln]
    pods = {ln.split('pod="')[1].split('"')[0] for ln in stop}
    assert len(pods) == 2 and all(p.startswith("llama-3-8b-") for p in pods)
    first = sorted(pods)[0]
    one = [ln for ln in stop if f'pod="{first}"' in ln]
    assert 'instance="127.0.0.1:1"' in one[0] and 'job="demo"' in one[0]
    values = [float(ln.split()[1]) for ln in one]
    stamps = [float(ln.split()[2]) for ln in one]
    assert values == sorted(values) and values[0] == 0
    assert stamps[-1] == pytest.approx(1_000_000.0)  # the history ends where the live clock starts
    assert np.diff(stamps) == pytest.approx(60.0 / SPEED)  # a simulated minute lasts a wall second
    # Simulated 1200-4800 s cover windows 2..7 (30..80 req/s); each of the 2 pods gets half.
    assert values[-1] == pytest.approx(sum(600 * r / 2 for r in (30, 40, 50, 60, 70, 80)), abs=1)
    # The other finished reasons exist and stay 0, as on a real vLLM server.
    assert all(ln.split()[1] == "0" for ln in lines if 'finished_reason="abort"' in ln)


def test_load_history_caps_each_pod_at_its_capacity() -> None:
    text = load_history(_fleet(pods=1).snapshot(), _trace(), sim_end=4800.0, span_s=600.0, interval_s=60.0,
                        speed=SPEED, wall_end=0.0, capacity_rps=25.0)  # fmt: skip
    last = [ln for ln in text.splitlines() if 'finished_reason="stop"' in ln][-1]
    assert float(last.split()[1]) == pytest.approx(600 * 25.0, abs=1)  # 80 req/s offered, 25 served


@pytest.mark.binary("prometheus", "promtool")
def test_promtool_blocks_are_served_by_a_real_prometheus_as_the_trace_rate() -> None:
    now = time.time()
    text = load_history(_fleet().snapshot(), _trace(), sim_end=4800.0, span_s=3600.0, interval_s=30.0,
                        speed=SPEED, wall_end=now, capacity_rps=100.0)  # fmt: skip
    prom = PrometheusProcess()
    try:
        write_blocks(text, prom.prepare())
        prom.start()
        # Wall time now - 10 s is simulated 4200 s: window 7 (70 req/s) over the last 5 wall seconds.
        query = 'sum(rate(vllm:request_success_total{namespace="llm-demo",finished_reason="stop"}[5s]))'
        body = httpx.get(f"{prom.url}/api/v1/query", params={"query": query, "time": now - 10.0},
                         timeout=10.0, trust_env=False).json()  # fmt: skip
        (result,) = body["data"]["result"]
        # rate() reads requests per wall second: the simulated 70 req/s, x SPEED (whole-request floors aside).
        assert float(result["value"][1]) / SPEED == pytest.approx(70.0, rel=0.02)
    finally:
        prom.close()


@pytest.mark.binary("promtool")
def test_write_blocks_reports_promtool_failures(tmp_path: Path) -> None:
    with pytest.raises(BackfillError, match="create-blocks-from openmetrics failed"):
        write_blocks("this is not openmetrics\n", tmp_path)
