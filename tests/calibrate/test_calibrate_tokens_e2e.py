"""``python -m adapter calibrate --slo ttft=2s,itl=100ms`` against a real Prometheus scraping token-level vLLM pods.

Four Deployments run side by side, one per engine profile and request mix: two pods of
``adapter.demo.tokenpods.TokenPods`` (the token-level engines ``simulate`` replays) each, served by
the demo exporter with vLLM's own families (TTFT, inter-token and e2e histograms, token counters, KV usage) and
scraped by one Prometheus every second. The load climbs a staircase through each engine's knee on a compressed
clock (``tests/support/compressed_pods.py``: the scraped rates read ``speed`` x the engine's, so a 70B pod's knee
of ~1 request/s fills the load bins in seconds, not hours). ``calibrate`` reads the scraped series through the
catalog's queries and vLLM's histograms; its knee must be the engine's own (``TokenEngine.knee()``, computed from
the engine's physics, which calibrate never sees) within 10 %, and the mix and KV usage it reports those the
engines served.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml

from adapter.__main__ import main
from adapter.demo.exporter import FleetRunner, MetricsExporter
from adapter.demo.servers import PrometheusProcess, VictoriaMetricsProcess
from adapter.sim.config import Deployment
from adapter.sim.mix import mix
from adapter.sim.profiles import profile
from adapter.sim.slo import parse_slo
from adapter.sim.tokenfleet import TokenEngine
from adapter.sim.trace import RateTrace, ScaledTrace, TraceClock
from tests.support.compressed_pods import CompressedPods

REPO = Path(__file__).resolve().parents[2]
SLO = "ttft=2s,itl=100ms"
PROFILES = ("llama3-8b-h100", "llama3-70b-h100-tp4")
MIXES = ("azure-conversation", "azure-code")
PODS = 2
# The compressed clock puts every engine's knee at this many scraped requests/s per pod: a load bin at half the
# knee then holds ~PODS x 40 x HOLD_S requests, more than the 500 calibrate needs to judge a 1 % tail.
SCRAPED_KNEE_RPS = 80.0
# Per-pod load as a fraction of the engine's knee, one level per HOLD_S (wall seconds); the first level is held
# twice, while Prometheus starts. Steps of 10 % of the knee, through it to 1.5x (below saturation for all four).
LEVELS = np.linspace(0.5, 1.5, 11)
HOLD_S = 10.0
# The composite the catalog ships (docs/metrics.md): GPU P90 flat, the queue an alarm, the ITL P99 tracking load.
ITL_COMPOSITE = [
    {"metric": "gpu_utilization_p90", "weight": 0.4, "target": 100, "flat": True},
    {"metric": "inference_queue_depth", "weight": 0.3, "target": 8},
    {"metric": "inference_itl_p99_seconds", "weight": 0.3, "target": 0.049, "idle": 0.0099, "when_missing": "idle"},
]
ITL_METRIC = {
    "help": "P99 of vllm:inter_token_latency_seconds over the window",
    "query": "histogram_quantile(0.99, sum by (<<by>>, le) "
    "(rate(vllm:inter_token_latency_seconds_bucket{<<matchers>>}[<<window>>])))",
    "window": "2m",
    "layouts": ["target"],
    "reduce": "max",
    "objects": "mean",
}


@dataclass(frozen=True)
class Case:
    profile: str
    mix: str
    engine: TokenEngine
    speed: float
    namespace: str

    @property
    def id(self) -> str:
        return f"{self.profile}/{self.mix}"


def _cases() -> list[Case]:
    out = []
    for i, (p, m) in enumerate((p, m) for p in PROFILES for m in MIXES):
        engine = TokenEngine(profile(p), mix(m), parse_slo(SLO))
        out.append(Case(p, m, engine, SCRAPED_KNEE_RPS / engine.knee(), f"tok-{i}"))
    return out


CASES = _cases()


def test_each_knee_is_inside_the_staircase_below_saturation() -> None:
    assert LEVELS[2] < 1.0 < LEVELS[-3]  # the knee has levels on both sides: the tests below prove something
    for case in CASES:  # the top level leaves no backlog: every level is a steady state
        assert LEVELS[-1] * case.engine.knee() < case.engine.model().saturation_rps, case.id


@dataclass(frozen=True)
class Scraped:
    urls: dict[str, str]  # --backend -> its URL
    start: float
    end: float
    catalog: Path


def _catalog(path: Path) -> Path:
    """The embedded catalog with the ITL composite (its ITL metric added where the catalog has none)."""
    doc = yaml.safe_load((REPO / "adapter" / "catalog.yaml").read_text())
    doc["metrics"].setdefault("inference_itl_p99_seconds", ITL_METRIC)
    doc["composites"][doc["forecast"]["base"]]["terms"] = ITL_COMPOSITE
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def scraped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scraped]:
    """The four Deployments' staircases, scraped; Prometheus kept running while the tests read it."""
    clock = TraceClock(time.monotonic(), 1.0)
    wall_start = time.time()
    levels = np.concatenate(([LEVELS[0]], LEVELS))
    runners, exporters = [], []
    for case in CASES:
        engine = case.engine
        config = engine.fleet_config(
            deployment=Deployment(name="llm", namespace=case.namespace, model_name=engine.profile.model_name),
            load_delay_s=(0.0, 0.0),
            drain_timeout_s=120.0,
            seed=7,
        )
        pods = CompressedPods(engine, config, replicas=PODS, speed=case.speed)
        rates = levels * engine.knee() * PODS
        trace = RateTrace(step_s=HOLD_S, rates=rates, suspect=np.zeros(rates.size, dtype=bool))
        runner = FleetRunner(pods, ScaledTrace(trace, peak_rps=float(rates.max())), clock, tick_s=0.1)
        runners.append(runner)
        exporters.append(MetricsExporter(runner))
    for runner, exporter in zip(runners, exporters, strict=True):
        runner.start()
        exporter.start()
    jobs = [
        {"job_name": case.namespace, "honor_labels": True, "scrape_interval": "1s", "scrape_timeout": "1s",
         "static_configs": [{"targets": [exporter.target]}]}
        for case, exporter in zip(CASES, exporters, strict=True)
    ]  # fmt: skip
    prom = PrometheusProcess(scrape_configs=list(jobs), scrape_interval="1s")
    vm = VictoriaMetricsProcess(scrape_configs=list(jobs), scrape_interval="1s")
    try:
        prom.start()
        vm.start()
        time.sleep(max(clock.wall_time(levels.size * HOLD_S) - time.monotonic(), 0.0))
        end = time.time()
        for runner, exporter in zip(runners, exporters, strict=True):
            exporter.stop()
            runner.stop()
            assert runner.failures == 0
        catalog = _catalog(tmp_path_factory.mktemp("cat") / "catalog.yaml")
        yield Scraped({"prometheus": prom.url, "victoriametrics": vm.url}, wall_start + HOLD_S, end, catalog)
    finally:
        for runner, exporter in zip(runners, exporters, strict=True):
            exporter.stop()
            runner.stop()
        prom.close()
        vm.close()


