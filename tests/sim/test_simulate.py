"""The offline what-if engine: its numerics, the pods' lifecycle under the token-level engines, the policies,
the forecast boost as the server computes it, the report and the CLI."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import yaml

from adapter.aggregate import reduce_values
from adapter.forecast_service import ForecastService, fit_history
from adapter.hpa.spec import HPASpec, load_hpa
from adapter.sim.forecasting import BoostTracker, history_points
from adapter.sim.latency import histogram_quantile
from adapter.sim.policies import POLICY_NAMES, build_policies, build_policy, design_hpa, guard_targets
from adapter.sim.readings import PodView, PolicyError, gpu_p90, pod_values, readings
from adapter.sim.report import goal, table, to_json, write_plot
from adapter.sim.simulate import run_policy, simulate
from adapter.sim.slo import DEFAULT_SLO, parse_slo
from adapter.sim.trace import RateTrace, ScaledTrace, synthetic_trace
from tests.support.sim import CATALOG, PHYSICS, knee, saturation, sim_config, token_fleet

REPO = Path(__file__).resolve().parents[2]
HPA_FILE = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"


def example_hpa() -> HPASpec:
    return load_hpa(HPA_FILE)


def step_trace(levels: list[float], step_s: float = 600.0) -> ScaledTrace:
    """A trace holding each level (req/s) for one window; peak scaled to its own maximum."""
    rates = np.asarray(levels, dtype=np.float64)
    trace = RateTrace(step_s=step_s, rates=rates, suspect=np.zeros(rates.size, dtype=np.bool_))
    return ScaledTrace(trace, peak_rps=float(rates.max()))


# -- numerics ---------------------------------------------------------------------------------------------


def test_histogram_quantile_follows_prometheus() -> None:
    # prometheus/prometheus promql/testdata/histograms.test, "testhistogram" with start="positive": buckets
    # le=0.1: 5, 0.2: 7, 1: 11, +Inf: 12 give 0.15 at q=0.5 and 0.72 at q=0.8; a rank in +Inf returns the
    # last finite bound (promql/quantile.go bucketQuantile).
    upper = np.array([0.1, 0.2, 1.0])
    cum = np.array([[5.0, 7.0, 11.0, 12.0]])
    assert histogram_quantile(0.5, upper, cum)[0] == pytest.approx(0.15)
    assert histogram_quantile(0.8, upper, cum)[0] == pytest.approx(0.72)
    assert histogram_quantile(0.99, upper, cum)[0] == pytest.approx(1.0)
    # A rank in the first bucket interpolates from 0; an empty histogram has no quantile.
    rows = np.array([[10.0, 10.0, 10.0, 10.0], [0.0, 0.0, 0.0, 0.0]])
    out = histogram_quantile(0.5, upper, rows)
    assert out[0] == pytest.approx(0.05)
    assert math.isnan(out[1])


@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_gpu_p90_is_the_servers_reduction(gpus: int) -> None:
    rng = np.random.default_rng(gpus)
    util = np.rint(rng.uniform(0, 100, size=(50, gpus)))
    expected = [reduce_values(list(row), "p90") for row in util]
    assert np.allclose(gpu_p90(util), expected)


# -- the pods' lifecycle --------------------------------------------------------------------------------


def test_requests_are_conserved() -> None:
    """Through loading pods, overload (a backlog, a full queue), drains and an empty Service: every arrival is
    completed, dropped or still waiting."""
    fleet = token_fleet(3, 3600.0, config=replace(PHYSICS, max_queue=200.0))
    sat = saturation()
    for k, (pods, load) in enumerate([(3, 0.6), (6, 2.0), (2, 0.9), (9, 1.5), (1, 3.0), (4, 0.5)]):
        t = 600.0 * k
        fleet.set_replicas(pods, t)
        fleet.advance(t + 600.0, pods * load * sat)
    led = fleet.ledger
    assert led.dropped.sum() > 0 and fleet.waiting.sum() >= 0
    in_system = float(fleet.waiting.sum())
    assert led.arrivals.sum() == pytest.approx(led.completions.sum() + led.dropped.sum() + in_system, rel=1e-9)


def test_scale_down_removes_loading_pods_first_then_the_newest() -> None:
    sat = saturation()
    fleet = token_fleet(3, 600.0, config=replace(PHYSICS, load_delay_s=(100.0, 100.0)))
    fleet.advance(60.0, 2.5 * sat)
    fleet.set_replicas(5, 60.0)  # two pods loading until t=160
    fleet.advance(200.0, 2.5 * sat)
    fleet.set_replicas(7, 200.0)  # two more loading until t=300
    fleet.advance(240.0, 6.0 * sat)  # overload: every ready pod holds a queue (below max_queue)
    held = float(fleet.waiting.sum())
    assert held > 0
    done_before, seconds_before = fleet.ledger.completions.sum(), fleet.ledger.pod_seconds.sum()
    fleet.set_replicas(4, 240.0)
    # The two loading pods (ids 5, 6) went first, then the newest ready one (id 4).
    assert fleet.ids.tolist() == [0, 1, 2, 3]
    drained = done_before + held - float(fleet.waiting.sum())
    assert fleet.ledger.completions.sum() == pytest.approx(drained)
    assert fleet.ledger.pod_seconds.sum() > seconds_before  # the draining pod held its GPU a while
    assert fleet.ledger.dropped.sum() == 0.0


# -- policies -----------------------------------------------------------------------------------------------


def test_policies_share_the_manifests_behavior_and_bounds() -> None:
    base = example_hpa()
    policies = build_policies(list(POLICY_NAMES), base, CATALOG)
    assert [p.name for p in policies] == list(POLICY_NAMES)
    for p in policies:
        assert (p.hpa.behavior, p.hpa.min_replicas, p.hpa.max_replicas) == (
            base.behavior,
            base.min_replicas,
            base.max_replicas,
        )
        # The composites keep the manifest's SLO guard beside their own metric (the controller takes the largest
        # proposal), the reactive one on the present P99s (what boost 1 serves); the single-input baselines read
        # their one metric.
        guard = base.metrics[1:]
        present = tuple(replace(m, name=m.name.removesuffix("_boosted")) for m in guard)
        assert p.hpa.metrics[1:] == {"composite": present, "boosted": guard}.get(p.name, ())
    assert [m.name for m in base.metrics[1:]] == [
        "inference_ttft_p99_guard_seconds_boosted",
        "inference_itl_p99_guard_seconds_boosted",
    ]
    by_name = {p.name: p.hpa.metrics[0] for p in policies}
    assert by_name["cpu"].type == "Resource" and by_name["cpu"].target.average_utilization == 80
    assert by_name["gpu"].target.average_value_milli == 80_000
    assert by_name["queue"].target.average_value_milli == 8_000  # the composite's queue target
    assert by_name["composite"].name == "llm_composite_load"
    assert by_name["boosted"].name == "llm_composite_load_boosted"
    assert by_name["boosted"].target.average_value_milli == 1000  # the manifest's own target
    boosted = policies[-1]
    assert boosted.forecast is not None and boosted.forecast.model == CATALOG.forecast.model  # type: ignore[union-attr]


def test_the_demos_hpa_is_the_example_manifest() -> None:
    assert design_hpa(namespace="llm", deployment="vllm") == example_hpa()


def test_the_slo_guard_lets_the_composite_decide_where_its_targets_fit() -> None:
    """On a busy pod (GPU at 100 %, no queue) the shipped composite is already over 1 when the ITL P99 reaches the
    guard's target, so on the fleets the catalog was set on the composite asks for pods first; and the guard's
    targets are under the default SLO's bounds."""
    guard = {m.name: m.target.average_value_milli / 1000 for m in example_hpa().metrics[1:]}  # type: ignore[operator]
    assert guard == pytest.approx(guard_targets(parse_slo(DEFAULT_SLO)))
    ttft, itl = "inference_ttft_p99_guard_seconds_boosted", "inference_itl_p99_guard_seconds_boosted"
    assert guard[ttft] < 2.0 and guard[itl] < 0.1
    view = PodView(
        now=0.0, names=("busy",), serving=np.array([True]), gpu_util=np.array([[100.0]]), queue=np.array([0.0]),
        latency_p99=np.array([np.nan]), cpu_milli=np.array([500.0]), itl_p99=np.array([guard[itl]]),
    )  # fmt: skip
    assert 1.0 < pod_values("llm_composite_load", view, CATALOG)["busy"] < 1.1


