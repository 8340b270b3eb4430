"""The pure calibration rules: knee, growth headroom, the per-term proposal, the bucket arithmetic."""

from __future__ import annotations

import math
from collections.abc import Callable
from importlib import resources

import numpy as np
import pytest

from adapter.aggregate import CompositeValue, PodValue, at_load, fuse
from adapter.calibrate.calibration import calibrate
from adapter.calibrate.history import over_threshold, simulated_history
from adapter.calibrate.knee import History, LoadBin, demand_growth, find_knee, load_bins
from adapter.calibrate.proposal import composite_gain, composite_reading, propose_terms, safe_point, solve_safe
from adapter.catalog import CompositeDef, Term
from tests.support.sim import CATALOG, ENGINE, PHYSICS

# The rules' tests read a composite whose latency term is the e2e P99 (any latency a catalog defines works alike).
TERMS = (
    Term("gpu_utilization_p90", 0.4, 95.95, flat=True),
    Term("inference_queue_depth", 0.3, 8.0),
    Term("inference_latency_p99_seconds", 0.3, 0.483, 0.2567, "idle"),
)


def lb(load: float, over: float, requests: float = 1000.0, **terms: float) -> LoadBin:
    return LoadBin(load=load, rows=1, requests=requests, over_fraction=over, terms=dict(terms))


def test_knee_interpolates_between_the_last_good_and_the_first_bad_bin() -> None:
    bins = [lb(10, 0.001), lb(20, 0.005), lb(30, 0.02), lb(40, 0.5)]
    # 1 % lies a fifth of the way from 0.5 % (20 req/s) to 2 % (30 req/s).
    assert find_knee(bins) == pytest.approx(20 + 10 * (0.01 - 0.005) / (0.02 - 0.005))


def test_one_noisy_bin_or_a_thin_one_does_not_end_the_search() -> None:
    bins = [lb(10, 0.001), lb(15, 0.03), lb(20, 0.002), lb(25, 0.2, requests=50), lb(30, 0.005), lb(40, 0.1)]
    knee = find_knee(bins)
    assert knee is not None and 30 < knee < 40


def test_no_knee_when_the_slo_was_always_met_and_the_calibration_says_so() -> None:
    assert find_knee([lb(10, 0.001), lb(20, 0.002)]) is None
    rows = np.array([5.0, 10.0, 20.0])
    history = History(
        load=rows,
        requests=rows,
        over_slo=rows * 0.001,
        terms={t.metric: rows for t in TERMS},
        deployment_load=np.zeros(0),
        step_s=60.0,
    )
    cal = calibrate(history, TERMS, slo_s=0.8)
    assert cal.knee_rps is None and cal.safe_rps is None and not cal.terms
    assert "never exceeded the SLO" in cal.warnings[0]


def test_demand_growth_is_the_quantile_of_the_peak_ahead_over_now() -> None:
    # Doubling once every 4 steps, flat otherwise: with a 1-step horizon 1 in 4 origins sees +100 %.
    d = np.array([1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4, 8], dtype=float)
    assert demand_growth(d, step_s=60, horizon_s=60, quantile=0.5) == 0.0
    assert demand_growth(d, step_s=60, horizon_s=60, quantile=1.0) == pytest.approx(1.0)
    # A horizon shorter than the step still looks one step ahead (a window's rate can arrive at once).
    assert demand_growth(d, step_s=600, horizon_s=300, quantile=1.0) == pytest.approx(1.0)
    # Falling demand is no growth.
    assert demand_growth(d[::-1].copy(), step_s=60, horizon_s=120, quantile=0.9) == 0.0


