"""The pure rules that decide what the HPA sees."""

from __future__ import annotations

import math

import numpy as np

from adapter.aggregate import (
    CompositeValue,
    PodValue,
    Rejections,
    TermValue,
    at_load,
    attribute,
    boost_value,
    combine,
    fuse,
    reduce_by_pod,
    unservable_terms,
)
from adapter.catalog import Term, load_catalog
from adapter.samples import Sample

LAYOUTS = load_catalog(None).layouts


def s(value: float, **labels: str) -> Sample:
    return Sample(labels, 100.0, value)


def test_attribution_prefers_exported_labels_and_ignores_idle_gpus() -> None:
    assert attribute(
        {"exported_pod": "w", "exported_namespace": "llm", "pod": "dcgm-x", "namespace": "gpu-operator"}, LAYOUTS
    ) == ("llm", "w")
    # dcgm-exporter --use-old-namespace as scraped: the target labels name the exporter's own namespace.
    assert attribute({"pod_name": "w", "pod_namespace": "llm", "namespace": "gpu-operator"}, LAYOUTS) == ("llm", "w")
    assert attribute({"pod": "w", "namespace": "llm"}, LAYOUTS) == ("llm", "w")
    assert attribute({"pod": "", "namespace": ""}, LAYOUTS) is None
    assert attribute({"pod": "w"}, LAYOUTS) is None


def test_p90_is_linear_interpolation_and_skips_non_finite() -> None:
    values = [10, 20, 30, 40, 50, 60, 70, 99]
    samples = [s(v, pod="a", namespace="n", gpu=str(i)) for i, v in enumerate(values)]
    samples += [s(math.nan, pod="a", namespace="n", gpu="9"), s(math.inf, pod="b", namespace="n")]
    out = reduce_by_pod(samples, LAYOUTS, "p90", "n")
    assert out["a"].value == np.percentile(values, 90) and out["a"].series == 8
    assert "b" not in out  # only a non-finite sample: omitted, never 0


def test_pods_outside_scope_are_dropped() -> None:
    samples = [s(1, pod="a", namespace="n"), s(2, pod="b", namespace="n"), s(3, pod="a", namespace="other")]
    assert set(reduce_by_pod(samples, LAYOUTS, "sum", "n", {"a"})) == {"a"}


def test_any_nonzero() -> None:
    out = reduce_by_pod(
        [s(0, pod="a", namespace="n", gpu="0"), s(43, pod="a", namespace="n", gpu="1"), s(0, pod="b", namespace="n")],
        LAYOUTS,
        "any_nonzero",
        "n",
    )
    assert (out["a"].value, out["b"].value) == (1.0, 0.0)


def test_fuse_weights_are_never_rescaled_and_a_pod_missing_a_required_term_is_omitted() -> None:
    """Issue 11 row 5: with the GPU series missing, the old rule re-weighted the composite over the terms left
    (0.99 -> 0.84 for every pod), a different metric under the same name. Now such a pod has no value."""
    terms = [Term("gpu", 0.4, 80), Term("queue", 0.3, 8), Term("lat", 0.3, 0.8, when_missing="idle")]
    comps = {
        "gpu": {"a": PodValue(40, 1, 1), "b": PodValue(80, 1, 1), "c": PodValue(80, 1, 1)},
        "queue": {"a": PodValue(8, 2, 1), "c": PodValue(4, 1, 1)},
        "lat": {"a": PodValue(0.4, 3, 1)},
    }
    out = fuse(terms, comps)
    assert math.isclose(out["a"].value, 0.4 * 0.5 + 0.3 * 1 + 0.3 * 0.5)
    assert out["a"].ts == 3 and out["a"].missing == ()
    # b has no queue series (omit_pod): no value at all, never a re-weighted one.
    assert "b" not in out
    # c has no latency (when_missing: idle): that term reads 0, the others keep their weights.
    assert math.isclose(out["c"].value, 0.4 * 1 + 0.3 * 0.5) and out["c"].missing == ("lat",)
    assert [t.metric for t in out["c"].terms] == ["gpu", "queue"]
    assert set(out) == {"a", "c"}