@pytest.mark.parametrize("boost", [1.0, 1.3, 2.0])
def test_the_boosted_guard_reads_the_p99_at_the_forecasts_load(boost: float) -> None:
    """The guard reads each P99 at the forecast's load (the catalog's ``forecast.also``, the server's
    ``boost_value``): the TTFT P99 x the boost, the ITL P99 by the rule of the composite's ITL term. So where the
    composite's targets fit, the boosted composite still decides at any boost: at its own equilibrium (it reads
    1 on a busy pod) the boosted ITL guard reads the ITL P99 at which the composite reads 1, under its target."""
    ttft, itl = "inference_ttft_p99_guard_seconds_boosted", "inference_itl_p99_guard_seconds_boosted"
    target = {m.name: m.target.average_value_milli / 1000 for m in example_hpa().metrics[1:]}  # type: ignore[operator]
    (term,) = [t for t in CATALOG.composites["llm_composite_load"].terms if t.metric == "inference_itl_p99_seconds"]

    def busy(itl_p99: float, ttft_p99: float = 0.5) -> PodView:
        return PodView(
            now=0.0, names=("busy",), serving=np.array([True]), gpu_util=np.array([[100.0]]), queue=np.array([0.0]),
            latency_p99=np.array([np.nan]), cpu_milli=np.array([500.0]), itl_p99=np.array([itl_p99]),
            ttft_p99=np.array([ttft_p99]),
        )  # fmt: skip

    assert pod_values(ttft, busy(0.08), CATALOG, boost)["busy"] == pytest.approx(boost * 0.5)
    assert pod_values(itl, busy(0.08), CATALOG, boost)["busy"] == pytest.approx(term.idle + (0.08 - term.idle) * boost)

    def where_one(metric: str) -> float:
        """The ITL P99 at which ``metric`` (a composite) reads 1 on the busy pod, by bisection."""
        lo, hi = 0.0099, 0.2
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if pod_values(metric, busy(mid), CATALOG, boost)["busy"] < 1 else (lo, mid)
        return lo

    at_one = where_one("llm_composite_load")
    assert pod_values(itl, busy(where_one("llm_composite_load_boosted")), CATALOG, boost)["busy"] == pytest.approx(
        at_one, rel=1e-6
    )
    assert at_one < target[itl]