def test_proposal_makes_the_composite_read_one_at_the_safe_point_and_grow_with_load() -> None:
    """GPU flat at 100, queue 0 below the knee, latency 0.4 + 0.005 x load: the latency term carries the load."""
    bins = [
        lb(x, 0.0, gpu_utilization_p90=100.0, inference_queue_depth=0.0, inference_latency_p99_seconds=0.4 + 0.005 * x)
        for x in range(2, 42, 2)
    ]
    props, composite = propose_terms(bins, TERMS, safe=30.0)
    by = {p.metric: p for p in props}
    assert composite == pytest.approx(1.0)
    assert not by["gpu_utilization_p90"].tracks_load and by["gpu_utilization_p90"].target == pytest.approx(100.0)
    assert not by["inference_queue_depth"].tracks_load and by["inference_queue_depth"].target == 8.0
    lat = by["inference_latency_p99_seconds"]
    assert lat.tracks_load and lat.idle == pytest.approx(0.4)
    terms = [
        Term(p.metric, p.weight, p.target, p.idle, "idle" if p.metric.startswith("inference_l") else "omit_pod")
        for p in props
    ]

    def composite_at(load: float) -> float:
        comps = {
            "gpu_utilization_p90": {"p": PodValue(100.0, 0, 1)},
            "inference_queue_depth": {"p": PodValue(0, 0, 1)},
            "inference_latency_p99_seconds": {"p": PodValue(0.4 + 0.005 * load, 0, 1)},
        }
        return fuse(terms, comps)["p"].value

    assert composite_at(30.0) == pytest.approx(1.0)
    # Below the safe point it tracks load (the GPU term is a constant 0.4 of a busy pod): 0.4 + 0.6 x load/safe.
    assert composite_at(15.0) == pytest.approx(0.7) and composite_at(36.0) == pytest.approx(1.12)


def test_boosted_calibrated_composite_settles_at_the_boost_times_the_pods() -> None:
    """The HPA settles where the served value is 1.0. With the flat GPU term marked ``flat``, a boost b puts
    that point at safe / b per pod (b times the pods); boosting the whole composite put it far lower."""
    bins = [
        lb(x, 0.0, gpu_utilization_p90=100.0, inference_queue_depth=0.0, inference_latency_p99_seconds=0.4 + 0.005 * x)
        for x in range(2, 42, 2)
    ]
    props, _ = propose_terms(bins, TERMS, safe=30.0)
    assert [p.flat for p in props] == [True, False, False]  # GPU presence; queue alarm; latency tracks
    composite = CompositeDef(
        "c",
        "",
        tuple(Term(p.metric, p.weight, p.target, p.idle, "idle", flat=p.flat) for p in props),
        "mean",
    )
    assert composite.flat_share == pytest.approx(0.4)

    def composite_at(load: float) -> CompositeValue:
        comps = {
            "gpu_utilization_p90": {"p": PodValue(100.0, 0, 1)},
            "inference_queue_depth": {"p": PodValue(0, 0, 1)},
            "inference_latency_p99_seconds": {"p": PodValue(0.4 + 0.005 * load, 0, 1)},
        }
        return fuse(composite.terms, comps)["p"]

    def settles(served: Callable[[float], float]) -> float:
        """The per-pod load where ``served`` crosses 1.0 (bisection: it rises with load)."""
        lo, hi = 0.1, 30.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if served(mid) < 1.0 else (lo, mid)
        return (lo + hi) / 2

    for b in (1.1, 1.25, 1.5):
        at = settles(lambda x, b=b: at_load(composite_at(x), composite.flat_metrics, b))
        assert 30.0 / at == pytest.approx(b, rel=1e-6)
        # The whole composite times b: 0.6 b / (1 - 0.4 b) times the pods (1.18x at 1.1, 2.25x at 1.5).
        whole = settles(lambda x, b=b: b * composite_at(x).value)
        assert 30.0 / whole == pytest.approx(0.6 * b / (1 - 0.4 * b), rel=1e-6) and 30.0 / whole > b


def test_over_threshold_is_exact_on_a_bucket_bound_and_linear_inside_a_bucket() -> None:
    bounds = [0.5, 1.0, 2.0]
    cumulative = [50.0, 90.0, 99.0, 100.0]
    assert over_threshold(bounds, cumulative, 1.0) == pytest.approx(10.0)
    assert over_threshold(bounds, cumulative, 1.5) == pytest.approx(100 - (90 + 0.5 * 9))
    assert over_threshold(bounds, cumulative, 5.0) == pytest.approx(1.0)  # only +Inf is above the last bound
    assert over_threshold(bounds, cumulative, 0.25) == pytest.approx(75.0)


