"""prometheus-adapter's own unit-test cases, ported as data (kubernetes-sigs/prometheus-adapter at 01919d0, Apache-2.0).

Each case's inputs and expected output are upstream's; the code under test is ours.

- ``pkg/naming/metrics_query_test.go`` ``TestBuildSelector``: 9 of 11 cases. Its mock resource converter names
  each resource's label after the resource (``resource``, ``namespaces``), reproduced here with overrides. Not
  ported: the two ``extraGroupBy`` cases (only metrics.k8s.io's resource provider passes extra group-by labels,
  and metrics.k8s.io is not served). Where upstream passes no object name and checks a field that does not
  depend on it (``.Series``, ``.GroupBy``, ``.GroupBySlice``), one name is passed: ``render_custom`` refuses an
  empty list (upstream's provider never builds such a query either: ``QueryForMetric`` returns not found).
- ``pkg/naming/metrics_query_test.go`` ``TestBuildExternalSelector``: 10 of 10 cases. Four pass ``groupBy`` /
  ``groupBySlice`` arguments of their own; upstream's provider always passes ``""`` and ``[]``
  (``metricNamer.QueryForExternalSeries``), so those four check the namespace part of upstream's expectation
  with the provider's real arguments (``"default []"`` for ``"default [foo bar]"``).
- ``pkg/naming/regex_matcher_test.go``: 3 of 3 (``is``, ``isNot``, both at once refused).
- ``pkg/custom-provider/series_registry_test.go``: 12 of 12 query cases and the ``ListAllMetrics`` case (17
  metrics), on ``cmd/config-gen/utils/default.go``'s ``DefaultConfig(1m, "kube_")`` and the test's RESTMapper
  (Pod, Service, Node, PersistentVolume, Namespace in core/v1; Ingress, Deployment in extensions/v1beta1).
  Upstream hands each rule its own series list; here each ``seriesQuery`` gets the union of its rules' lists
  and the filters split it, as the real lister does (the result is the same).
- ``pkg/custom-provider/provider_test.go``: its one case (``ListAllMetrics``, 10 metrics) on
  ``DefaultConfig(1m, "")`` with the fake client's answers keyed by series query.
- ``pkg/external-provider/periodic_metric_lister_test.go``: 2 of 2, on ``RulesProvider``'s re-list: a
  receiver is told after each update, and listing serves the last update's cached result without listing the
  backend again (and nothing before the first update).
- ``pkg/config``: has no tests.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from adapter.errors import ConfigError, InternalError
from adapter.labels import EVERYTHING, parse_selector
from adapter.promadapter.config import Rule, parse_config
from adapter.promadapter.metrics_query import render_custom, render_external
from adapter.promadapter.registry import CustomMetric, Registry, discover, normalize_request
from adapter.promadapter.resources import ApiResource, GroupResource, ResourceTable
from adapter.provider.promadapter import RulesProvider

# --- pkg/naming/metrics_query_test.go ---------------------------------------------------------------------------

# The mock converter: LabelForResource(gr) = gr.Resource, for {group, resource} and for namespaces.
MOCK_TABLE = ResourceTable(
    (ApiResource("group", "resource", "resource", "Resource"), ApiResource("", "namespaces", "namespace", "Namespace"))
)
RESOURCE = GroupResource("group", "resource")


def mock_rule(template: str, kind: str = "rules", namespaced: bool = True) -> Rule:
    ns = "" if namespaced else "\n    namespaced: false"
    text = f"""
{kind}:
- seriesQuery: 'foo'
  resources:
    overrides:
      resource: {{group: group, resource: resource}}
      namespaces: {{resource: namespaces}}{ns}
  metricsQuery: {template!r}
