"""PromQL building: request data can only ever be string-literal content, never query structure."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.catalog import load_catalog
from adapter.errors import BadRequest
from adapter.labels import EVERYTHING, parse_selector
from adapter.query.promql import Scope, any_of, quote, regex_quote, render
from tests.support.promql import split_literals

CATALOG = load_catalog(None)


@given(st.text())
def test_quote_round_trips_any_text(value: str) -> None:
    skeleton, literals = split_literals(quote(value))
    assert skeleton == '"S"'
    clean = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in value)
    assert literals == [clean]


@given(st.lists(st.text(min_size=1), min_size=1, max_size=5))
def test_regex_alternation_matches_only_the_values(values: list[str]) -> None:
    pattern = re.compile(f"^(?:{any_of(values)})$", re.DOTALL)
    for v in values:
        assert pattern.match(v)
    assert not pattern.match("".join(values) + "\x00extra")


@settings(max_examples=300)
@given(ns=st.text(min_size=1), pods=st.lists(st.text(min_size=1), min_size=1, max_size=4))
def test_namespace_and_pod_names_cannot_change_query_structure(ns: str, pods: list[str]) -> None:
    metric = CATALOG.metrics["inference_latency_p99_seconds"]
    hostile = render(metric, CATALOG, Scope(ns, tuple(pods)), EVERYTHING)
    benign = render(metric, CATALOG, Scope("ns", tuple(f"p{i}" for i in range(len(pods)))), EVERYTHING)
    assert split_literals(hostile)[0] == split_literals(benign)[0]


def test_classic_injection_stays_inside_the_literal() -> None:
    evil = 'x"} or vector(1) or up{a="'
    q = render(CATALOG.metrics["inference_queue_depth"], CATALOG, Scope(evil, ("p",)), EVERYTHING)
    skeleton, literals = split_literals(q)
    assert "vector(1)" not in skeleton
    assert evil in literals


def test_metric_selector_becomes_matchers() -> None:
    sel = parse_selector("engine in (0,1),model_name!=m,!gone,present")
    q = render(CATALOG.metrics["inference_queue_depth"], CATALOG, Scope("ns", ("p",)), sel)
    first = q.split(" or ")[0]
    assert 'engine=~"0|1"' in first and 'model_name!="m"' in first
    assert 'gone=""' in first and 'present!=""' in first


def test_metric_selector_rejects_what_promql_cannot_express() -> None:
    with pytest.raises(BadRequest):
        render(CATALOG.metrics["inference_queue_depth"], CATALOG, Scope("ns", ("p",)), parse_selector("a>1"))
    with pytest.raises(BadRequest):
        render(
            CATALOG.metrics["inference_queue_depth"],
            CATALOG,
            Scope("ns", ("p",)),
            parse_selector("app.kubernetes.io/name=x"),
        )


def test_every_layout_is_queried_in_one_expression() -> None:
    q = render(CATALOG.metrics["gpu_utilization_p90"], CATALOG, Scope("llm", ("a", "b.c")), EVERYTHING)
    assert q.count(" or ") == len(CATALOG.layouts) - 1
    assert 'exported_namespace="llm",exported_pod=~"a|b\\\\.c"' in q
    assert 'pod_namespace="llm",pod_name=~"a|b\\\\.c"' in q
    assert regex_quote("a.b*") == "a\\.b\\*"
