"""Per-pod values of catalog metrics and composites: the value store, its namespace loads and the fusion.

One read, two sources. ``stored`` (the default, with the catalog's ``store`` on) answers from memory:
``adapter/store.py`` keeps every (namespace, catalog metric, metricLabelSelector) that was asked for, as
per-pod values of the whole namespace, loaded by ``provider/reads.py`` and refreshed in the background with one
batched query per key per interval. This relies on what every catalog template does: each pod's value is
computed from that pod's own series only (``by (<<by>>)``), so a namespace-wide query restricted to a set of
pods equals the query over just those pods. ``direct`` (the store off, a pod regex, explain, a given evaluation
time) does one batched query per catalog metric for the request's scope, concurrently for a composite.

A composite read from the store is fused once per change of its terms' stored values, for the whole namespace,
in a background task the read starts: each pod's composite depends on its own term values only, so the pods of
any request get exactly what fusing just their values gives. Until that fusion is done (or when its term values
are no longer the stored ones) a read fuses its own pods.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from adapter.aggregate import CompositeValue, PodValue, fuse, unservable_terms
from adapter.catalog import Catalog
from adapter.errors import UpstreamError
from adapter.labels import EVERYTHING, Selector
from adapter.provider.reads import BackendReads, NamespaceValues, ReadObserver, StoreKey
from adapter.provider.served import Served
from adapter.quantity import quantity
from adapter.query.client import PromClient
from adapter.query.promql import PromQL, Scope
from adapter.samples import Sample
from adapter.store import Fresh, Store, StoreConfig

log = logging.getLogger(__name__)

Source = Literal["stored", "direct"]
_FUSE_TRIES = 3  # a term refreshing during a fusion makes it redo it; a few tries, then the next read's turn


@dataclass(frozen=True)
class MetricReading:
    """Everything one metric read produced for a scope: per-pod values plus what explain shows."""

    name: str
    values: dict[str, PodValue]
    queries: dict[str, PromQL]  # metric name → the PromQL sent
    samples: dict[str, list[Sample]]  # metric name → the raw samples it answered (empty from the store)
    composite: dict[str, CompositeValue] | None = None
    rejected: tuple[str, ...] = ()  # why series or pods were refused (untrusted, negative, ...)
    terms: dict[str, dict[str, PodValue]] | None = None  # composites: each term's per-pod values
    age_s: float = 0.0  # how old the data is (the oldest of its catalog metrics)
    quantities: Mapping[str, str] | None = None  # pod -> its value's Quantity, when formatted already


@dataclass(frozen=True, slots=True)
class FusedValues:
    """A composite for every pod of a namespace, fused from the stored term values in ``sources`` (compared by
    identity: it serves only while those are exactly the values the store holds)."""

    keys: tuple[StoreKey, ...]  # the terms' store keys, in ``Served.names`` order
    sources: tuple[NamespaceValues, ...]  # their stored values
    composite: dict[str, CompositeValue]
    values: dict[str, PodValue]
    quantities: dict[str, str]


def fuse_namespace(served: Served, keys: tuple[StoreKey, ...], sources: tuple[NamespaceValues, ...]) -> FusedValues:
    """``fuse`` over every pod of the namespace, from the terms' stored values."""
    per_metric = {n: v.values for n, v in zip(served.names, sources, strict=True)}
    composite = fuse(served.terms, per_metric)
    values = {pod: PodValue(cv.value, cv.ts, len(cv.terms)) for pod, cv in composite.items()}
    return FusedValues(keys, sources, composite, values, {pod: quantity(pv.value) for pod, pv in values.items()})


def check_terms(served: Served, scope: Scope, per_metric: Mapping[str, Mapping[str, PodValue]]) -> None:
    """A required composite term with no series for any pod of a list or Deployment is a partial answer:
    serving what is left would re-weight or silently drop every pod. (For one named pod the term's absence
    is just that pod's missing value: 404, as for any metric.)"""
    gone = unservable_terms(served.terms, per_metric)
    if gone and (scope.pods is None or len(scope.pods) > 1):
        raise UpstreamError(
            f"{served.name} is unavailable in namespace {scope.namespace}: no series for "
            f"{', '.join(gone)} for any of the pods (is its exporter scraped?)"
        )


