"""Catalog validation: start-up errors name the bad entry."""

from __future__ import annotations

import copy

import pytest
import yaml

from adapter.catalog import AlsoBoosted, duration_seconds, load_catalog, parse_catalog
from adapter.errors import ConfigError

DEFAULT = yaml.safe_load(open(__import__("adapter").__path__[0] + "/catalog.yaml", encoding="utf-8"))


def broken(path: list[str], value: object) -> dict:
    doc = copy.deepcopy(DEFAULT)
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def test_embedded_catalog_has_the_documented_defaults() -> None:
    cat = load_catalog(None)
    (comp,) = cat.composites.values()
    # The mission's inputs and weights, the latency term on vLLM's ITL P99 (tests/calibrate/test_catalog_profiles.py
    # holds its targets to the safe point of each engine profile).
    assert [(t.metric, t.weight, t.target, t.idle, t.when_missing) for t in comp.terms] == [
        ("gpu_utilization_p90", 0.4, 100.0, 0.0, "omit_pod"),
        ("inference_queue_depth", 0.3, 8.0, 0.0, "omit_pod"),
        ("inference_itl_p99_seconds", 0.3, 0.049, 0.0099, "idle"),
    ]
    # The GPU term is the flat (presence) one the boost leaves alone: 0.4 of the composite.
    assert [t.flat for t in comp.terms] == [True, False, False]
    assert comp.flat_share == pytest.approx(0.4) and cat.boost_flat_share == comp.flat_share
    assert cat.metrics["gpu_utilization_p90"].query.startswith("quantile by (<<by>>) (0.9, DCGM_FI_DEV_GPU_UTIL")
    for latency in ("inference_latency_p99_seconds", "inference_ttft_p99_seconds", "inference_itl_p99_seconds"):
        assert cat.metrics[latency].window_seconds == 120
    assert "vllm:inter_token_latency_seconds_bucket" in cat.metrics["inference_itl_p99_seconds"].query
    assert "vllm:time_to_first_token_seconds_bucket" in cat.metrics["inference_ttft_p99_seconds"].query