def test_fuse_idle_offset_makes_a_term_with_a_floor_proportional() -> None:
    """A P99 that is 0.4 s on an idle pod and 0.6 s at the safe point reads 0 and 1 there, 0.5 half-way."""
    term = Term("lat", 1.0, 0.6, idle=0.4)
    got = {v: fuse([term], {"lat": {"p": PodValue(v, 0, 1)}})["p"].value for v in (0.3, 0.4, 0.5, 0.6, 0.8)}
    assert got[0.3] == 0.0 and got[0.4] == 0.0  # below the floor: no load, never negative
    assert math.isclose(got[0.5], 0.5) and math.isclose(got[0.6], 1.0) and math.isclose(got[0.8], 2.0)


def test_unservable_terms_names_a_required_term_absent_for_every_pod() -> None:
    terms = [Term("gpu", 0.4, 80), Term("queue", 0.3, 8), Term("lat", 0.3, 0.8, when_missing="idle")]
    both = {"a": PodValue(1, 0, 1)}
    assert unservable_terms(terms, {"gpu": {}, "queue": both, "lat": both}) == ["gpu"]
    # No finished request anywhere is legitimate for a latency term that reads idle when missing.
    assert unservable_terms(terms, {"gpu": both, "queue": both, "lat": {}}) == []
    # Nothing at all: no workload there, not a partial answer (the caller answers "no pods"/404).
    assert unservable_terms(terms, {"gpu": {}, "queue": {}, "lat": {}}) == []
    # Data for some pods only is served for those pods (the others are omitted by fuse).
    assert unservable_terms(terms, {"gpu": both, "queue": {"b": PodValue(1, 0, 1)}, "lat": {}}) == []


def _pod(gpu: float, latency: float) -> CompositeValue:
    """A pod of the shipped composite's shape: a GPU term (0.4) and a latency term (0.3) normalized as
    given, an empty queue (0.3 x 0)."""
    terms = (
        TermValue("gpu_utilization_p90", 0.0, gpu, 0.4, 0.4 * gpu),
        TermValue("inference_queue_depth", 0.0, 0.0, 0.3, 0.0),
        TermValue("inference_latency_p99_seconds", 0.0, latency, 0.3, 0.3 * latency),
    )
    return CompositeValue(sum(t.contribution for t in terms), 0.0, terms, ())


def test_at_load_boosts_the_terms_that_track_load_and_a_flat_one_only_up_to_its_target() -> None:
    flat = frozenset({"gpu_utilization_p90"})
    # A busy pod: the GPU saturated (1.0) stays; the latency term x 1.5.
    assert at_load(_pod(1.0, 2.0), flat, 1.5) == math.fsum([0.4, 0.3 * 3.0])
    assert at_load(_pod(1.04, 2.0), flat, 1.5) == math.fsum([0.4 * 1.04, 0.3 * 3.0])  # above target: as read
    # A GPU that still tracks load (0.5 of its busy level) rises with it, up to its target.
    assert at_load(_pod(0.5, 1.0), flat, 1.5) == math.fsum([0.4 * 0.75, 0.3 * 1.5])
    assert at_load(_pod(0.8, 1.0), flat, 1.5) == math.fsum([0.4 * 1.0, 0.3 * 1.5])
    # Nothing flat: every term (so the whole composite) x the boost.
    assert math.isclose(at_load(_pod(1.0, 2.0), frozenset(), 1.5), 1.5 * _pod(1.0, 2.0).value)
    # Boost 1, below 1 or not a number: the composite as it is (never lowered).
    for boost in (1.0, 0.5, math.nan, math.inf):
        assert at_load(_pod(1.0, 2.0), flat, boost) == _pod(1.0, 2.0).value
    # An idle pod stays idle.
    assert at_load(_pod(0.0, 0.0), flat, 2.0) == 0.0