"""
    config = parse_config(text, MOCK_TABLE)
    return (config.rules or config.external_rules)[0]


BUILD_SELECTOR = [
    # (name, template, series, namespace, selector, names, expected)
    ("series", "series <<.Series>>", "foo", None, "", ["x"], "series foo"),
    ("multiple LabelMatchers values", "<<.LabelMatchers>>", "", None, "", ["bar", "baz"], 'resource=~"bar|baz"'),
    ("single LabelMatchers value", "<<.LabelMatchers>>", "", None, "", ["bar"], 'resource="bar"'),
    (
        "LabelMatchers with additional metrics filter",
        "<<.LabelMatchers>>",
        "",
        None,
        "metric1=value1",
        ["bar"],
        'metric1="value1",resource="bar"',
    ),
    ("single LabelValuesByName value", '<<index .LabelValuesByName "resource">>', "", None, "", ["bar"], "bar"),
    (
        "multiple LabelValuesByName values",
        '<<index .LabelValuesByName "resource">>',
        "",
        None,
        "",
        ["bar", "baz"],
        "bar|baz",
    ),
    (
        "multiple LabelValuesByName values with namespace",
        '<<index .LabelValuesByName "namespaces">> <<index .LabelValuesByName "resource">>',
        "",
        "default",
        "",
        ["bar", "baz"],
        "default bar|baz",
    ),
    ("single GroupBy value", "<<.GroupBy>>", "", None, "", ["x"], "resource"),
    ("single GroupBySlice value", "<<.GroupBySlice>>", "", None, "", ["x"], "[resource]"),
]


@pytest.mark.parametrize(
    ("template", "series", "namespace", "selector", "names", "expected"),
    [case[1:] for case in BUILD_SELECTOR],
    ids=[case[0] for case in BUILD_SELECTOR],
)
def test_build_selector(
    template: str, series: str, namespace: str | None, selector: str, names: list[str], expected: str
) -> None:
    rule = mock_rule(template)
    got = render_custom(rule, series, RESOURCE, namespace, names, parse_selector(selector))
    assert got == expected


BUILD_EXTERNAL = [
    # (name, template, series, namespace, namespaced, selector, expected)
    ("series", "series <<.Series>>", "foo", "", True, "", "series foo"),
    # With the provider's "" the query is empty, which upstream refuses ("empty query produced ...").
    ("single GroupBy value", "<<.GroupBy>>", "", "", True, "", None),
    ("multiple GroupBySlice values", "<<.GroupBySlice>>", "", "", True, "", "[]"),
    (
        "multiple GroupBySlice values with namespace",
        '<<index .LabelValuesByName "namespaces">> <<.GroupBySlice>>',
        "",
        "default",
        True,
        "",
        "default []",
    ),
    (
        "multiple GroupBySlice values with namespace disabled",
        '<<index .LabelValuesByName "namespaces">> <<.GroupBySlice>>',
        "",
        "default",
        False,
        "",
        " []",
    ),
    ("single LabelMatchers value", "<<.LabelMatchers>>", "", "", True, "foo=bar", 'foo="bar"'),
    (
        "single LabelMatchers value with namespace",
        "<<.LabelMatchers>>",
        "",
        "default",
        True,
        "foo=bar",
        'foo="bar",namespaces="default"',
    ),
    (
        "multiple LabelMatchers value",
        "<<.LabelMatchers>>",
        "",
        "",
        True,
        "foo=bar,qux in (bar,baz)",
        'foo="bar",qux=~"bar|baz"',
    ),
    ("single LabelValuesByName value", "<<.LabelValuesByName>>", "", "", True, "foo=bar", "map[foo:bar]"),
    (
        "single LabelValuesByName with multiple selectors",
        "<<.LabelValuesByName>>",
        "",
        "",
        True,
        "foo in (bar,baz)",
        "map[foo:bar|baz]",
    ),
]


@pytest.mark.parametrize(
    ("template", "series", "namespace", "namespaced", "selector", "expected"),
    [case[1:] for case in BUILD_EXTERNAL],
    ids=[case[0] for case in BUILD_EXTERNAL],
)
def test_build_external_selector(
    template: str, series: str, namespace: str, namespaced: bool, selector: str, expected: str | None
) -> None:
    rule = mock_rule(template, kind="externalRules", namespaced=namespaced)
    if expected is None:
        with pytest.raises(InternalError, match="empty query produced by metrics query template"):
            render_external(rule, series, namespace, parse_selector(selector))
        return
    got = render_external(rule, series, namespace, parse_selector(selector))
    assert got == expected


# --- pkg/naming/regex_matcher_test.go ---------------------------------------------------------------------------


def filter_rule(filters: str) -> Rule:
    text = f"rules:\n- seriesQuery: 'x'\n  seriesFilters: {filters}\n  metricsQuery: 'x'\n"
    return parse_config(text).rules[0]


def test_re_matcher_is() -> None:
    (f,) = filter_rule('[{is: "my_.*"}]').series_filters
    assert f.matches("my_label") and not f.matches("your_label")


def test_re_matcher_is_not() -> None:
    (f,) = filter_rule('[{isNot: "my_.*"}]').series_filters
    assert not f.matches("my_label") and f.matches("your_label")


def test_enforces_is_or_is_not_but_not_both() -> None:
    with pytest.raises(ConfigError, match=r"rules\[0\].*seriesFilters\[0\]: cannot have both"):
        filter_rule('[{is: "my_.*", isNot: "your_.*"}]')


# --- cmd/config-gen/utils/default.go DefaultConfig(rateInterval, labelPrefix), as the YAML it amounts to ----------


def default_config(prefix: str, rate: str = "1m") -> str:
    container = '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
    normal = f'{{{prefix}namespace!="",__name__!~"^container_.*"}}'
    over = "resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}"
    tmpl = f'resources: {{template: "{prefix}<<.Resource>>"}}'
    return f"""