class Values:
    """The one read of catalog metrics and composites (``read``), from the store or directly."""

    def __init__(
        self,
        catalog: Catalog,
        client: PromClient,
        clock: Callable[[], float] = time.time,
        observer: ReadObserver | None = None,
        store: StoreConfig | None = None,
    ) -> None:
        self.clock = clock
        self.observer = observer
        self.backend = BackendReads(catalog, client, observer)
        self.store: Store[StoreKey, NamespaceValues] | None = None
        if store is not None:
            self.store = Store("metrics", self.backend.namespace, store, clock)
        # Composites read from the store, per (namespace, composite, metricLabelSelector): fused for the whole
        # namespace by a background task (``_fusing``) whenever a read finds its terms' stored values changed.
        self._fused: dict[StoreKey, FusedValues] = {}
        self._fusing: dict[StoreKey, asyncio.Task[None]] = {}

    async def read(
        self,
        served: Served,
        scope: Scope,
        metric_selector: Selector = EVERYTHING,
        *,
        source: Source = "stored",
        at: float | None = None,
    ) -> MetricReading:
        """Per-pod values of a catalog metric or composite over ``scope``: from the store when asked for and it
        is on (no backend round-trip once the keys are known), else directly at ``at`` (default: now)."""
        if source == "direct" or self.store is None or scope.pod_regex is not None:
            return await self._direct(served, scope, metric_selector, self.clock() if at is None else at)
        return await self._stored(self.store, served, scope, metric_selector)

    async def _direct(self, served: Served, scope: Scope, metric_selector: Selector, at: float) -> MetricReading:
        read = await self.backend.scope(served.name, served.names, scope, metric_selector, at)
        per_metric = read.per_metric
        if served.kind == "metric":
            values = per_metric[served.name]
            return MetricReading(served.name, values, read.queries, read.samples, rejected=read.rejected)
        check_terms(served, scope, per_metric)
        fused = fuse(served.terms, per_metric)
        if self.observer is not None:
            self.observer.composite_read(scope.namespace, served.name, fused, scope.pods)
        values = {pod: PodValue(cv.value, cv.ts, len(cv.terms)) for pod, cv in fused.items()}
        return MetricReading(
            served.name,
            values,
            read.queries,
            read.samples,
            composite=fused,
            rejected=read.rejected,
            terms=per_metric,
        )

    async def _stored(
        self, store: Store[StoreKey, NamespaceValues], served: Served, scope: Scope, metric_selector: Selector
    ) -> MetricReading:
        names = served.names
        keys = tuple((scope.namespace, n, metric_selector) for n in names)
        fresh: list[Fresh[NamespaceValues]]
        if all(store.has(k) for k in keys):  # the usual case: no suspension, so no task per key either
            fresh = [await store.get(k) for k in keys]
        else:
            fresh = list(await asyncio.gather(*(store.get(k) for k in keys)))
        wanted = scope.pods
        per_metric: dict[str, dict[str, PodValue]] = {}
        for key, n, f in zip(keys, names, fresh, strict=True):
            values = f.value.values
            if wanted is None:
                per_metric[n] = dict(values)
                continue
            per_metric[n] = {p: values[p] for p in wanted if p in values}
            if len(per_metric[n]) < len(wanted):  # a new pod may have data since the last refresh
                store.refresh_soon(key, [p for p in wanted if p not in values])
        queries = {n: f.value.query for n, f in zip(names, fresh, strict=True)}
        age = max(f.age_s for f in fresh)
        if served.kind == "metric":
            stored = fresh[0].value.quantities
            return MetricReading(served.name, per_metric[served.name], queries, {}, age_s=age, quantities=stored)
        check_terms(served, scope, per_metric)
        fkey = (scope.namespace, served.name, metric_selector)
        cached = self._fused.get(fkey)
        quantities: Mapping[str, str] | None = None
        if cached is not None and all(a is f.value for a, f in zip(cached.sources, fresh, strict=True)):
            if wanted is None:
                fused, values = dict(cached.composite), dict(cached.values)
            else:
                fused = {p: cached.composite[p] for p in wanted if p in cached.composite}
                values = {p: cached.values[p] for p in fused}
            quantities = cached.quantities
        else:  # not fused for these term values: fuse this request's pods, and the namespace in the background
            if fkey not in self._fusing and all(store.has(k) for k in keys):  # terms past a share are not kept
                self._fuse_soon(store, fkey, served, keys)
            fused = fuse(served.terms, per_metric)
            values = {pod: PodValue(cv.value, cv.ts, len(cv.terms)) for pod, cv in fused.items()}
        if self.observer is not None:
            self.observer.composite_read(scope.namespace, served.name, fused, scope.pods)
        return MetricReading(
            served.name, values, queries, {}, composite=fused, terms=per_metric, age_s=age, quantities=quantities
        )

    def _fuse_soon(
        self, store: Store[StoreKey, NamespaceValues], fkey: StoreKey, served: Served, keys: tuple[StoreKey, ...]
    ) -> None:
        if fkey not in self._fused and len(self._fused) >= store.config.max_keys:  # bounded like the store's keys
            self._prune_fused(store)
        task = asyncio.create_task(self._fuse(store, fkey, served, keys), name=f"fuse-{served.name}")
        self._fusing[fkey] = task
        task.add_done_callback(lambda _: self._fusing.pop(fkey, None))

    async def _fuse(
        self, store: Store[StoreKey, NamespaceValues], fkey: StoreKey, served: Served, keys: tuple[StoreKey, ...]
    ) -> None:
        """Fuse the composite for the whole namespace off the request path (in a thread). Two terms may refresh
        while it runs: it is kept only if its term values are still the stored ones when it is done, else redone;
        whatever is kept serves only while those values are stored (``_stored`` compares them)."""
        try:
            for _ in range(_FUSE_TRIES):
                sources = [store.peek(k) for k in keys]
                if any(f is None for f in sources):
                    return
                terms = tuple(f.value for f in sources if f is not None)
                fused = await asyncio.to_thread(fuse_namespace, served, keys, terms)
                now = [store.peek(k) for k in keys]
                if all(f is not None and f.value is t for f, t in zip(now, terms, strict=True)):
                    self._fused[fkey] = fused
                    return
        except Exception:  # a bug: the reads fuse their own pods meanwhile
            log.exception("fusing %s failed", "/".join(str(k) for k in fkey if k))

    def _prune_fused(self, store: Store[StoreKey, NamespaceValues]) -> None:
        """Forget the composites whose terms the store no longer keeps (idle or evicted keys); all of them if
        that frees nothing (the next read of each fuses again what is still asked for)."""
        self._fused = {k: f for k, f in self._fused.items() if all(store.has(t) for t in f.keys)}
        if len(self._fused) >= store.config.max_keys:
            self._fused.clear()

    def data_age(self, namespace: str, served: Served, metric_selector: Selector = EVERYTHING) -> float | None:
        """How old the stored data behind a catalog metric or composite in ``namespace`` is (the oldest of its
        catalog metrics); None when the store is off or does not hold it."""
        if self.store is None:
            return None
        fresh = [self.store.peek((namespace, n, metric_selector)) for n in served.names]
        return None if any(f is None for f in fresh) else max(f.age_s for f in fresh if f is not None)

    def start(self) -> None:
        if self.store is not None:
            self.store.start()

    async def close(self) -> None:
        tasks = list(self._fusing.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
        if self.store is not None:
            await self.store.close()