def test_simulated_sweep_finds_the_engines_knee() -> None:
    """Calibration and simulation share one fleet model: the sweep over the engines (the embedded composite read
    through the observer, as the HPA reads it) finds the knee ``simulate`` uses for the same engine and mix."""
    terms = CATALOG.composites["llm_composite_load"].terms
    history = simulated_history(ENGINE, PHYSICS, terms, pods=2, levels=26)
    cal = calibrate(history, terms, slo_s=0.8)
    expected = ENGINE.knee()
    assert cal.knee_rps is not None and abs(cal.knee_rps - expected) <= 0.1 * expected
    assert cal.safe_rps is not None and cal.safe_rps < cal.knee_rps
    assert cal.composite_at_safe == pytest.approx(1.0)
    assert [b.load for b in load_bins(history)] == sorted(b.load for b in cal.bins)
    assert all(math.isfinite(b.over_fraction) for b in cal.bins)
    queue = next(p for p in cal.terms if p.metric == "inference_queue_depth")
    assert not queue.tracks_load and queue.target == 8  # no backlog below the knee: an alarm, not a slope


def test_an_integer_queue_that_first_shows_a_request_just_below_the_safe_point_is_an_alarm_not_a_slope() -> None:
    """The queue reads 0 up to 26 req/s and 1 from 28 (vLLM's waiting count is an integer): a line through
    those medians would give a target of a fraction of a request, so one waiting request would add most of a
    pod's worth of composite. It keeps its catalog target; the latency carries the load."""
    bins = [
        lb(
            x,
            0.0,
            gpu_utilization_p90=100.0,
            inference_queue_depth=0.0 if x < 28 else 1.0,
            inference_latency_p99_seconds=0.4 + 0.005 * x,
        )
        for x in range(2, 42, 2)
    ]
    props, composite = propose_terms(bins, TERMS, safe=30.0)
    by = {p.metric: p for p in props}
    assert not by["inference_queue_depth"].tracks_load and by["inference_queue_depth"].target == 8.0
    assert by["inference_latency_p99_seconds"].tracks_load and composite == pytest.approx(1.0)
    # A queue positive throughout the range (a deep, steady queue) still tracks load.
    deep = [
        lb(
            x,
            0.0,
            gpu_utilization_p90=100.0,
            inference_queue_depth=1.0 + 0.5 * x,
            inference_latency_p99_seconds=0.4 + 0.005 * x,
        )
        for x in range(2, 42, 2)
    ]
    assert {p.metric: p for p in propose_terms(deep, TERMS, safe=30.0)[0]}["inference_queue_depth"].tracks_load


def test_a_term_at_its_maximum_without_light_bins_to_judge_saturation_is_flat() -> None:
    """A history that never ran below half the safe point (one bin there) gives no saturation verdict: a GPU duty
    cycle at 99.4 % of the 100 % it reaches is saturated (flat), while terms still well below their maximum track
    load."""
    bins = [
        lb(
            x,
            0.0,
            gpu_utilization_p90=min(100.0, 82.0 + 0.58 * x),
            inference_queue_depth=0.0,
            inference_latency_p99_seconds=0.4 + 0.005 * x,
        )
        for x in range(14, 44, 2)
    ]
    by = {p.metric: p for p in propose_terms(bins, TERMS, safe=30.0)[0]}
    gpu = by["gpu_utilization_p90"]
    assert gpu.flat and not gpu.tracks_load and gpu.idle == 0.0
    assert by["inference_latency_p99_seconds"].tracks_load
    # The same duty cycle still rising at the safe point (70 % of the 82 % it reaches) tracks load.
    rising = [lb(x, 0.0, gpu_utilization_p90=40.0 + x, inference_queue_depth=0.0) for x in range(14, 44, 2)]
    gpu = propose_terms(rising, TERMS[:2], safe=30.0)[0][0]
    assert gpu.tracks_load and not gpu.flat and gpu.idle == pytest.approx(40.0)


