"""The Go-template subset as real rules use it, and request values reaching PromQL only as literal content.

Template forms seen in published configurations (``index .LabelValuesByName "pod"``, a ``range`` over
``.GroupBySlice`` joining with ``if $i``, trim markers) render as Go's ``text/template`` renders them.
Object names and selector values are escaped (``adapter/query/promql.py``): whatever they hold, the query's
structure is the template's.
"""

from __future__ import annotations

import re

import pytest

from adapter.labels import EVERYTHING, parse_selector
from adapter.promadapter.config import QUERY_FIELDS, parse_config
from adapter.promadapter.goregexp import compile_go, expand
from adapter.promadapter.gotemplate import Struct, TemplateError, parse_template
from adapter.promadapter.metrics_query import render_custom
from adapter.promadapter.resources import GroupResource
from tests.support.promql import split_literals

PODS = GroupResource("", "pods")
DATA = Struct(
    Series="s", LabelMatchers='a="b"', GroupBy="pod", GroupBySlice=["pod", "x"], LabelValuesByName={"pod": "p1|p2"}
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('pod=~"<<index .LabelValuesByName "pod">>"', 'pod=~"p1|p2"'),
        ("by (<<- range $i, $v := .GroupBySlice >><<if $i>>,<<end>><<$v>><<- end>>)", "by (pod,x)"),
        ("<<.LabelValuesByName.pod>> <<.LabelValuesByName.nope>>", "p1|p2 <no value>"),
        ('<<index .LabelValuesByName "nope">>|', "|"),
        ('<<if eq .GroupBy "namespace">>ns<<else if eq .GroupBy "pod">>pod<<else>>other<<end>>', "pod"),
        ("<<with .LabelValuesByName>><<.pod>><<end>>", "p1|p2"),
        ('<<printf "%s{%s}" .Series .LabelMatchers>>', 's{a="b"}'),
        ('<<len .GroupBySlice>> <<not .Series>> <<and .Series .GroupBy>> <<or "" .GroupBy>>', "2 false pod pod"),
        ("a <<- /* a comment */ ->> b", "ab"),
        ("<<range .GroupBySlice>><<.>>;<<else>>none<<end>>", "pod;x;"),
    ],
)
def test_go_template_forms(source: str, expected: str) -> None:
    assert parse_template(source, QUERY_FIELDS).render(DATA) == expected


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ('<<join "," .GroupBySlice>>', 'function "join" not defined'),
        ('<<.GroupBySlice | join ",">>', 'function "join" not defined'),
        ("<<html .Series>>", "does not implement"),
        ('<<template "x">>', "not supported"),
        ("<<$nope>>", "undefined variable"),
        ("<<range .Series>><<end>>", "range can't iterate"),
        ("<<end>>", "unexpected <<end>>"),
        ("<<if .Series>>x<<else>>y<<else>>z<<end>>", "expected end"),
    ],
)
def test_what_go_would_refuse_is_refused_when_parsed(source: str, message: str) -> None:
    with pytest.raises(TemplateError, match=message):
        parse_template(source, QUERY_FIELDS)


def test_an_execution_error_is_a_template_error() -> None:
    with pytest.raises(TemplateError, match="index out of range"):
        parse_template("<<index .GroupBySlice 5>>", QUERY_FIELDS).render(DATA)


@pytest.mark.parametrize(
    ("template", "name", "expected"),
    [
        ("${1}_per_second", "http_requests_total", "http_requests_per_second"),
        ("$1_per_second", "http_requests_total", ""),  # Go reads the group name "1_per_second"
        ("$0", "http_requests_total", "http_requests_total"),
        ("$$1", "http_requests_total", "$1"),
        ("${x}", "http_requests_total", ""),
        ("a$", "http_requests_total", "a$"),
    ],
)
def test_name_as_expands_like_go(template: str, name: str, expected: str) -> None:
    m = compile_go("^(.*)_total$").search(name)
    assert m is not None
    assert expand(template, m) == expected


def test_re2_classes_are_ascii_and_posix_classes_work() -> None:
    assert compile_go(r"^\w+$").search("caf\u00e9") is None
    assert compile_go("^[[:alpha:]]+_[[:digit:]]+$").search("abc_12")


RULE = parse_config(
    """rules:
- seriesQuery: 'x'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) + on() group_left
    count(<<.Series>>{pod=~"<<index .LabelValuesByName "pod">>"})'
"""
).rules[0]


@pytest.mark.parametrize(
    "names",
    [["a.b", "c"], ['x"} or vector(1) #', "y"], ["p\\", 'q"'], ["(a|b)*", "[c]"]],
)
def test_object_names_are_only_ever_literal_content(names: list[str]) -> None:
    """The API layer admits only DNS-1123 names; even past it, a name cannot leave its literal."""
    query = render_custom(RULE, "m", PODS, "ns", names, EVERYTHING)
    skeleton, literals = split_literals(query)
    assert skeleton == 'sum(m{namespace="S",pod=~"S"}) by (pod) + on() group_left count(m{pod=~"S"})'
    assert literals[0] == "ns"
    # Both regex literals match exactly the requested names, each name as itself.
    for literal in literals[1:]:
        pattern = re.compile(f"^(?:{literal})$")
        assert all(pattern.match(n) for n in names)
        assert not pattern.match(names[0] + "x") and not pattern.match("zz")


def test_selector_values_are_escaped_too() -> None:
    query = render_custom(RULE, "m", PODS, "ns", ["p"], parse_selector("verb in (GET,a.b)"))
    assert query.startswith('sum(m{verb=~"GET|a\\\\.b",namespace="ns",pod="p"})')