@pytest.mark.binary("prometheus", "victoria-metrics")
@pytest.mark.parametrize("backend", ["prometheus", "victoriametrics"])
@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_calibrate_finds_each_engines_knee_from_its_scraped_histograms(
    case: Case, backend: str, scraped: Scraped, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, plot, snippet = tmp_path / "cal.json", tmp_path / "cal.png", tmp_path / "composite.yaml"
    argv = [
        "calibrate", "--prometheus-url", scraped.urls[backend], "--backend", backend,
        "--namespace", case.namespace, "--deployment", "llm",
        "--catalog", str(scraped.catalog), "--slo", SLO,
        "--since", f"{scraped.end - scraped.start:.0f}s", "--end", f"{scraped.end:.3f}", "--step", "1s",
        "--window", "4s", "--cold-start", "1s",
        "--json", str(out), "--plot", str(plot), "--catalog-out", str(snippet),
    ]  # fmt: skip
    code = main(argv)
    printed = capsys.readouterr().out
    assert code == 0, printed
    report = json.loads(out.read_text())
    assert report["slo"] == "TTFT P99 <= 2 s, ITL P99 <= 0.1 s"
    want = case.engine.knee()
    got = report["knee_rps_per_pod"] / case.speed
    print(f"{case.id} on {backend}: knee {got:.4g} req/s per pod from the scrapes, the engine's {want:.4g}")
    assert abs(got - want) <= 0.10 * want, (got, want)
    assert 0 < report["safe_rps_per_pod"] < report["knee_rps_per_pod"]
    # The mix the engines served, read back from vLLM's token counters over the TTFT histogram's requests.
    seen = report["workload"]
    assert seen["prompt_tokens_per_request"] == pytest.approx(case.engine.mix.prompt_mean, rel=0.02)
    assert seen["output_tokens_per_request"] == pytest.approx(case.engine.mix.output_mean, rel=0.02)
    # The KV usage at calibrate's knee: the engines' own at that load (running sequences x their mean context),
    # within 5 %. Calibrate averages the gauge over the rate window, the span its load was read over; an instant
    # read left each backend to its own lookback rules, and VictoriaMetrics read 10-11 % over on 8B conversation
    # under a loaded machine (measured averaged: within 1.7 % on both backends in all four cases).
    model = case.engine.model()
    kv = model.at(got).running * model.context_per_seq / case.engine.profile.kv_cache_tokens
    print(f"{case.id} on {backend}: KV usage at the knee {seen['kv_cache_usage_at_knee']:.4g}, the engine's {kv:.4g}")
    assert seen["kv_cache_usage_at_knee"] == pytest.approx(kv, rel=0.05)
    assert "mix seen:" in printed and "KV cache usage:" in printed
    terms = {t["metric"]: t for t in report["terms"]}
    if terms["inference_itl_p99_seconds"]["tracks_load"]:
        assert report["composite_at_safe"] == pytest.approx(1.0)
    else:
        assert any("no term tracks load" in w for w in report["warnings"])
    assert "inference_itl_p99_seconds" in snippet.read_text()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
