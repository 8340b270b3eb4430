"""The re-list cadence (prometheus-adapter's flags and defaults) and how a /api/v1/series answer is read.

``cmd/adapter/adapter.go``: ``--metrics-relist-interval`` defaults to 10m, ``--metrics-max-age`` to the
relist interval, and a max age below the interval is refused ("max age must not be less than relist interval").
"""

from __future__ import annotations

import json

import pytest

from adapter.errors import ConfigError, UpstreamError
from adapter.promadapter.config import parse_config
from adapter.promadapter.discovery import DEFAULT_RELIST_INTERVAL_S, RelistSettings, parse_series
from adapter.promadapter.registry import MAX_SERIES_NAME, by_series_query, discover
from adapter.query.results import ParseLimits, PartialAnswer, TooManySeries


def test_relist_defaults_are_prometheus_adapters() -> None:
    assert DEFAULT_RELIST_INTERVAL_S == 600.0
    assert RelistSettings().lookback_s == 600.0
    assert RelistSettings(interval_s=60).lookback_s == 60
    assert RelistSettings(interval_s=60, max_age_s=900).lookback_s == 900


def test_a_max_age_below_the_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match="--metrics-max-age must not be less than --metrics-relist-interval"):
        RelistSettings(interval_s=600, max_age_s=60)


def test_a_non_positive_interval_is_refused() -> None:
    with pytest.raises(ConfigError, match="--metrics-relist-interval must be positive"):
        RelistSettings(interval_s=0)


def body(doc: object) -> bytes:
    return json.dumps(doc).encode()


def test_a_series_answer_is_its_label_sets() -> None:
    data = [{"__name__": "up", "job": "a"}, {"__name__": "up", "job": "b"}]
    assert parse_series(body({"status": "success", "data": data})) == data


@pytest.mark.parametrize(
    ("doc", "error", "message"),
    [
        ({"status": "success", "data": [], "warnings": ["store down"]}, PartialAnswer, "partial"),
        ({"status": "success", "isPartial": True, "data": []}, PartialAnswer, "partial"),
        ({"status": "error", "error": "bad match[]"}, UpstreamError, "refused the series listing: bad match"),
        ({"status": "success", "data": {"result": []}}, UpstreamError, "not a list of label sets"),
        ({"status": "success", "data": [{"job": 1}]}, UpstreamError, "not a list of label sets"),
        ([], UpstreamError, "not an object"),
    ],
)
def test_what_is_not_a_complete_list_is_refused(doc: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_series(body(doc))


def test_not_json() -> None:
    with pytest.raises(UpstreamError, match="not JSON"):
        parse_series(b"<html>", 502)


def test_rules_sharing_a_series_query_share_one_listing() -> None:
    text = "rules:\n" + "".join(f"- {{seriesQuery: '{q}', metricsQuery: x}}\n" for q in ("a", "b", "a", "a"))
    groups = by_series_query(parse_config(text).rules)
    assert {q: [r.index for r in rules] for q, rules in groups.items()} == {"a": [0, 2, 3], "b": [1]}


def test_an_overlong_series_name_is_skipped() -> None:
    """Any pod can name its series; one made to be slow to match is not matched at all."""
    rule = "- {seriesQuery: q, metricsQuery: x, seriesFilters: [{isNot: '.*_total$'}]}"
    config = parse_config(f"externalRules:\n{rule}\n")
    long_name = "a" * (MAX_SERIES_NAME + 1)
    registry = discover(config, {"q": [{"__name__": long_name}, {"__name__": "a" * MAX_SERIES_NAME}]})
    assert sorted(registry.external) == ["a" * MAX_SERIES_NAME]


def test_a_listing_past_the_series_bound_is_refused() -> None:
    data = [{"__name__": "m", "pod": f"p{i}"} for i in range(3)]
    assert parse_series(body({"status": "success", "data": data}), 200, ParseLimits(max_series=3)) == data
    with pytest.raises(TooManySeries):
        parse_series(body({"status": "success", "data": data}), 200, ParseLimits(max_series=2))