@pytest.mark.parametrize(
    "path,value,needle",
    [
        (["metrics", "gpu_utilization_p90", "reduce"], "median", "metrics.gpu_utilization_p90.reduce"),
        (["metrics", "gpu_utilization_p90", "query"], "DCGM_FI_DEV_GPU_UTIL", "metrics.gpu_utilization_p90.query"),
        (["metrics", "inference_latency_p99_seconds", "window"], "2 minutes", "inference_latency_p99_seconds.window"),
        (["metrics", "inference_queue_depth", "objects"], "median", "metrics.inference_queue_depth.objects"),
        (["metrics", "inference_queue_depth", "query"], "x{<<matchers>>} <<oops>>", "unknown placeholder <<oops>>"),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "nope", "weight": 1, "target": 1}],
            "composites.llm_composite_load.terms[0].metric",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 0}],
            "terms[0].target",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 1, "idle": 1}],
            "terms[0].idle",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 1, "when_missing": "zero"}],
            "terms[0].when_missing",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 1, "floor": 0}],
            "terms[0]",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 1, "flat": "yes"}],
            "terms[0].flat",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [
                {"metric": "gpu_utilization_p90", "weight": 1, "target": 90, "flat": True},
                {"metric": "inference_queue_depth", "weight": 1, "target": 1, "flat": True},
            ],
            "every term is flat",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 1, "elasticity": "steep"}],
            "terms[0].elasticity",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 1, "elasticity": 0.1}],
            "between 0.25 and 4",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [{"metric": "inference_queue_depth", "weight": 1, "target": 1, "elasticity": 5}],
            "terms[0].elasticity",
        ),
        (
            ["composites", "llm_composite_load", "terms"],
            [
                {"metric": "gpu_utilization_p90", "weight": 1, "target": 90, "flat": True, "elasticity": 1},
                {"metric": "inference_queue_depth", "weight": 1, "target": 1},
            ],
            "a flat term rises only up to its target",
        ),
        (["layouts"], [{"pod": "bad-label", "namespace": "namespace"}], "layouts[0]"),
        (["cache_ttl_seconds"], -1, "cache_ttl_seconds"),
        (
            ["layouts"],
            [{"pod": "pod", "namespace": "namespace", "trust": {"job": "(unclosed"}}],
            "layouts[0].trust.job",
        ),
        (["layouts"], [{"pod": "pod", "namespace": "namespace", "trust": {"pod": "x"}}], "layouts[0].trust"),
        (["metrics", "inference_queue_depth", "layouts"], ["nope"], "metrics.inference_queue_depth.layouts"),
        (["metrics", "inference_queue_depth", "nonnegative"], "yes", "metrics.inference_queue_depth.nonnegative"),
        (["forecast", "max_workloads"], 0, "forecast.max_workloads"),
        (["forecast", "load_layouts"], ["nope"], "metrics.forecast_load.layouts"),
        (["forecast", "rise_quantile"], 1, "forecast.rise_quantile"),
        (["forecast", "rise_quantile"], -0.1, "forecast.rise_quantile"),
        (["forecast", "rise_quantile"], True, "forecast.rise_quantile"),
        (["forecast", "rise_within"], "7m", "forecast.rise_within"),  # not a whole number of 5m steps
        (["forecast", "rise_within"], "0s", "forecast.rise_within"),
        (["forecast", "rise_within"], "soon", "forecast.rise_within"),
        (["forecast", "also"], ["nope"], "forecast.also[0].metric"),
        (["forecast", "also"], ["llm_composite_load"], "not a composite"),
        (["forecast", "also"], ["inference_queue_depth", "inference_queue_depth"], "named twice"),
        (["forecast", "also"], "inference_queue_depth", "a list of metric names"),
        (["forecast", "also"], [{"metric": "inference_queue_depth", "like": "nope"}], "forecast.also[0].like"),
        (["forecast", "also"], [{"metric": "inference_queue_depth", "like": "llm_composite_load"}], "not a metric"),
        (["forecast", "also"], [{"metric": "inference_queue_depth", "as": "x"}], "unknown keys ['as']"),
    ],
)
def test_bad_entries_are_named(path: list[str], value: object, needle: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_catalog(broken(path, value))
    assert needle in str(err.value)


def test_a_term_s_elasticity_defaults_to_proportional_and_is_read_when_given() -> None:
    """A catalog without ``elasticity`` keeps the proportional rule (1); one that gives it has it per term."""
    comp = load_catalog(None).composites["llm_composite_load"]
    assert [t.elasticity for t in comp.terms] == [1.0, 1.0, 1.0] and comp.elasticities == {}
    terms = [
        {"metric": "gpu_utilization_p90", "weight": 0.4, "target": 100, "flat": True},
        {"metric": "inference_queue_depth", "weight": 0.3, "target": 8},
        {"metric": "inference_itl_p99_seconds", "weight": 0.3, "target": 0.06, "elasticity": 1.7},
    ]
    comp = parse_catalog(broken(["composites", "llm_composite_load", "terms"], terms)).composites["llm_composite_load"]
    assert [t.elasticity for t in comp.terms] == [1.0, 1.0, 1.7]
    assert comp.elasticities == {"inference_itl_p99_seconds": 1.7}


def test_the_forecast_also_boosts_the_slo_guards_metrics() -> None:
    """``forecast.also`` names the metrics served at the forecast's load as ``<name>_boosted``; the embedded
    catalog boosts the SLO guard's two P99s, the ITL one by the rule of the composite's ITL term (its idle and
    elasticity, followed when the term changes), the TTFT one in proportion; a boosted name may not shadow a
    catalog metric."""
    cat = load_catalog(None)
    assert cat.forecast is not None
    assert cat.forecast.also == (
        AlsoBoosted("inference_ttft_p99_guard_seconds"),
        AlsoBoosted("inference_itl_p99_guard_seconds", like="inference_itl_p99_seconds"),
    )
    assert cat.boost_rule("inference_ttft_p99_guard_seconds_boosted") == (0.0, 1.0)
    assert cat.boost_rule("inference_itl_p99_guard_seconds_boosted") == (0.0099, 1.0)
    terms = [
        {"metric": "gpu_utilization_p90", "weight": 0.4, "target": 100, "flat": True},
        {"metric": "inference_itl_p99_seconds", "weight": 0.6, "target": 0.06, "idle": 0.02, "elasticity": 1.7},
    ]
    tuned = parse_catalog(broken(["composites", "llm_composite_load", "terms"], terms))
    assert tuned.boost_rule("inference_itl_p99_guard_seconds_boosted") == (0.02, 1.7)
    # A composite without that term (pasted from calibrate on another histogram), or a `like` on a flat term:
    # the catalog still loads, and the metric is read in proportion.
    for other in (
        [{"metric": "inference_latency_p99_seconds", "weight": 1, "target": 9, "idle": 5}],
        [
            {"metric": "inference_itl_p99_seconds", "weight": 1, "target": 0.1, "flat": True},
            {"metric": "inference_queue_depth", "weight": 1, "target": 8},
        ],
    ):
        changed = parse_catalog(broken(["composites", "llm_composite_load", "terms"], other))
        assert changed.boost_rule("inference_itl_p99_guard_seconds_boosted") == (0.0, 1.0)
    assert cat.forecast.boosted_bases == {
        "llm_composite_load_boosted": "llm_composite_load",
        "inference_ttft_p99_guard_seconds_boosted": "inference_ttft_p99_guard_seconds",
        "inference_itl_p99_guard_seconds_boosted": "inference_itl_p99_guard_seconds",
    }
    assert cat.boosted_base("inference_itl_p99_guard_seconds_boosted") == "inference_itl_p99_guard_seconds"
    assert cat.boosted_base("inference_itl_p99_guard_seconds") is None
    assert set(cat.forecast.boosted_bases) < set(cat.forecast_names())
    doc = broken(["metrics", "inference_queue_depth_boosted"], {"query": "x{<<matchers>>}"})
    doc["forecast"]["also"] = ["inference_queue_depth"]
    with pytest.raises(ConfigError, match="'inference_queue_depth_boosted' is also the name of a metric"):
        parse_catalog(doc)


def test_unreadable_and_invalid_files(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read catalog"):
        load_catalog(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("metrics: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_catalog(bad)


def test_durations() -> None:
    assert duration_seconds("2m") == 120 and duration_seconds("1h30m") == 5400
    with pytest.raises(ValueError):
        duration_seconds("2 m")


def test_default_trust_model() -> None:
    """exported_* and pod_name layouts only from the GPU Operator's namespaces; engine series only by target labels."""
    cat = load_catalog(None)
    by_name = {lay.name: lay for lay in cat.layouts}
    assert by_name["dcgm_exported"].trusts({"namespace": "gpu-operator"})
    assert not by_name["dcgm_exported"].trusts({"namespace": "evil"})
    assert not by_name["dcgm_exported"].trusts({"namespace": "gpu-operator-evil"})  # anchored
    assert by_name["target"].trusts({})
    assert [lay.name for lay in cat.layouts_for(cat.metrics["inference_queue_depth"])] == ["target"]
    assert [lay.name for lay in cat.layouts_for(cat.metrics["gpu_utilization_p90"])] == [
        "dcgm_exported",
        "dcgm_old",
        "target",
    ]
    assert cat.forecast is not None and cat.forecast.load.layouts == ("target",) and cat.forecast.max_workloads == 500


def test_one_duration_rule_for_the_catalog_and_the_command_line() -> None:
    from adapter.catalog import duration_seconds
    from adapter.cli.series_input import CliError, parse_duration

    assert duration_seconds("1h30m") == 5400 and isinstance(duration_seconds("1h30m"), int)
    assert duration_seconds("250ms") == pytest.approx(0.25)
    with pytest.raises(ValueError):
        duration_seconds("1.5h")  # PromQL has no fractional durations
    assert duration_seconds("1.5h", fractional=True) == pytest.approx(5400.0)
    for text in ("1h30m", "1.5h", "5400", "90m"):
        assert parse_duration(text) == pytest.approx(5400.0)
    for bad in ("5x", "1h 30m", "h", "", "-5m", "0s"):
        with pytest.raises(CliError):
            parse_duration(bad)


def test_gpu_marks_a_metric_read_from_per_gpu_series() -> None:
    catalog = parse_catalog(copy.deepcopy(DEFAULT))
    assert {n for n, m in catalog.metrics.items() if m.gpu} == {
        "gpu_utilization_p90",
        "gpu_memory_used_p90",
        "gpu_mem_copy_utilization_p90",
        "gpu_power_usage_p90",
        "gpu_xid_errors",
    }
    doc = copy.deepcopy(DEFAULT)
    doc["metrics"]["inference_queue_depth"]["gpu"] = "yes"
    with pytest.raises(ConfigError, match=r"metrics\.inference_queue_depth\.gpu"):
        parse_catalog(doc)


def test_explain_asks_the_catalog_whether_a_metric_is_a_gpu_metric() -> None:
    from adapter.explain.build import gpu_metric
    from adapter.samples import Sample

    catalog = parse_catalog(copy.deepcopy(DEFAULT))
    assert gpu_metric("gpu_utilization_p90", catalog, {"gpu_utilization_p90": []})  # marked, even with no series
    assert not gpu_metric("inference_queue_depth", catalog, {"inference_queue_depth": []})
    per_gpu = [Sample({"pod": "a", "UUID": "GPU-1"}, 0.0, 1.0)]
    assert gpu_metric("inference_queue_depth", catalog, {"inference_queue_depth": per_gpu})  # its series say so
