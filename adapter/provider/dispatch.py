"""The LLM catalog and prometheus-adapter's rules served at once, on both metric APIs.

Discovery is the union of both. A (resource, metric) both serve is answered by the catalog, and the rules' one
is left out of discovery and logged (``clashes``, at start-up and when a re-list brings a new one): the catalog
is this server's own contract, and a rule's series are a tenant's data (docs/prometheus-adapter.md). External
metrics follow the same precedence.
"""

from __future__ import annotations

from collections.abc import Sequence

from adapter.labels import Selector
from adapter.provider.base import MetricInfo, MetricSample, MetricsProvider, ObjectRef
from adapter.provider.external import ExternalProvider, ExternalValue
from adapter.provider.promadapter import ResolvedResource, RulesProvider


class Dispatcher:
    """A ``MetricsProvider`` over the catalog's provider and a ``RulesProvider``."""

    def __init__(self, catalog: MetricsProvider, rules: RulesProvider) -> None:
        self.catalog = catalog
        self.rules = rules
        self._catalog_keys = {(m.resource, m.metric) for m in catalog.list_all_metrics()}

    def clashes(self) -> list[str]:
        """``resource/metric`` the rules discovered that the catalog serves too (answered by the catalog)."""
        return [f"{m.resource}/{m.metric}" for m in self.rules.list_all_metrics() if self._is_catalogs(m)]

    def _is_catalogs(self, info: MetricInfo) -> bool:
        return (info.resource, info.metric) in self._catalog_keys

    def _for(self, info: MetricInfo) -> MetricsProvider:
        if not self._is_catalogs(info) and self.rules.serves(info):
            return self.rules
        return self.catalog

    def resolve(self, resource: str) -> ResolvedResource | None:
        """A request's resource the catalog does not name, as the rules' resource table knows it."""
        return self.rules.resolve(resource)

    def list_all_metrics(self) -> list[MetricInfo]:
        """The catalog's metrics, then the rules' that the catalog does not serve."""
        own = self.catalog.list_all_metrics()
        return own + [m for m in self.rules.list_all_metrics() if not self._is_catalogs(m)]

    async def get_metric_by_name(self, obj: ObjectRef, info: MetricInfo, metric_selector: Selector) -> MetricSample:
        return await self._for(info).get_metric_by_name(obj, info, metric_selector)

    async def get_metric_by_selector(
        self, namespace: str, selector: Selector, info: MetricInfo, metric_selector: Selector
    ) -> Sequence[MetricSample]:
        return await self._for(info).get_metric_by_selector(namespace, selector, info, metric_selector)


class ExternalDispatcher:
    """external.metrics.k8s.io over the catalog's ``ExternalProvider`` and a ``RulesProvider``'s external rules:
    the catalog's names first; items of a rule carry all the sample's labels (prometheus-adapter's
    ``metricLabels``)."""

    def __init__(self, catalog: ExternalProvider | None, rules: RulesProvider) -> None:
        self.catalog = catalog
        self.rules = rules
        self._catalog_names = set() if catalog is None else set(catalog.list_all_metrics())

    def clashes(self) -> list[str]:
        """External metrics the rules discovered that the catalog serves too (answered by the catalog)."""
        return sorted(self._catalog_names & set(self.rules.list_external()))

    def list_all_metrics(self) -> list[str]:
        return sorted(self._catalog_names | set(self.rules.list_external()))

    async def get(self, namespace: str, metric: str, selector: Selector) -> list[ExternalValue]:
        if self.catalog is not None and (metric in self._catalog_names or not self.rules.serves_external(metric)):
            return await self.catalog.get(namespace, metric, selector)
        items = await self.rules.get_external(namespace, metric, selector)
        return [ExternalValue(metric, labels, ts, value, None) for labels, value, ts in items]
