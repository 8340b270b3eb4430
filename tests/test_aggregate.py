"""The pure rules that decide what the HPA sees."""

from __future__ import annotations

import math

import numpy as np

from adapter.aggregate import PodValue, Rejections, attribute, combine, fuse, reduce_by_pod
from adapter.samples import Sample
from adapter.settings import Term, load_catalog

LAYOUTS = load_catalog(None).layouts


def s(value: float, **labels: str) -> Sample:
    return Sample(labels, 100.0, value)


def test_attribution_prefers_exported_labels_and_ignores_idle_gpus() -> None:
    assert attribute({"exported_pod": "w", "exported_namespace": "llm", "pod": "dcgm-x",
                      "namespace": "gpu-operator"}, LAYOUTS) == ("llm", "w")
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
    out = reduce_by_pod([s(0, pod="a", namespace="n", gpu="0"), s(43, pod="a", namespace="n", gpu="1"),
                         s(0, pod="b", namespace="n")], LAYOUTS, "any_nonzero", "n")
    assert (out["a"].value, out["b"].value) == (1.0, 0.0)


def test_fuse_rescales_weights_over_present_terms() -> None:
    terms = [Term("gpu", 0.4, 80), Term("queue", 0.3, 8), Term("lat", 0.3, 0.8)]
    comps = {"gpu": {"a": PodValue(40, 1, 1), "b": PodValue(80, 1, 1)},
             "queue": {"a": PodValue(8, 2, 1)},
             "lat": {"a": PodValue(0.4, 3, 1)}}
    out = fuse(terms, comps)
    assert math.isclose(out["a"].value, 0.4 * 0.5 + 0.3 * 1 + 0.3 * 0.5)
    assert out["a"].ts == 3 and out["a"].missing == ()
    assert math.isclose(out["b"].value, 1.0) and out["b"].missing == ("queue", "lat")
    assert set(out) == {"a", "b"}


def test_combine() -> None:
    assert combine([1, 2, 3], "mean") == 2 and combine([1, 2, 3], "sum") == 6 and combine([1, 5], "max") == 5


def test_untrusted_layouts_are_skipped_and_reported() -> None:
    """Issue 11 row 1: exported_*/pod_name labels count only from the dcgm-exporter's own targets."""
    forged = {"exported_pod": "victim", "exported_namespace": "llm", "pod": "attacker", "namespace": "evil"}
    assert attribute(forged, LAYOUTS) == ("evil", "attacker")   # falls through to its own target labels
    assert attribute({"pod_name": "victim", "pod_namespace": "llm"}, LAYOUTS) is None
    rejected = Rejections()
    out = reduce_by_pod([s(500, **forged), s(0, pod="victim", namespace="llm")], LAYOUTS, "sum", "llm",
                        rejected=rejected)
    assert out["victim"].value == 0 and out["victim"].series == 1
    assert rejected.counts == {"untrusted": 1} and "exported_pod='victim'" in rejected.notes[0]


def test_negative_samples_are_dropped_for_nonnegative_metrics_and_reported() -> None:
    samples = [s(-40, pod="a", namespace="n"), s(3, pod="b", namespace="n", engine="0"),
               s(-1, pod="b", namespace="n", engine="1")]
    rejected = Rejections()
    out = reduce_by_pod(samples, LAYOUTS, "sum", "n", nonnegative=True, rejected=rejected)
    assert "a" not in out and out["b"].value == 3
    assert rejected.counts == {"negative": 2}
    assert reduce_by_pod(samples, LAYOUTS, "sum", "n")["a"].value == -40   # a metric that may be negative


def test_a_pod_with_an_unservable_sample_is_omitted_alone() -> None:
    samples = [s(1e25, pod="a", namespace="n"), s(2, pod="b", namespace="n"),
               Sample({"pod": "c", "namespace": "n"}, math.nan, 1.0), Sample({"pod": "d", "namespace": "n"}, 1e20, 1.0),
               s(9e15, pod="e", namespace="n"), s(9e15, pod="e", namespace="n", engine="1")]
    rejected = Rejections()
    out = reduce_by_pod(samples, LAYOUTS, "sum", "n", rejected=rejected)
    assert set(out) == {"b"}
    assert rejected.counts == {"extreme_value": 2, "bad_timestamp": 2}