def test_the_mix_is_pooled_over_requests_and_the_kv_usage_read_at_the_knee() -> None:
    """Two pods per load: the bin's output tokens per request are tokens over requests (not a mean of the rows'
    ratios), the KV usage its median; the report reads the KV at the knee off the bins, the mix over all rows."""
    from adapter.calibrate.workload import observed_workload

    load = np.repeat([10.0, 20.0, 30.0, 40.0], 2)
    requests = np.array([10.0, 10.0, 20.0, 20.0, 20.0, 40.0, 40.0, 40.0])  # per s, 60 s rows: >= 500 per bin
    history = History(
        load=load,
        requests=requests,
        over_slo=requests * np.repeat([0.001, 0.002, 0.05, 0.1], 2),
        terms={t.metric: load for t in TERMS},
        deployment_load=np.zeros(0),
        step_s=60.0,
        prompt_tokens=requests * 1000.0,
        output_tokens=requests * np.array([100.0, 300.0, 200.0, 200.0, 100.0, 400.0, 200.0, 200.0]),
        kv_usage=load / 100.0 + np.tile([-0.01, 0.01], 4),
    )
    cal = calibrate(history, TERMS, slo_s=0.8, bins=8)
    by_load = {round(b.load): b.observed for b in cal.bins}
    assert by_load[30]["output_tokens_per_request"] == pytest.approx((20 * 100 + 40 * 400) / 60)
    assert by_load[30]["prompt_tokens_per_request"] == pytest.approx(1000.0)
    assert by_load[30]["kv_cache_usage"] == pytest.approx(0.30)
    assert cal.knee_rps == pytest.approx(20 + 10 * (0.01 - 0.002) / (0.05 - 0.002))
    seen = observed_workload(history, cal)
    assert seen.prompt_mean == pytest.approx(1000.0)
    assert seen.output_mean == pytest.approx(46_000 / 200)  # all output tokens/s over all requests/s
    assert seen.requests == pytest.approx(float(requests.sum()) * 60.0)
    assert cal.knee_rps is not None and seen.kv_at_knee == pytest.approx(cal.knee_rps / 100.0)
    assert seen.kv_max == pytest.approx(0.41)
    assert any(line.startswith("mix seen: 1000 prompt") for line in seen.lines())


def test_a_history_without_token_counters_or_kv_reports_none_of_them() -> None:
    from adapter.calibrate.workload import observed_workload

    rows = np.array([5.0, 10.0, 20.0])
    history = History(load=rows, requests=rows, over_slo=rows * 0.001, terms={}, deployment_load=np.zeros(0),
                      step_s=60.0)  # fmt: skip
    seen = observed_workload(history, calibrate(history, TERMS, slo_s=0.8))
    assert (seen.prompt_mean, seen.output_mean, seen.kv_at_knee, seen.kv_max) == (None, None, None, None)
    assert seen.lines() == []


