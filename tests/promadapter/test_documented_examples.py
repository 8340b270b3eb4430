"""prometheus-adapter's documented examples and its Helm chart's default rules, loaded unchanged.

Sources (Apache-2.0; ``tests/promadapter/data/SOURCES.md`` says where each file comes from):
kubernetes-sigs/prometheus-adapter at 01919d0 ``docs/config.md``, ``docs/config-walkthrough.md``,
``docs/externalmetrics.md``, ``docs/sample-config.yaml``; prometheus-community/helm-charts at cf408a2
``charts/prometheus-adapter/templates/configmap.yaml`` rendered with the chart's default values (5.3.0).
The PromQL expected is what those documents say the rules render, with the label-matcher order of
``pkg/naming/metrics_query.go`` (namespace before the resource's label).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.errors import ConfigError, NotFound
from adapter.labels import EVERYTHING, parse_selector
from adapter.promadapter.config import parse_config
from adapter.promadapter.metrics_query import render_custom, render_external
from adapter.promadapter.registry import CustomMetric, discover
from adapter.promadapter.resources import NAMESPACES, GroupResource

DATA = Path(__file__).parent / "data"
PODS = GroupResource("", "pods")


def test_sample_config_as_published_is_not_yaml_as_upstream_finds() -> None:
    """docs/sample-config.yaml double-quotes queries that contain double quotes; prometheus-adapter refuses it
    too ("yaml: line 54: did not find expected key", kubernetes-sigs/prometheus-adapter#697)."""
    with pytest.raises(ConfigError, match="not YAML"):
        parse_config((DATA / "sample-config.yaml").read_text())


def test_sample_config_with_its_quoting_fixed_loads() -> None:
    """The same file with the three metricsQuery values single-quoted (the fix of #698, nothing else)."""
    config = parse_config((DATA / "sample-config-quoted.yaml").read_text())
    assert [r.name_as for r in config.rules] == ["$1", "$1", "$1", "cheesy_goodness"]
    assert [r.namespaced for r in config.external_rules] == [True, False]
    series = {
        '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}': [
            {"__name__": "container_cpu_usage_seconds_total", "namespace": "ns", "pod": "p", "container": "c"},
        ],
        '{__name__=~"^container_.*_total",container!="POD",namespace!="",pod!=""}': [
            {"__name__": "container_cpu_usage_seconds_total", "namespace": "ns", "pod": "p", "container": "c"},
            {"__name__": "container_network_receive_bytes_total", "namespace": "ns", "pod": "p"},
        ],
        '{namespace!="",__name__!="^container_.*"}': [
            {"__name__": "http_requests_total", "namespace": "ns", "pod": "p", "service": "web"},
        ],
        'cheddar{sharp="true"}': [{"__name__": "cheddar", "sharp": "true", "brand": "tillamook"}],
        '{__name__="queue_consumer_lag",name!=""}': [{"__name__": "queue_consumer_lag", "name": "q1"}],
        '{__name__="queue_depth",topic!=""}': [{"__name__": "queue_depth", "topic": "t"}],
    }
    registry = discover(config, series)
    assert [e["name"] for e in registry.resource_list_entries()] == [
        "brand.cheese.io/cheesy_goodness",
        "namespaces/cpu_usage",
        "namespaces/http_requests",
        "namespaces/network_receive_bytes",
        "pods/cpu_usage",
        "pods/http_requests",
        "pods/network_receive_bytes",
        "services/http_requests",
    ]
    assert [e["name"] for e in registry.external_list_entries()] == ["queue_consumer_lag", "queue_depth"]
    # The rule maps no label to namespaces, so a request in a namespace finds no query: prometheus-adapter's
    # LabelForResource(namespaces) fails and QueryForMetric answers "not found", although this query uses none.
    _, cheese = registry.find_custom(GroupResource("cheese.io", "brand"), "cheesy_goodness")  # type: ignore[misc]
    with pytest.raises(NotFound, match=r"rules\[3\].*no label names namespaces"):
        render_custom(cheese.rule, cheese.series, GroupResource("cheese.io", "brand"), "ns", ["x"], EVERYTHING)


WALKTHROUGH = """
rules:
- seriesQuery: 'http_requests_total{kubernetes_namespace!="",kubernetes_pod_name!=""}'
  resources:
    overrides:
      kubernetes_namespace: {resource: "namespace"}
      kubernetes_pod_name: {resource: "pod"}
  name:
    matches: "^(.*)_total"
    as: "${1}_per_second"
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
"""


def test_config_walkthrough() -> None:
    """docs/config-walkthrough.md's final rule. Its discovery document names ``pods/http_requests_total``; the
    rule's ``as`` makes ``http_requests_per_second`` (the document's error: kubernetes-sigs/prometheus-adapter#679,
    fixed by #714), which is also the name its own request URL then uses."""
    config = parse_config(WALKTHROUGH)
    series = {
        config.rules[0].series_query: [
            {
                "__name__": "http_requests_total",
                "method": "GET",
                "kubernetes_namespace": "production",
                "kubernetes_pod_name": "frontend-server-abcd-0123",
            }
        ]
    }
    registry = discover(config, series)
    assert registry.resource_list_entries() == [
        {
            "name": "namespaces/http_requests_per_second",
            "singularName": "",
            "namespaced": False,
            "kind": "MetricValueList",
            "verbs": ["get"],
        },
        {
            "name": "pods/http_requests_per_second",
            "singularName": "",
            "namespaced": True,
            "kind": "MetricValueList",
            "verbs": ["get"],
        },
    ]
    _, source = registry.find_custom(PODS, "http_requests_per_second")  # type: ignore[misc]
    names = ["frontend-server-abcd-0123", "frontend-server-abcd-4567"]
    assert render_custom(source.rule, source.series, PODS, "production", names, EVERYTHING) == (
        'sum(rate(http_requests_total{kubernetes_namespace="production",'
        'kubernetes_pod_name=~"frontend-server-abcd-0123|frontend-server-abcd-4567"}[2m])) by (kubernetes_pod_name)'
    )


def test_config_md_basic_rule_fails_on_its_quoting_like_the_sample() -> None:
    """docs/config.md's first example has the same double quotes inside double quotes."""
    text = """rules:
- seriesQuery: '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
  resources:
    overrides:
      namespace: {resource: "namespace"}
      pod: {resource: "pod"}
  name:
    matches: "^container_(.*)_seconds_total$"
  metricsQuery: "sum(rate(<<.Series>>{<<.LabelMatchers>>,container!="POD"}[2m])) by (<<.GroupBy>>)"
"""
    with pytest.raises(ConfigError, match="not YAML"):
        parse_config(text)


def test_config_md_field_example() -> None:
    """config.md "Querying": ``pods/http_request_per_second`` for pod1 and pod2 in somens gives
    ``LabelMatchers`` for the two pods and the namespace, and ``GroupBy`` ``pod``."""
    config = parse_config(
        """rules:
- seriesQuery: '{namespace!=""}'
  resources: {template: "<<.Resource>>"}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: '<<.Series>> | <<.LabelMatchers>> | <<.GroupBy>> | <<.GroupBySlice>> | <<.LabelValuesByName>>'
"""
    )
    rule = config.rules[0]
    got = render_custom(rule, "http_requests_total", PODS, "somens", ["pod1", "pod2"], EVERYTHING)
    assert got == (
        'http_requests_total | namespace="somens",pod=~"pod1|pod2" | pod | [pod] | map[namespace:somens pod:pod1|pod2]'
    )


EXTERNAL = """
externalRules:
- seriesQuery: '{__name__="queue_consumer_lag",name!=""}'
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (name)
  resources:
    overrides: { namespace: {resource: "namespace"} }
- seriesQuery: '{__name__="queue_depth",name!=""}'
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (name)
  resources:
    namespaced: false
"""


def test_externalmetrics_md() -> None:
    """docs/externalmetrics.md: the HPA's namespace is added to ``.LabelMatchers`` unless ``namespaced: false``;
    the metricSelector's matchers come first."""
    config = parse_config(EXTERNAL)
    lag, depth = config.external_rules
    selector = parse_selector("name=my-sample-queue")
    assert render_external(lag, "queue_consumer_lag", "default", selector) == (
        'sum(queue_consumer_lag{name="my-sample-queue",namespace="default"}) by (name)'
    )
    queue = parse_selector("namespace=queue,name=my-sample-queue")
    assert render_external(depth, "queue_depth", "default", queue) == (
        'sum(queue_depth{name="my-sample-queue",namespace="queue"}) by (name)'
    )


# --- the Helm chart's default rules ---------------------------------------------------------------------------

HELM = (DATA / "helm-chart-default-config.yaml").read_text()
CONTAINER_Q = '{__name__=~"^container_.*",container!="POD",namespace!="",pod!=""}'
OTHER_Q = '{namespace!="",__name__!~"^container_.*"}'
HELM_SERIES = {
    CONTAINER_Q: [
        {"__name__": "container_cpu_usage_seconds_total", "namespace": "ns", "pod": "web-1", "container": "app"},
        {"__name__": "container_network_receive_bytes_total", "namespace": "ns", "pod": "web-1"},
        {"__name__": "container_memory_working_set_bytes", "namespace": "ns", "pod": "web-1", "container": "app"},
    ],
    OTHER_Q: [
        {"__name__": "http_requests_total", "namespace": "ns", "pod": "web-1", "service": "web", "job": "web"},
        {"__name__": "queue_depth", "namespace": "ns", "deployment": "worker", "instance": "10.0.0.1:9100"},
        {"__name__": "request_duration_seconds_total", "namespace": "ns", "pod": "web-1"},
    ],
}


def test_helm_default_rules_share_two_discovery_queries() -> None:
    config = parse_config(HELM)
    assert config.warnings == ()
    assert [r.series_query for r in config.rules] == [CONTAINER_Q] * 3 + [OTHER_Q] * 3


def test_helm_default_rules_discover_what_prometheus_adapter_lists() -> None:
    """Each label the template ``<<.Resource>>`` resolves names a resource: ``job`` is ``jobs.batch`` (as in
    prometheus-adapter, whose RESTMapper resolves it alike), ``instance`` and ``container`` name none."""
    registry = discover(parse_config(HELM), HELM_SERIES)
    assert sorted(m.name for m in registry.custom_metrics()) == [
        "deployments.apps/queue_depth",
        "jobs.batch/http_requests",
        "namespaces/cpu_usage",
        "namespaces/http_requests",
        "namespaces/memory_working_set_bytes",
        "namespaces/network_receive_bytes",
        "namespaces/queue_depth",
        "namespaces/request_duration",
        "pods/cpu_usage",
        "pods/http_requests",
        "pods/memory_working_set_bytes",
        "pods/network_receive_bytes",
        "pods/request_duration",
        "services/http_requests",
    ]
    assert CustomMetric(GroupResource("batch", "jobs"), "http_requests", True) in registry.custom


@pytest.mark.parametrize(
    ("resource", "metric", "namespace", "names", "expected"),
    [
        (
            PODS,
            "cpu_usage",
            "ns",
            ["web-1", "web-2"],
            'sum(rate(container_cpu_usage_seconds_total{namespace="ns",pod=~"web-1|web-2",container!="POD"}[5m]))'
            " by (pod)",
        ),
        (
            NAMESPACES,
            "memory_working_set_bytes",
            None,
            ["ns"],
            'sum(container_memory_working_set_bytes{namespace="ns",container!="POD"}) by (namespace)',
        ),
        (
            GroupResource("apps", "deployments"),
            "queue_depth",
            "ns",
            ["worker"],
            'sum(queue_depth{namespace="ns",deployment="worker"}) by (deployment)',
        ),
        (
            GroupResource("", "services"),
            "http_requests",
            "ns",
            ["web"],
            'sum(rate(http_requests_total{namespace="ns",service="web"}[5m])) by (service)',
        ),
    ],
    ids=["pods", "namespaces", "deployment", "service"],
)
def test_helm_default_rules_render(
    resource: GroupResource, metric: str, namespace: str | None, names: list[str], expected: str
) -> None:
    found = discover(parse_config(HELM), HELM_SERIES).find_custom(resource, metric)
    assert found is not None
    _, source = found
    assert render_custom(source.rule, source.series, resource, namespace, names, EVERYTHING) == expected


def test_helm_external_rule_with_a_metric_selector() -> None:
    """The chart's ``rules.external`` example (``ci/external-rules-values.yaml``) as ``externalRules``: the
    selector's matchers, then the namespace the template resolves; ``.GroupBy`` is empty for external metrics."""
    text = """externalRules:
- seriesQuery: '{__name__=~"^some_metric_count$"}'
  resources:
    template: <<.Resource>>
  name:
    matches: ""
    as: "my_custom_metric"
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)
"""
    config = parse_config(text)
    registry = discover(config, {config.external_rules[0].series_query: [{"__name__": "some_metric_count"}]})
    source = registry.external["my_custom_metric"]
    got = render_external(source.rule, source.series, "default", parse_selector("queue in (a,b),env=prod"))
    assert got == 'sum(some_metric_count{env="prod",queue=~"a|b",namespace="default"}) by ()'