def test_an_idle_fleet_scales_down_through_the_slo_guard() -> None:
    """An idle pod has no TTFT or ITL P99 (nothing in the window), and an HPA metric no pod has blocks every
    scale-down (upstream's invalid-metric rule): the guard reads the catalog's ``*_guard_seconds``, 0 on an idle
    serving pod, so a fleet whose traffic stops shrinks to minReplicas; on the raw P99s it would keep its size."""
    trace = step_trace([8 * knee(), 0.0, 0.0, 0.0, 0.0, 0.0])
    config = sim_config(duration_s=3600.0)
    hpa = example_hpa()
    raw = {"inference_ttft_p99_guard_seconds_boosted": "inference_ttft_p99_seconds",
           "inference_itl_p99_guard_seconds_boosted": "inference_itl_p99_seconds"}  # fmt: skip
    unguarded = replace(hpa, metrics=tuple(replace(m, name=raw.get(m.name, m.name)) for m in hpa.metrics))
    runs = {
        name: run_policy(build_policy("composite", spec, CATALOG), trace, config, CATALOG)
        for name, spec in (("guard", hpa), ("raw", unguarded))
    }
    assert runs["guard"].sync_desired.max() >= 5  # the busy first window took the fleet up
    assert runs["guard"].sync_desired[-1] == hpa.min_replicas
    assert runs["raw"].sync_desired[-1] == runs["raw"].sync_desired.max() > hpa.min_replicas