def test_a_term_that_grows_faster_than_the_load_gets_the_elasticity_that_makes_a_boost_buy_b_times_the_pods() -> None:
    """A latency that curves upwards towards the knee (a floor, then ~ load^3): multiplying its term by b buys
    far fewer than b times the pods (1.47 at b = 2); read at b times the load by the elasticity calibrate fits
    (one power law for boosts 1.1 to 2, so not exact on this curve), it buys within 20 % of b, and at least 1.5
    times closer to b (in ratio) than the proportional rule."""

    def latency(x: float) -> float:
        return 0.02 + 2e-6 * x**3

    bins = [
        lb(x, 0.0, gpu_utilization_p90=100.0, inference_queue_depth=0.0, inference_latency_p99_seconds=latency(x))
        for x in range(2, 42, 2)
    ]
    props, composite_at_safe = propose_terms(bins, TERMS, safe=30.0)
    latency_term = next(p for p in props if p.metric == "inference_latency_p99_seconds")
    assert latency_term.tracks_load and latency_term.elasticity > 1.5 and composite_at_safe == pytest.approx(1.0)
    assert all(p.elasticity == 1.0 for p in props if not p.tracks_load)  # flat and alarm terms: not fitted

    def composite(elastic: bool) -> CompositeDef:
        terms = tuple(
            Term(p.metric, p.weight, p.target, p.idle, "idle", flat=p.flat, elasticity=p.elasticity if elastic else 1)
            for p in props
        )
        return CompositeDef("c", "", terms, "mean")

    def composite_at(c: CompositeDef, load: float) -> CompositeValue:
        comps = {
            "gpu_utilization_p90": {"p": PodValue(100.0, 0, 1)},
            "inference_queue_depth": {"p": PodValue(0, 0, 1)},
            "inference_latency_p99_seconds": {"p": PodValue(latency(load), 0, 1)},
        }
        return fuse(c.terms, comps)["p"]

    def bought(c: CompositeDef, b: float) -> float:
        lo, hi = 1.0, 40.0
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if at_load(composite_at(c, mid), c.flat_metrics, b, c.elasticities) < 1.0 else (lo, mid)
        return 30.0 / ((lo + hi) / 2)

    for b in (1.25, 1.5, 2.0):
        elastic, proportional = bought(composite(True), b), bought(composite(False), b)
        assert elastic == pytest.approx(b, rel=0.2) and proportional < 0.9 * b
        assert 1.5 * abs(math.log(elastic / b)) < abs(math.log(proportional / b))


def test_the_proposed_entry_carries_the_fitted_elasticities_and_parses_as_a_catalog() -> None:
    import yaml

    from adapter.calibrate.calibration import Calibration
    from adapter.calibrate.report import catalog_snippet
    from adapter.catalog import parse_catalog

    bins = [
        lb(
            x,
            0.0,
            gpu_utilization_p90=100.0,
            inference_queue_depth=0.0,
            inference_latency_p99_seconds=0.02 + 2e-6 * x**3,
        )
        for x in range(2, 42, 2)
    ]
    props, composite = propose_terms(bins, TERMS, safe=30.0)
    cal = Calibration(
        slo_s=1.0, slo_quantile=0.99, knee_rps=36.0, max_load_rps=40.0, growth=0.0, band=1.17, safe_rps=30.0,
        bins=tuple(bins), terms=tuple(props), composite_at_safe=composite,
    )  # fmt: skip
    snippet = yaml.safe_load(catalog_snippet(cal, composite="llm_composite_load"))
    doc = yaml.safe_load(resources.files("adapter").joinpath("catalog.yaml").read_text(encoding="utf-8"))
    doc["composites"] = snippet["composites"]
    parsed = parse_catalog(doc).composites["llm_composite_load"]
    fitted = next(p.elasticity for p in props if p.metric == "inference_latency_p99_seconds")
    assert parsed.elasticities == {"inference_latency_p99_seconds": fitted} and fitted != 1.0
    assert parsed.flat_metrics == {"gpu_utilization_p90"}  # the flat term gets no elasticity (the catalog refuses one)


def _old_band_safe(bins: list[LoadBin], top: float, tol: float = 0.1) -> float:
    """The flat-share rule the measured safe point replaces: knee / (1 + tol / max(1 - flat share, 0.25))."""
    props, _ = propose_terms(bins, TERMS, top / (1.0 + tol))
    total_w = sum(t.weight for t in TERMS)
    flat = sum(p.weight / total_w for p in props if p.flat)
    return top / (1.0 + tol / max(1.0 - flat, 0.25))