rules:
- seriesQuery: '{container}'
  {over}
  name: {{matches: "^container_(.*)_seconds_total$"}}
  metricsQuery: 'sum(rate(<<.Series>>{{<<.LabelMatchers>>,container!="POD"}}[{rate}])) by (<<.GroupBy>>)'
- seriesQuery: '{container}'
  seriesFilters: [{{isNot: "^container_.*_seconds_total$"}}]
  {over}
  name: {{matches: "^container_(.*)_total$"}}
  metricsQuery: 'sum(rate(<<.Series>>{{<<.LabelMatchers>>,container!="POD"}}[{rate}])) by (<<.GroupBy>>)'
- seriesQuery: '{container}'
  seriesFilters: [{{isNot: "^container_.*_total$"}}]
  {over}
  name: {{matches: "^container_(.*)$"}}
  metricsQuery: 'sum(<<.Series>>{{<<.LabelMatchers>>,container!="POD"}}) by (<<.GroupBy>>)'
- seriesQuery: '{normal}'
  seriesFilters: [{{isNot: ".*_total$"}}]
  {tmpl}
  metricsQuery: 'sum(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)'
- seriesQuery: '{normal}'
  seriesFilters: [{{isNot: ".*_seconds_total"}}]
  name: {{matches: "^(.*)_total$"}}
  {tmpl}
  metricsQuery: 'sum(rate(<<.Series>>{{<<.LabelMatchers>>}}[{rate}])) by (<<.GroupBy>>)'
- seriesQuery: '{normal}'
  name: {{matches: "^(.*)_seconds_total$"}}
  {tmpl}
  metricsQuery: 'sum(rate(<<.Series>>{{<<.LabelMatchers>>}}[{rate}])) by (<<.GroupBy>>)'