def test_policy_targets_and_models_can_be_overridden() -> None:
    base = example_hpa()
    p = build_policy("boosted:fourier_ar@0.7", base, CATALOG)
    assert p.forecast is not None and p.forecast.model == "fourier_ar"
    assert p.hpa.metrics[0].target.average_value_milli == 700
    assert build_policy("cpu@50", base, CATALOG).hpa.metrics[0].target.average_utilization == 50
    for bad in ("nope", "gpu:ses", "boosted:nomodel", "gpu@-1", "gpu@x", "hpa@2"):
        with pytest.raises(PolicyError):
            build_policy(bad, base, CATALOG)
    external = yaml.safe_load(HPA_FILE.read_text())
    external["spec"]["metrics"] = [
        {
            "type": "External",
            "external": {
                "metric": {"name": "queue"},
                "target": {"type": "AverageValue", "averageValue": "1"},
            },
        }
    ]
    with pytest.raises(PolicyError, match="cannot produce"):
        build_policy("hpa", load_hpa(external), CATALOG)


def test_pod_values_fuse_like_the_server() -> None:
    view = PodView(
        now=100.0,
        names=("ready", "loading"),
        serving=np.array([True, False]),
        gpu_util=np.array([[100.0, 100.0], [2.0, 2.0]]),
        queue=np.array([4.0, 0.0]),
        latency_p99=np.array([2.5, np.nan]),
        cpu_milli=np.array([570.0, 250.0]),
        itl_p99=np.array([0.03, np.nan]),
        ttft_p99=np.array([0.4, np.nan]),
    )
    composite = pod_values("llm_composite_load", view, CATALOG)
    # Each term max(v - idle, 0) / (target - idle) with the catalog's targets, weights as written; the loading
    # pod has no queue series (no vLLM /metrics yet), so it gets no composite (never a re-weighted GPU term).
    gpu, queue, itl = CATALOG.composites["llm_composite_load"].terms
    assert itl.metric == "inference_itl_p99_seconds"
    want = (
        0.4 * 100.0 / gpu.target + 0.3 * 4.0 / queue.target + 0.3 * max(0.03 - itl.idle, 0.0) / (itl.target - itl.idle)
    )
    assert composite["ready"] == pytest.approx(want)
    assert "loading" not in composite
    boosted = pod_values("llm_composite_load_boosted", view, CATALOG, boost=1.5)
    # The composite at 1.5x the load: the flat GPU term (saturated: 100 % is its target) as it reads, the queue
    # and latency terms x 1.5.
    gpu_part = 0.4 * 100.0 / gpu.target
    assert boosted["ready"] == pytest.approx(gpu_part + 1.5 * (want - gpu_part))
    # With elasticities, each term that tracks load x 1.5 ** its elasticity (the server's at_load).
    comp = CATALOG.composites["llm_composite_load"]
    steep = tuple(t if t.flat else replace(t, elasticity=2.0) for t in comp.terms)
    elastic = replace(CATALOG, composites={comp.name: replace(comp, terms=steep)})
    boosted = pod_values("llm_composite_load_boosted", view, elastic, boost=1.5)
    assert boosted["ready"] == pytest.approx(gpu_part + 1.5**2 * (want - gpu_part))
    assert "loading" not in pod_values("inference_queue_depth", view, CATALOG)  # no vLLM series yet
    hpa = build_policy("composite", example_hpa(), CATALOG).hpa
    fused, ttft, itl_read = readings(hpa, view, CATALOG)
    assert fused.pod_values == {"ready": math.floor(want * 1000 + 0.5)}
    assert (ttft.pod_values, itl_read.pod_values) == ({"ready": 400}, {"ready": 30})  # the guard: P99s in ms


# -- the forecast boost -------------------------------------------------------------------------------------


def test_history_length_is_the_servers() -> None:
    spec = CATALOG.forecast
    assert spec is not None
    service = ForecastService(spec, CATALOG, client=cast(Any, None))  # never started: no client needed
    try:
        for model in ("ses", "fourier_ar", "auto"):
            service.spec = replace(spec, model=model)
            assert history_points(service.spec) == service.points_needed()
    finally:
        service._executor.shutdown(wait=False)


