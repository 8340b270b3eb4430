"""Values of prometheus-adapter's rules: the rules' value store and its loader.

``RulesReads`` renders a rule's query (``promadapter/metrics_query.py``), runs it and keeps what upstream serves,
per object name (custom) or as the list of items (external). It only talks to the backend: it is the value
store's loader (``namespace``: the key's namespace-wide query under the discovery last swapped in) and what a
direct read asks. ``RulesValues`` owns the store and the loader and offers one read per API, from the store or
directly; ``provider/promadapter.py`` decides which (per rule and resource, at discovery) and keeps the seam.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from adapter.errors import NotFound
from adapter.labels import Selector
from adapter.promadapter.metrics_query import render_custom, render_external, resource_label
from adapter.promadapter.registry import CustomMetric, Registry, Source
from adapter.promadapter.resources import GroupResource
from adapter.query.client import PromClient
from adapter.store import Store, StoreConfig

EMPTY = Registry({}, {})

# A key of the rules' value store: (namespace, or "" for a root-scoped resource; the custom metric, or the
# external metric's name; the request's metricLabelSelector or metricSelector). Its first element is the
# namespace the store's shares charge.
RulesKey = tuple[str, CustomMetric | str, Selector]


def served_value(value: float) -> float | None:
    """The value prometheus-adapter serves for a sample: ``NewMilliQuantity(int64(v*1000))`` (truncated toward
    zero, ``pkg/custom-provider/provider.go`` ``metricFor``); None for NaN, infinity or past int64."""
    if not math.isfinite(value) or abs(value) * 1000 >= 2**63:
        return None
    return math.trunc(value * 1000) / 1000


@dataclass(frozen=True, slots=True)
class Answer:
    """One query's answer by object name (custom) or as the list of items (external): value and timestamp."""

    by_name: Mapping[str, tuple[float, float]]
    items: tuple[tuple[Mapping[str, str], float, float], ...] = ()


class RulesReads:
    """The rules' queries through a ``PromClient``: what the value store loads and what a direct read asks."""

    def __init__(self, client: PromClient) -> None:
        self.client = client
        self.registry = EMPTY  # the discovery the store's keys resolve under (set by whoever re-lists)

    async def namespace(self, key: RulesKey, at: float) -> Answer:
        """The store's loader: the namespace-wide query of the key's metric under the current discovery."""
        namespace, metric, selector = key
        if isinstance(metric, str):
            source = self.registry.external.get(metric)
            if source is None:
                raise NotFound(f"external metric {metric!r} is no longer discovered")
            return await self.external(source, namespace, selector, at)
        found = self.registry.find_custom(metric.resource, metric.metric)
        if found is None:
            raise NotFound(f"{metric.name} is no longer discovered")
        return await self.custom(found[1], metric.resource, namespace or None, None, selector, at)

    async def custom(
        self,
        source: Source,
        resource: GroupResource,
        namespace: str | None,
        names: list[str] | None,
        metric_selector: Selector,
        at: float,
    ) -> Answer:
        """A custom rule's query for ``names`` (None: every object of the namespace), by object name."""
        promql = render_custom(source.rule, source.series, resource, namespace, names, metric_selector)
        label = resource_label(source.rule, resource)
        samples = await self.client.query(promql, at)
        by_name: dict[str, tuple[float, float]] = {}
        for s in samples:
            name = s.labels.get(label)
            value = served_value(s.value)
            if name and value is not None:
                by_name[name] = (value, s.ts)
        return Answer(by_name)

    async def external(self, source: Source, namespace: str, selector: Selector, at: float) -> Answer:
        """An external rule's query: every sample with a servable value, all its labels kept."""
        promql = render_external(source.rule, source.series, namespace, selector)
        samples = await self.client.query(promql, at)
        items = []
        for s in samples:
            value = served_value(s.value)
            if value is not None:
                items.append((dict(s.labels), value, s.ts))
        return Answer({}, tuple(items))


class RulesValues:
    """The one read of the rules' values per API, from the store (``stored``) or directly. ``store`` None: every
    read is direct."""

    def __init__(self, client: PromClient, clock: Callable[[], float] = time.time, store: StoreConfig | None = None):
        self.clock = clock
        self.reads = RulesReads(client)
        self.store: Store[RulesKey, Answer] | None = None
        if store is not None:
            self.store = Store("promadapter", self.reads.namespace, store, clock)

    async def custom(
        self,
        source: Source,
        metric: CustomMetric,
        namespace: str | None,
        names: list[str] | None,
        metric_selector: Selector,
        *,
        stored: bool,
    ) -> Answer:
        """``metric``'s values for ``names`` (None: every object with data) in ``namespace`` (None: root-scoped):
        from the store's namespace-wide answer when ``stored`` and the store is on, else by one query."""
        if stored and self.store is not None:
            key: RulesKey = (namespace or "", metric, metric_selector)
            answer = (await self.store.get(key)).value
            if names is not None and any(n not in answer.by_name for n in names):
                self.store.refresh_soon(key, [n for n in names if n not in answer.by_name])  # a new object
            return answer
        return await self.reads.custom(source, metric.resource, namespace, names, metric_selector, self.clock())

    async def external(self, source: Source, namespace: str, metric: str, selector: Selector) -> Answer:
        """An external metric's items: from the store when it is on, else by one query."""
        if self.store is not None:
            return (await self.store.get((namespace, metric, selector))).value
        return await self.reads.external(source, namespace, selector, self.clock())

    def start(self) -> None:
        if self.store is not None:
            self.store.start()

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()