def test_a_linear_tracking_term_keeps_the_flat_share_band() -> None:
    """GPU flat (0.4 of the weight), latency linear in load: the composite reads 0.4 + 0.6 x load / safe, so it
    reads 1.1 at knee = safe x (1 + 0.1 / 0.6), the flat-share rule's band, and gains 0.6 % per 1 % at the safe
    point."""
    bins = [
        lb(x, 0.0, gpu_utilization_p90=100.0, inference_queue_depth=0.0, inference_latency_p99_seconds=0.4 + 0.005 * x)
        for x in range(2, 42, 2)
    ]
    safe, solved = solve_safe(bins, TERMS, 36.0, 0.1)
    assert solved
    assert 36.0 / safe == pytest.approx(1.0 + 0.1 / 0.6, rel=0.01)
    assert 36.0 / safe == pytest.approx(36.0 / _old_band_safe(bins, 36.0), rel=0.01)
    props, _ = propose_terms(bins, TERMS, safe)
    assert composite_gain(bins, props, safe) == pytest.approx(0.6, rel=0.02)
    assert safe_point(bins, TERMS, 36.0, 0.1) == pytest.approx(safe, rel=0.01)


def test_a_composite_that_curves_upwards_keeps_the_flat_share_band_and_reads_more_at_the_knee() -> None:
    """A latency quadratic in load: the composite proposed for the measured safe point would read 1.1 at the
    knee with a narrower band; the safe point stays at the flat-share rule's, and reads more there."""
    bins = [
        lb(
            x,
            0.0,
            gpu_utilization_p90=100.0,
            inference_queue_depth=0.0,
            inference_latency_p99_seconds=0.4 + 0.0005 * x * x,
        )
        for x in range(2, 42, 2)
    ]
    knee = 36.0
    measured, solved = solve_safe(bins, TERMS, knee, 0.1)
    old = _old_band_safe(bins, knee)
    assert solved and measured > old * 1.01
    safe = safe_point(bins, TERMS, knee, 0.1)
    assert safe == pytest.approx(old)
    props, _ = propose_terms(bins, TERMS, safe)
    assert composite_reading(bins, props, knee, total_w=sum(t.weight for t in TERMS)) > 1.1


def test_a_concave_composite_gets_a_lower_safe_point_that_reads_one_plus_tolerance_at_the_knee() -> None:
    """A latency that bends over with load (0.4 + 0.2 ln(1 + load / 20): still tracking, its slope in the
    upper half above half its slope below): the flat-share rule's composite reads under 1.1 at the knee (the
    HPA would sit within its tolerance while the SLO breaks); the measured safe point is lower and its
    composite reads 1.1 there."""
    bins = [
        lb(
            x,
            0.0,
            gpu_utilization_p90=100.0,
            inference_queue_depth=0.0,
            inference_latency_p99_seconds=0.4 + 0.2 * math.log(1.0 + x / 20.0),
        )
        for x in range(2, 42, 2)
    ]
    knee = 36.0
    total_w = sum(t.weight for t in TERMS)
    old = _old_band_safe(bins, knee)
    old_props, _ = propose_terms(bins, TERMS, old)
    assert any(p.tracks_load for p in old_props)
    assert composite_reading(bins, old_props, knee, total_w=total_w) < 1.1 * 0.99
    safe, solved = solve_safe(bins, TERMS, knee, 0.1)
    assert solved and safe < old * 0.99
    assert safe_point(bins, TERMS, knee, 0.1) == safe
    props, at_safe = propose_terms(bins, TERMS, safe)
    assert at_safe == pytest.approx(1.0)
    assert composite_reading(bins, props, safe, total_w=total_w) == pytest.approx(1.0, rel=0.01)
    assert composite_reading(bins, props, knee, total_w=total_w) == pytest.approx(1.1, rel=0.01)
    gain = composite_gain(bins, props, safe)
    assert gain is not None and 0.0 < gain < 0.6


def test_a_composite_that_never_gains_enough_finds_no_safe_point() -> None:
    """A latency that rises up to 10 req/s per pod and stays flat after: no safe point down to a quarter of the
    knee (36) makes the composite read 1.1 there."""
    bins = [
        lb(
            x,
            0.0,
            gpu_utilization_p90=100.0,
            inference_queue_depth=0.0,
            inference_latency_p99_seconds=0.4 + 0.005 * min(x, 10),
        )
        for x in range(1, 41)
    ]
    assert solve_safe(bins, TERMS, 36.0, 0.1) == (36.0, False)
    assert safe_point(bins, TERMS, 36.0, 0.1) == pytest.approx(_old_band_safe(bins, 36.0))