def test_boost_tracker_refits_once_per_step_with_the_servers_function() -> None:
    spec = CATALOG.forecast
    assert spec is not None
    tracker = BoostTracker(spec, start=0.0)
    completions = np.zeros(24 * 60)
    completions[:] = np.linspace(100.0, 400.0, completions.size) * 60.0  # a steady rise, req per minute
    boosts = [tracker.boost(t, completions) for t in np.arange(0.0, 6 * 3600.0, 15.0)]
    assert tracker.fits == int(6 * 3600 / spec.step_s) - 1  # one per step once a full window exists
    state = tracker.state
    assert state is not None
    again = fit_history(tracker.history(tracker.step_ts, completions), step_ts=tracker.step_ts, spec=spec)
    assert state.boost == again.boost and state.reason == again.reason
    assert boosts[-1] == state.boost


# -- whole runs ----------------------------------------------------------------------------------------------


def test_cpu_only_scales_down_while_gpu_inference_saturates() -> None:
    """The classic failure: CPU stays far below its target, so the HPA shrinks the fleet to minReplicas
    and the SLO is violated; the GPU-utilization policy keeps pods because utilization saturates."""
    trace = step_trace([12 * knee()] * 12)
    config = sim_config(duration_s=2 * 3600.0)
    runs = {
        p.name: run_policy(p, trace, config, CATALOG) for p in build_policies(["cpu", "gpu"], example_hpa(), CATALOG)
    }
    cpu, gpu = runs["cpu"], runs["gpu"]
    assert cpu.sync_desired[-1] == 1
    assert np.nanmax(cpu.sync_usage) < 0.2 * 4000  # milli-cores: well below 80 % of the 4-core request
    assert int(cpu.summary["slo_violation_minutes"] or 0) > 60
    assert gpu.sync_desired.min() >= math.ceil(12 * knee() / saturation())  # never fewer pods than at saturation
    assert int(gpu.summary["slo_violation_minutes"] or 0) == 0


def test_runs_are_deterministic_and_share_the_physics() -> None:
    trace = step_trace([k * knee() for k in (6.0, 9.0, 5.0, 12.0, 7.5, 4.5)])
    config = sim_config(duration_s=3600.0)
    policy = build_policy("composite", example_hpa(), CATALOG)
    a, b = run_policy(policy, trace, config, CATALOG), run_policy(policy, trace, config, CATALOG)
    assert np.array_equal(a.sync_desired, b.sync_desired) and a.summary["gpu_hours"] == b.summary["gpu_hours"]
    other = run_policy(policy, trace, replace(config, fleet=replace(PHYSICS, seed=7)), CATALOG)
    assert other.summary["gpu_hours"] != a.summary["gpu_hours"]  # the seed draws other load delays


def test_simulate_in_processes_equals_in_process() -> None:
    trace = step_trace([k * knee() for k in (6.0, 9.0, 5.0)])
    config = sim_config(duration_s=1800.0)
    policies = build_policies(["gpu", "queue", "composite"], example_hpa(), CATALOG)
    serial = simulate(policies, trace, config, CATALOG, workers=1)
    parallel = simulate(policies, trace, config, CATALOG, workers=2)
    for x, y in zip(serial.runs, parallel.runs, strict=True):
        assert x.policy == y.policy and np.array_equal(x.sync_desired, y.sync_desired)


def test_boosted_is_the_composite_times_the_servers_boost() -> None:
    """With max_boost 1 the boosted policy must decide exactly as the reactive composite; with the
    catalog's max_boost the forecast (refit every 5 min on the fleet's completions) changes decisions."""
    trace = ScaledTrace(synthetic_trace(days=2), peak_rps=32 * knee())
    config = sim_config(start_s=0.0, duration_s=12 * 3600.0)
    hpa = example_hpa()
    spec = CATALOG.forecast
    assert spec is not None
    flat = replace(CATALOG, forecast=replace(spec, max_boost=1.0))
    composite = run_policy(build_policy("composite", hpa, CATALOG), trace, config, CATALOG)
    boosted_flat = run_policy(build_policy("boosted", hpa, flat), trace, config, flat)
    assert np.array_equal(boosted_flat.sync_desired, composite.sync_desired)
    boosted = run_policy(build_policy("boosted", hpa, CATALOG), trace, config, CATALOG)
    assert boosted.forecast is not None
    reasons = cast(dict[str, int], boosted.forecast["reasons"])
    assert reasons.get("ok", 0) > 100 and boosted.forecast["fits"] == 12 * 12 - 1
    assert boosted.sync_boost.max() > 1.0
    assert not np.array_equal(boosted.sync_desired, composite.sync_desired)