"""


# series_registry_test.go restMapper(): core/v1 Pod, Service (namespaced), Node, PersistentVolume, Namespace
# (root); extensions/v1beta1 Ingress, Deployment (namespaced). Plurals as DefaultRESTMapper.Add guesses them.
REGISTRY_TABLE = ResourceTable(
    (
        ApiResource("", "pods", "pod", "Pod"),
        ApiResource("", "services", "service", "Service"),
        ApiResource("extensions", "ingresses", "ingress", "Ingress"),
        ApiResource("extensions", "deployments", "deployment", "Deployment"),
        ApiResource("", "nodes", "node", "Node"),
        ApiResource("", "persistentvolumes", "persistentvolume", "PersistentVolume"),
        ApiResource("", "namespaces", "namespace", "Namespace"),
    )
)


def s(name: str, **labels: str) -> dict[str, str]:
    return {"__name__": name, **labels}


CONTAINER = '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
# seriesRegistryTestSeries, the container slices (rules 0-2) and the kube_ slices (rules 3-5).
REGISTRY_SERIES = {
    CONTAINER: [
        s("container_some_time_seconds_total", pod="somepod", namespace="somens", container="somecont"),
        s("container_some_count_total", pod="somepod", namespace="somens", container="somecont"),
        s("container_some_usage", pod="somepod", namespace="somens", container="somecont"),
    ],
    '{kube_namespace!="",__name__!~"^container_.*"}': [
        s("node_gigawatts", kube_node="somenode"),
        s("service_proxy_packets", kube_service="somesvc", kube_namespace="somens"),
        s(
            "ingress_hits_total",
            kube_ingress="someingress",
            kube_service="somesvc",
            kube_pod="backend1",
            kube_namespace="somens",
        ),
        s(
            "ingress_hits_total",
            kube_ingress="someingress",
            kube_service="somesvc",
            kube_pod="backend2",
            kube_namespace="somens",
        ),
        s("volume_claims_total", kube_persistentvolume="somepv"),
        s("work_queue_wait_seconds_total", kube_deployment="somedep", kube_namespace="somens"),
        s("node_fan_seconds_total", kube_node="somenode"),
    ],
}

REGISTRY_QUERIES = [
    # (title, group, resource, metric, namespace, names, selector, expected query)
    ("container metrics gauge / multiple resource names", "", "pods", "some_usage", "somens",
     ["somepod1", "somepod2"], "",
     'sum(container_some_usage{namespace="somens",pod=~"somepod1|somepod2",container!="POD"}) by (pod)'),
    ("container metrics counter", "", "pods", "some_count", "somens", ["somepod1", "somepod2"], "",
     'sum(rate(container_some_count_total{namespace="somens",pod=~"somepod1|somepod2",container!="POD"}[1m]))'
     " by (pod)"),
    ("container metrics seconds counter", "", "pods", "some_time", "somens", ["somepod1", "somepod2"], "",
     'sum(rate(container_some_time_seconds_total{namespace="somens",pod=~"somepod1|somepod2",container!="POD"}[1m]))'
     " by (pod)"),
    ("namespaced metrics counter / multidimensional (service)", "", "service", "ingress_hits", "somens",
     ["somesvc"], "",
     'sum(rate(ingress_hits_total{kube_namespace="somens",kube_service="somesvc"}[1m])) by (kube_service)'),
    ("namespaced metrics counter / multidimensional (service) / selection using labels", "", "service",
     "ingress_hits", "somens", ["somesvc"], "param1=value1",
     'sum(rate(ingress_hits_total{param1="value1",kube_namespace="somens",kube_service="somesvc"}[1m]))'
     " by (kube_service)"),
    ("namespaced metrics counter / multidimensional (ingress)", "extensions", "ingress", "ingress_hits", "somens",
     ["someingress"], "",
     'sum(rate(ingress_hits_total{kube_namespace="somens",kube_ingress="someingress"}[1m])) by (kube_ingress)'),
    ("namespaced metrics counter / multidimensional (pod)", "", "pod", "ingress_hits", "somens", ["somepod"], "",
     'sum(rate(ingress_hits_total{kube_namespace="somens",kube_pod="somepod"}[1m])) by (kube_pod)'),
    ("namespaced metrics gauge", "", "service", "service_proxy_packets", "somens", ["somesvc"], "",
     'sum(service_proxy_packets{kube_namespace="somens",kube_service="somesvc"}) by (kube_service)'),
    ("namespaced metrics seconds counter", "extensions", "deployment", "work_queue_wait", "somens", ["somedep"], "",
     'sum(rate(work_queue_wait_seconds_total{kube_namespace="somens",kube_deployment="somedep"}[1m]))'
     " by (kube_deployment)"),
    ("root scoped metrics gauge", "", "node", "node_gigawatts", None, ["somenode"], "",
     'sum(node_gigawatts{kube_node="somenode"}) by (kube_node)'),
    ("root scoped metrics counter", "", "persistentvolume", "volume_claims", None, ["somepv"], "",
     'sum(rate(volume_claims_total{kube_persistentvolume="somepv"}[1m])) by (kube_persistentvolume)'),
    ("root scoped metrics seconds counter", "", "node", "node_fan", None, ["somenode"], "",
     'sum(rate(node_fan_seconds_total{kube_node="somenode"}[1m])) by (kube_node)'),
]  # fmt: skip


@pytest.fixture(scope="module")
def series_registry() -> Registry:
    return discover(parse_config(default_config("kube_"), REGISTRY_TABLE), REGISTRY_SERIES)


@pytest.mark.parametrize(
    ("group", "resource", "metric", "namespace", "names", "selector", "expected"),
    [case[1:] for case in REGISTRY_QUERIES],
    ids=[case[0] for case in REGISTRY_QUERIES],
)
def test_series_registry_builds_the_query(
    series_registry: Registry,
    group: str,
    resource: str,
    metric: str,
    namespace: str | None,
    names: list[str],
    selector: str,
    expected: str,
) -> None:
    normalized = REGISTRY_TABLE.normalize(group, resource)
    assert normalized is not None
    found = series_registry.find_custom(normalized, metric)
    assert found is not None, f"metric {metric} should be available on {normalized}"
    _, source = found
    got = render_custom(source.rule, source.series, normalized, namespace, names, parse_selector(selector))
    assert got == expected


def cm(resource: str, metric: str, namespaced: bool, group: str = "") -> CustomMetric:
    return CustomMetric(GroupResource(group, resource), metric, namespaced)


def test_series_registry_lists_all_metrics(series_registry: Registry) -> None:
    assert set(series_registry.custom_metrics()) == {
        cm("pods", "some_count", True),
        cm("namespaces", "some_count", False),
        cm("pods", "some_time", True),
        cm("namespaces", "some_time", False),
        cm("pods", "some_usage", True),
        cm("namespaces", "some_usage", False),
        cm("services", "ingress_hits", True),
        cm("ingresses", "ingress_hits", True, "extensions"),
        cm("pods", "ingress_hits", True),
        cm("namespaces", "ingress_hits", False),
        cm("services", "service_proxy_packets", True),
        cm("namespaces", "service_proxy_packets", False),
        cm("deployments", "work_queue_wait", True, "extensions"),
        cm("namespaces", "work_queue_wait", False),
        cm("nodes", "node_gigawatts", False),
        cm("persistentvolumes", "volume_claims", False),
        cm("nodes", "node_fan", False),
    }


# --- pkg/custom-provider/provider_test.go -----------------------------------------------------------------------

PROVIDER_SERIES = {
    CONTAINER: [s("container_some_usage", pod="somepod", namespace="somens", container="somecont")],
    '{namespace!="",__name__!~"^container_.*"}': [
        s("ingress_hits_total", ingress="someingress", service="somesvc", pod="backend1", namespace="somens"),
        s("ingress_hits_total", ingress="someingress", service="somesvc", pod="backend2", namespace="somens"),
        s("service_proxy_packets", service="somesvc", namespace="somens"),
        s("work_queue_wait_seconds_total", deployment="somedep", namespace="somens"),
    ],
}


def test_provider_lists_all_metrics() -> None:
    registry = discover(parse_config(default_config(""), REGISTRY_TABLE), PROVIDER_SERIES)
    assert set(registry.custom_metrics()) == {
        cm("services", "ingress_hits", True),
        cm("ingresses", "ingress_hits", True, "extensions"),
        cm("pods", "ingress_hits", True),
        cm("namespaces", "ingress_hits", False),
        cm("services", "service_proxy_packets", True),
        cm("namespaces", "service_proxy_packets", False),
        cm("deployments", "work_queue_wait", True, "extensions"),
        cm("namespaces", "work_queue_wait", False),
        cm("namespaces", "some_usage", False),
        cm("pods", "some_usage", True),
    }


def test_a_request_names_its_resource_as_a_url_does() -> None:
    """QueryForMetric normalizes the requested group-resource first (``service`` -> ``services``)."""
    assert normalize_request(REGISTRY_TABLE, "service") == GroupResource("", "services")
    assert normalize_request(REGISTRY_TABLE, "deployments.extensions") == GroupResource("extensions", "deployments")
    assert normalize_request(REGISTRY_TABLE, "deployments.apps") is None


def test_no_selector_is_everything() -> None:
    assert parse_selector("") is EVERYTHING


# --- pkg/external-provider/periodic_metric_lister_test.go -------------------------------------------------------

# Its fakeLister answers one series named ``a_series`` and counts its calls; ``updateMetrics`` is one re-list
# (here ``RulesProvider.relist_once``), ``ListAllMetrics`` of the periodic lister the cached discovery (here
# ``list_external``), ``AddNotificationReceiver`` a callback told after each update (here ``on_listed``).
A_SERIES_RULE = "externalRules:\n- {seriesQuery: 'a_series', metricsQuery: 'sum(<<.Series>>)'}\n"


class CountingLister:
    """The backend's ``/api/v1/series`` as the fakeLister: one series, ``calls`` counted."""

    def __init__(self) -> None:
        self.calls = 0

    async def series(self, match: str, start: float, parse: Callable[[bytes], object]) -> object:
        self.calls += 1
        return parse(json.dumps({"status": "success", "data": [{"__name__": "a_series"}]}).encode())


def lister() -> tuple[RulesProvider, CountingLister]:
    fake = CountingLister()
    return RulesProvider(parse_config(A_SERIES_RULE), fake, None, lambda: 1e9), fake  # type: ignore[arg-type]


def test_when_new_metrics_available_callback_is_invoked() -> None:
    rules, _ = lister()
    invoked: list[bool] = []
    rules.on_listed = lambda: invoked.append(True)
    asyncio.run(rules.relist_once())
    assert invoked == [True]


def test_when_listing_metrics_returns_cached_values() -> None:
    rules, fake = lister()
    # Not listed yet: no results, and the inner lister not called.
    assert rules.list_external() == []
    assert fake.calls == 0
    # The update interval passes: one call to the inner lister.
    asyncio.run(rules.relist_once())
    assert fake.calls == 1
    # Listing now returns the cached values, without calling the inner lister again.
    assert rules.list_external() == ["a_series"]
    assert rules.list_external() == ["a_series"]
    assert fake.calls == 1