def test_at_load_reads_a_term_at_the_boosted_load_by_its_elasticity() -> None:
    """A term reading x with elasticity e reads x b^e at b times the load; the flat term keeps its own rule."""
    flat = frozenset({"gpu_utilization_p90"})
    steep = {"inference_latency_p99_seconds": 2.0}
    assert at_load(_pod(1.0, 1.5), flat, 1.5, steep) == math.fsum([0.4, 0.3 * 1.5 * 1.5**2])
    gentle = {"inference_latency_p99_seconds": 0.5}
    assert at_load(_pod(0.5, 1.5), flat, 1.5, gentle) == math.fsum([0.4 * 0.75, 0.3 * 1.5 * 1.5**0.5])
    # Elasticity 1 (or none given) is the proportional rule; a boost of 1 changes nothing whatever the elasticity.
    assert at_load(_pod(1.0, 1.5), flat, 1.5, {"inference_latency_p99_seconds": 1.0}) == at_load(
        _pod(1.0, 1.5), flat, 1.5
    )
    assert at_load(_pod(1.0, 1.5), flat, 1.0, steep) == _pod(1.0, 1.5).value
    # Never below the composite as read, even for a term that barely grows.
    assert at_load(_pod(1.0, 1.5), flat, 1.2, {"inference_latency_p99_seconds": 0.25}) > _pod(1.0, 1.5).value


def test_boost_value_reads_a_metric_at_the_boosted_load_above_its_idle() -> None:
    """idle + (value - idle) x b^e; in proportion (value x b) by default; nothing for b <= 1, a boost that is no
    number, or a value at or below its idle (a quiet pod's guard reads 0 at any boost)."""
    assert boost_value(0.08, 1.5) == 0.08 * 1.5
    assert boost_value(0.08, 1.5, idle=0.01) == 0.01 + 0.07 * 1.5
    assert boost_value(0.08, 1.5, idle=0.01, elasticity=2.0) == 0.01 + 0.07 * 1.5**2
    for boost in (1.0, 0.5, math.nan, math.inf):
        assert boost_value(0.08, boost, idle=0.01) == 0.08
    assert boost_value(0.0, 2.0) == 0.0 and boost_value(0.005, 2.0, idle=0.01) == 0.005


def test_combine() -> None:
    assert combine([1, 2, 3], "mean") == 2 and combine([1, 2, 3], "sum") == 6 and combine([1, 5], "max") == 5


def test_untrusted_layouts_are_skipped_and_reported() -> None:
    """Issue 11 row 1: exported_*/pod_name labels count only from the dcgm-exporter's own targets."""
    forged = {"exported_pod": "victim", "exported_namespace": "llm", "pod": "attacker", "namespace": "evil"}
    assert attribute(forged, LAYOUTS) == ("evil", "attacker")  # falls through to its own target labels
    assert attribute({"pod_name": "victim", "pod_namespace": "llm"}, LAYOUTS) is None
    rejected = Rejections()
    out = reduce_by_pod(
        [s(500, **forged), s(0, pod="victim", namespace="llm")], LAYOUTS, "sum", "llm", rejected=rejected
    )
    assert out["victim"].value == 0 and out["victim"].series == 1
    assert rejected.counts == {"untrusted": 1} and "exported_pod='victim'" in rejected.notes[0]


def test_negative_samples_are_dropped_for_nonnegative_metrics_and_reported() -> None:
    samples = [
        s(-40, pod="a", namespace="n"),
        s(3, pod="b", namespace="n", engine="0"),
        s(-1, pod="b", namespace="n", engine="1"),
    ]
    rejected = Rejections()
    out = reduce_by_pod(samples, LAYOUTS, "sum", "n", nonnegative=True, rejected=rejected)
    assert "a" not in out and out["b"].value == 3
    assert rejected.counts == {"negative": 2}
    assert reduce_by_pod(samples, LAYOUTS, "sum", "n")["a"].value == -40  # a metric that may be negative


def test_a_pod_with_an_unservable_sample_is_omitted_alone() -> None:
    samples = [
        s(1e25, pod="a", namespace="n"),
        s(2, pod="b", namespace="n"),
        Sample({"pod": "c", "namespace": "n"}, math.nan, 1.0),
        Sample({"pod": "d", "namespace": "n"}, 1e20, 1.0),
        s(9e15, pod="e", namespace="n"),
        s(9e15, pod="e", namespace="n", engine="1"),
    ]
    rejected = Rejections()
    out = reduce_by_pod(samples, LAYOUTS, "sum", "n", rejected=rejected)
    assert set(out) == {"b"}
    assert rejected.counts == {"extreme_value": 2, "bad_timestamp": 2}