# -- report and CLI -----------------------------------------------------------------------------------------


def test_report_json_table_and_plot(tmp_path: Path) -> None:
    trace = step_trace([k * knee() for k in (6.0, 9.0, 5.0)])
    config = sim_config(duration_s=1800.0)
    policies = build_policies(["gpu", "composite", "boosted"], example_hpa(), CATALOG)
    result = simulate(policies, trace, config, CATALOG)
    doc = to_json(result)
    json.dumps(doc)  # JSON-able
    assert [p["policy"] for p in doc["policies"]] == ["gpu", "composite", "boosted"]
    assert doc["goal"] is not None and doc["goal"]["boosted_policy"] == "boosted"
    assert len(doc["series"]["t"]) == 6 and set(doc["series"]["replicas"]) == {"gpu", "composite", "boosted"}
    minutes = sum(doc["series"]["slo_violation_minutes"]["gpu"])
    assert minutes == doc["policies"][0]["slo_violation_minutes"]
    text = table(result)
    # 3 runs, the oracle and the static fleet sized for the peak (never cheaper than the oracle)
    assert text.count("\n") == 6 and "| boosted |" in text and "| oracle |" in text and "| static peak |" in text
    assert float(doc["inputs"]["static_peak_gpu_hours"]) >= float(doc["inputs"]["oracle_gpu_hours"]) > 0
    g = goal(result)
    assert g is not None and g["met"] == all(g["checks"].values()) and len(g["checks"]) == 4
    png = tmp_path / "sim.png"
    write_plot(result, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapter", "simulate", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_cli_on_a_generic_csv(tmp_path: Path) -> None:
    csv = tmp_path / "load.csv"
    rows = ["ts,rps"] + [f"{1_700_000_000 + 600 * i},{v}" for i, v in enumerate([50, 80, 120, 90, 60, 100])]
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "sim.json"
    done = _cli(
        "--trace",
        str(csv),
        "--time-col",
        "ts",
        "--value-col",
        "rps",
        "--hpa",
        str(HPA_FILE),
        "--policy",
        "gpu",
        "--policy",
        "composite@0.7",
        "--peak-pods",
        "6",
        "--duration",
        "1h",
        "--json",
        str(out),
        "--plot",
        str(tmp_path / "sim.png"),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert [p["policy"] for p in doc["policies"]] == ["gpu", "composite@0.7"]
    # The CSV is put on a grid of its own spacing (backtest's resampling), which the run starts on.
    assert doc["inputs"]["start_s"] <= 1_700_000_000 < doc["inputs"]["start_s"] + 600
    assert doc["inputs"]["duration_s"] == 3600
    # The peak needs --peak-pods pods at the knee of the default engine and mix (token engines: every bound holds).
    assert doc["inputs"]["physics"]["engine"] == "token"
    assert doc["inputs"]["trace_peak_rps"] == pytest.approx(6 * doc["inputs"]["knee_rps_per_pod"])
    assert "| composite@0.7 |" in done.stdout
    assert (tmp_path / "sim.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--policy", "nope"], "unknown policy"),
        (["--value-col", "missing", "--time-col", "ts"], "no column"),
        (["--load-time", "3m..1m"], "range"),
        (["--live", "--policy", "cpu", "--duration", "1h"], "Pods metrics only"),
        (["--live", "--policy", "clairvoyant:5m@30", "--duration", "1h"], "cannot run the clairvoyant policy"),
        (["--policy", "clairvoyant"], "needs @TARGET"),
    ],
)
def test_cli_user_errors_are_one_line(tmp_path: Path, extra: list[str], message: str) -> None:
    csv = tmp_path / "load.csv"
    csv.write_text("ts,rps\n0,10\n600,20\n1200,15\n")
    args = ["--trace", str(csv), "--hpa", str(HPA_FILE), "--json", str(tmp_path / "o.json"), *extra]
    if "--time-col" not in extra:
        args += ["--time-col", "ts", "--value-col", "rps"]
    done = _cli(*args)
    assert done.returncode == 2
    assert message in done.stderr and done.stderr.count("\n") == 1
