"""Discovery, pure: listed series -> the metrics the rules serve, and the query each one is answered with.

prometheus-adapter's ``SetSeries`` (``pkg/custom-provider/series_registry.go``) and ``filterAndStoreMetrics``
(``pkg/external-provider/external_series_registry.go``), on the answers to one ``/api/v1/series`` query per
distinct ``seriesQuery`` (``by_series_query``; rules sharing a query share its answer, as
``cachingMetricsLister.updateMetrics`` does). For each rule, in file order, each series that passes its filters
is named by ``name``; a custom rule serves it on every group-resource its labels name, an external rule under
its name alone. When two series (or two rules) give the same metric, the later one is served, as upstream's map
assignment does. A series named with more than ``MAX_SERIES_NAME`` characters is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.promadapter.config import AdapterConfig, Rule
from adapter.promadapter.naming import metric_name, passes
from adapter.promadapter.resources import GroupResource, ResourceTable

_MAX_LABEL_SETS = 10_000
# Series names longer than this are skipped: Python's regex engine, unlike Go's RE2, can take time quadratic in
# the name on an unanchored pattern such as ``.*_total$`` (measured 9 ms at 4,096 characters, 0.1 ms at 512), and
# any pod can expose a series with a name of its choosing. No exporter writes names this long.
MAX_SERIES_NAME = 512
# One listed series: its labels, ``__name__`` included (an item of /api/v1/series' ``data``).
SeriesLabels = Mapping[str, str]


@dataclass(frozen=True, order=True)
class CustomMetric:
    """A custom metric served on one group-resource (``provider.CustomMetricInfo``)."""

    resource: GroupResource
    metric: str
    namespaced: bool

    @property
    def name(self) -> str:
        """Its name in the APIResourceList: ``pods/http_requests_per_second``, ``jobs.batch/x``."""
        return f"{self.resource}/{self.metric}"


@dataclass(frozen=True)
class Source:
    """What answers a served metric: the rule and the series name its ``.Series`` renders."""

    rule: Rule
    series: str


def by_series_query(rules: Iterable[Rule]) -> dict[str, list[Rule]]:
    """Rules grouped by ``seriesQuery`` in first-seen order: one discovery query per key."""
    groups: dict[str, list[Rule]] = {}
    for rule in rules:
        groups.setdefault(rule.series_query, []).append(rule)
    return groups


@dataclass(frozen=True)
class Registry:
    """What discovery found: custom metrics by (group-resource, name), external metrics by name."""

    custom: Mapping[CustomMetric, Source]
    external: Mapping[str, Source]

    def custom_metrics(self) -> list[CustomMetric]:
        """Every served custom metric, sorted."""
        return sorted(self.custom)

    def find_custom(self, resource: GroupResource, metric: str) -> tuple[CustomMetric, Source] | None:
        """The served metric for a normalized group-resource and a name, or None."""
        info = CustomMetric(resource, metric, resource.namespaced_metric)
        source = self.custom.get(info)
        return None if source is None else (info, source)

    def resource_list_entries(self) -> list[dict[str, Any]]:
        """The ``resources`` of custom.metrics.k8s.io's APIResourceList (custom-metrics-apiserver
        ``resource_lister.go``), sorted by name."""
        return [
            {
                "name": m.name,
                "singularName": "",
                "namespaced": m.namespaced,
                "kind": "MetricValueList",
                "verbs": ["get"],
            }
            for m in sorted(self.custom, key=lambda m: m.name)
        ]

    def external_list_entries(self) -> list[dict[str, Any]]:
        """The ``resources`` of external.metrics.k8s.io's APIResourceList, sorted by name."""
        return [
            {"name": m, "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList", "verbs": ["get"]}
            for m in sorted(self.external)
        ]


def _named(rule: Rule) -> Callable[[str], str | None]:
    """The rule's filter and naming for a series name, memoized: a listing repeats each name many times."""
    memo: dict[str, str | None] = {}

    def named(name: str) -> str | None:
        if len(name) > MAX_SERIES_NAME:
            return None
        if name not in memo:
            memo[name] = metric_name(rule, name) if passes(rule, name) else None
        return memo[name]

    return named


def _custom(rule: Rule, series: Sequence[SeriesLabels], into: dict[CustomMetric, Source]) -> None:
    named = _named(rule)
    # Series of one exporter share their label names: resolve each set of names once.
    resolved: dict[tuple[str, ...], list[GroupResource]] = {}
    for labels in series:
        name = labels.get("__name__", "")
        metric = named(name)
        if metric is None:
            continue
        keys = tuple(labels)
        resources = resolved.get(keys)
        if resources is None:
            resources = rule.resources.resources_for_labels(keys)
            if len(resolved) < _MAX_LABEL_SETS:
                resolved[keys] = resources
        for resource in resources:
            into[CustomMetric(resource, metric, resource.namespaced_metric)] = Source(rule, name)


def _external(rule: Rule, series: Sequence[SeriesLabels], into: dict[str, Source]) -> None:
    named = _named(rule)
    for labels in series:
        name = labels.get("__name__", "")
        if (metric := named(name)) is not None:
            into[metric] = Source(rule, name)


def discover(config: AdapterConfig, answers: Mapping[str, Sequence[SeriesLabels]]) -> Registry:
    """The registry from ``answers`` (``seriesQuery`` -> its listed series). ``KeyError`` names a query with no
    answer: upstream refuses the whole update then ("no metrics retrieved for query"), and so must the caller."""
    custom: dict[CustomMetric, Source] = {}
    external: dict[str, Source] = {}
    for rule in config.rules:
        _custom(rule, answers[rule.series_query], custom)
    for rule in config.external_rules:
        _external(rule, answers[rule.series_query], external)
    return Registry(custom, external)


def normalize_request(table: ResourceTable, resource: str) -> GroupResource | None:
    """The group-resource a request's URL names (``pods``, ``deployments.apps``, ``service``), normalized."""
    plural, _, group = resource.partition(".")
    return table.normalize(group, plural)
