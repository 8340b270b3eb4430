"""The one label-value escaping rule, checked against prometheus_client's own text-format parser."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapter.exposition import escape_label_value, label_pairs


@pytest.mark.parametrize("value", ["plain", 'a "quoted" one', "back\\slash", "line\nfeed", '\\"\n\\n', "", "ünï"])
def test_label_values_round_trip_through_the_prometheus_parser(value: str) -> None:
    text = f"m{{{label_pairs([('a', value), ('b', 'x')])}}} 1\n"
    (family,) = text_string_to_metric_families(text)
    (sample,) = family.samples
    assert sample.labels == {"a": value, "b": "x"}


def test_nothing_to_escape_returns_the_same_string() -> None:
    value = "vllm-0"
    assert escape_label_value(value) is value
    assert escape_label_value('say "hi"\\') == 'say \\"hi\\"\\\\'
