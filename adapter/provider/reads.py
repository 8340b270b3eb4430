"""Per-pod values of catalog metrics read from the backend: render the PromQL, query, reduce by pod.

Two scopes: ``namespace`` reads one catalog metric for every pod of a namespace (the value store's loader:
``provider/values.py`` hands it to its ``Store``), ``scope`` reads the catalog metrics of one request directly
(one batched query per catalog metric, concurrently). Neither reads the store: a load only talks to the
backend, so the store's data path ends here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from adapter.aggregate import CompositeValue, PodValue, Rejections, reduce_by_pod
from adapter.catalog import Catalog
from adapter.labels import Selector
from adapter.quantity import quantity
from adapter.query.client import PromClient
from adapter.query.promql import PromQL, Scope, render
from adapter.samples import Sample

log = logging.getLogger(__name__)

# A key of the value store: (namespace, catalog metric, the request's metricLabelSelector).
StoreKey = tuple[str, str, Selector]


@dataclass(frozen=True, slots=True)
class NamespaceValues:
    """One catalog metric for every pod of a namespace that has data: what the store keeps per key."""

    query: PromQL
    values: dict[str, PodValue]
    quantities: dict[str, str]  # pod -> ``wire.quantity`` of its value: formatted once per refresh, not per poll


@dataclass(frozen=True, slots=True)
class ScopeValues:
    """The catalog metrics of one direct read: per metric its PromQL, raw samples and per-pod values."""

    queries: dict[str, PromQL]
    samples: dict[str, list[Sample]]
    per_metric: dict[str, dict[str, PodValue]]
    rejected: tuple[str, ...]  # why series or pods were refused (untrusted, negative, ...)


class ReadObserver(Protocol):
    """observability.py's hook: every composite read, for the per-pod series it exports."""

    def composite_read(
        self, namespace: str, metric: str, values: Mapping[str, CompositeValue], scope_pods: Iterable[str] | None
    ) -> None: ...

    def series_rejected(self, metric: str, counts: Mapping[str, int]) -> None: ...


class BackendReads:
    """Catalog metrics read through a ``PromClient``: what the value store loads and what a direct read asks."""

    def __init__(self, catalog: Catalog, client: PromClient, observer: ReadObserver | None = None) -> None:
        self.catalog = catalog
        self.client = client
        self.observer = observer

    async def namespace(self, key: StoreKey, at: float) -> NamespaceValues:
        """The store's loader: one batched query for every pod of the namespace, reduced off the event loop
        (tens of thousands of pods take long enough to hold up every other request)."""
        namespace, name, metric_selector = key
        mdef = self.catalog.metrics[name]
        query = render(mdef, self.catalog, Scope(namespace), metric_selector)
        samples = await self.client.query(query, at)
        rejected = Rejections()

        def reduce() -> NamespaceValues:
            values = reduce_by_pod(
                samples,
                self.catalog.layouts_for(mdef),
                mdef.reduce,
                namespace,
                None,
                nonnegative=mdef.nonnegative,
                rejected=rejected,
            )
            return NamespaceValues(query, values, {pod: quantity(pv.value) for pod, pv in values.items()})

        loaded = await asyncio.to_thread(reduce)
        self.report_rejected(name, namespace, rejected)
        return loaded

    async def scope(
        self, metric: str, names: tuple[str, ...], scope: Scope, metric_selector: Selector, at: float
    ) -> ScopeValues:
        """The catalog metrics ``names`` over ``scope`` at ``at``: one query each, concurrently; what was
        refused is reported under ``metric`` (the metric the request asked for)."""
        catalog = self.catalog
        queries = {n: render(catalog.metrics[n], catalog, scope, metric_selector) for n in names}
        answers = await asyncio.gather(*(self.client.query(queries[n], at) for n in names))
        samples = dict(zip(names, answers, strict=True))
        rejected = Rejections()
        per_metric = {
            n: reduce_by_pod(
                samples[n],
                catalog.layouts_for(catalog.metrics[n]),
                catalog.metrics[n].reduce,
                scope.namespace,
                scope.pods,
                nonnegative=catalog.metrics[n].nonnegative,
                rejected=rejected,
            )
            for n in names
        }
        return ScopeValues(queries, samples, per_metric, self.report_rejected(metric, scope.namespace, rejected))

    def report_rejected(self, metric: str, namespace: str, rejected: Rejections) -> tuple[str, ...]:
        """Log and count what the trust and value rules refused; the notes explain shows."""
        if not rejected:
            return ()
        log.warning("%s in namespace %s: refused %s; first: %s", metric, namespace, rejected.counts, rejected.notes[0])
        if self.observer is not None:
            self.observer.series_rejected(metric, rejected.counts)
        return tuple(rejected.notes)
