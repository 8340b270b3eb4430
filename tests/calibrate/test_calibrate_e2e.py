"""``python -m adapter calibrate --slo-p99`` (one e2e bound on one histogram) against a real Prometheus scraping a
simulated fleet whose knee is known.

Two token-level vLLM pods (``adapter.demo.tokenpods.TokenPods`` on the compressed clock of
``tests/support/compressed_pods.py``, served by the demo exporter) climb a load staircase through the knee of an
e2e P99 bound of 30 s (a bucket bound of vLLM's e2e histogram, so the share of slow requests is read exactly from
``le="30.0"``). The knee is the engine's own (``TokenEngine.knee()`` for that bound, computed from the engine's
physics, which calibrate never sees); calibrate reads it from the scraped series, through the catalog's queries.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from adapter.__main__ import main
from adapter.demo.exporter import MetricsExporter
from adapter.demo.runner import FleetRunner
from adapter.demo.servers import scraping_prometheus
from adapter.sim.config import Deployment
from adapter.sim.slo import parse_slo
from adapter.sim.tokenfleet import TokenEngine
from adapter.sim.trace import RateTrace, ScaledTrace, TraceClock
from tests.support.compressed_pods import CompressedPods
from tests.support.sim import ENGINE

SLO_S = 30.0  # a bucket bound of vllm:e2e_request_latency_seconds
E2E_ENGINE = TokenEngine(ENGINE.profile, ENGINE.mix, parse_slo(f"e2e={SLO_S:g}s"))
PODS = 2
SCRAPED_KNEE_RPS = 80.0  # the compressed clock puts the knee here (see tests/calibrate/test_calibrate_tokens_e2e.py)
LEVELS = np.linspace(0.6, 1.2, 13)  # per-pod load as a fraction of the knee, one level per HOLD_S
HOLD_S = 10.0  # long against a 4 s rate window, so a busy machine's scrape jitter blurs little


def test_the_knee_is_inside_the_staircase_below_saturation() -> None:
    assert LEVELS[2] < 1.0 < LEVELS[-3]  # the test below would prove nothing otherwise
    assert LEVELS[-1] * E2E_ENGINE.knee() < E2E_ENGINE.model().saturation_rps  # every level a steady state


@pytest.mark.binary("prometheus")
def test_calibrate_recovers_the_knee_from_a_scraped_fleet_within_10_percent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    knee = E2E_ENGINE.knee()
    speed = SCRAPED_KNEE_RPS / knee
    config = E2E_ENGINE.fleet_config(
        deployment=Deployment(name="calib", namespace="calib-ns", model_name=ENGINE.profile.model_name),
        load_delay_s=(0.0, 0.0),
        drain_timeout_s=120.0,
        seed=7,
    )
    pods = CompressedPods(E2E_ENGINE, config, replicas=PODS, speed=speed)
    rates = np.concatenate(([LEVELS[0]], LEVELS)) * knee * PODS  # the first level twice, while Prometheus starts
    trace = RateTrace(step_s=HOLD_S, rates=rates, suspect=np.zeros(rates.size, dtype=bool))
    clock = TraceClock(time.monotonic(), 1.0)
    runner = FleetRunner(pods, ScaledTrace(trace, peak_rps=float(rates.max())), clock, tick_s=0.1)
    exporter = MetricsExporter(runner)
    runner.start()
    exporter.start()
    try:
        with scraping_prometheus(exporter.target, job="calib", interval="1s") as prom:
            begin = time.time() + HOLD_S
            time.sleep(max(clock.wall_time(rates.size * HOLD_S) - time.monotonic(), 0.0))
            end = time.time()
            out, plot, snippet = tmp_path / "cal.json", tmp_path / "cal.png", tmp_path / "composite.yaml"
            code = main(
                [
                    "calibrate", "--prometheus-url", prom.url, "--namespace", "calib-ns", "--deployment", "calib",
                    "--since", f"{end - begin:.0f}s", "--end", f"{end:.3f}", "--step", "1s", "--window", "4s",
                    "--slo-p99", f"{SLO_S:g}s", "--histogram", "vllm:e2e_request_latency_seconds",
                    "--cold-start", "1s", "--json", str(out), "--plot", str(plot), "--catalog-out", str(snippet),
                ]
            )  # fmt: skip
            printed = capsys.readouterr().out
    finally:
        exporter.stop()
        runner.stop()
    assert runner.failures == 0
    assert code == 0, printed
    report = json.loads(out.read_text())
    assert report["slo_p99_s"] == SLO_S
    got = report["knee_rps_per_pod"] / speed
    print(f"knee: calibrate {got:.3f} req/s per pod, the engine's {knee:.3f}")
    assert abs(got - knee) <= 0.10 * knee, (got, knee)
    assert 0 < report["safe_rps_per_pod"] < report["knee_rps_per_pod"]
    terms = {t["metric"]: t for t in report["terms"]}
    assert not terms["gpu_utilization_p90"]["tracks_load"]  # pinned at ~100 % on these busy pods
    if terms["inference_itl_p99_seconds"]["tracks_load"]:
        assert report["composite_at_safe"] == pytest.approx(1.0)
    else:
        assert any("no term tracks load" in w for w in report["warnings"])
    assert plot.stat().st_size > 10_000 and plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "inference_itl_p99_seconds" in snippet.read_text()
