"""The Prometheus/VictoriaMetrics-backed provider: catalog metrics and composites, per pod and per object.

With the catalog's ``store`` on (the default) a request is answered from memory: ``adapter/store.py`` keeps
every (namespace, catalog metric, metricLabelSelector) that was asked for, as per-pod values of the whole
namespace, refreshed in the background with one batched query per key per interval. A request's work is
selecting its pods' values, the composite, the boost and the encoding. This relies on what every catalog
template does: each pod's value is computed from that pod's own series only (``by (<<by>>)``), so a
namespace-wide query restricted to a set of pods equals the query over just those pods.

With the store off (``store: false``), or for ``read()`` (explain, a given evaluation time), each request does
at most one batched PromQL round-trip per catalog query (never one per pod), concurrently for a composite.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from adapter.aggregate import (
    CompositeValue,
    PodValue,
    Rejections,
    at_load,
    combine,
    fuse,
    reduce_by_pod,
    servable,
    unservable_terms,
)
from adapter.catalog import BOOST_METRIC, FORECAST_METRIC, Catalog, Combine, Term
from adapter.errors import TooManyRequests, UpstreamError
from adapter.labels import EVERYTHING, Selector
from adapter.pods.base import PodSource
from adapter.provider.base import RESOURCES, MetricInfo, MetricSample, ObjectRef, PodSamples, metric_not_found
from adapter.quantity import quantity
from adapter.query.client import PromClient
from adapter.query.promql import PromQL, Scope, render, selector_matchers
from adapter.samples import Sample
from adapter.store import Store, StoreConfig
from adapter.workloads import ForecastService, WorkloadKey, key_for_pods

log = logging.getLogger(__name__)


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


Kind = Literal["metric", "composite", "boosted", "forecast", "boost"]


@dataclass(frozen=True, slots=True)
class Served:
    """One served metric, resolved once when the provider is built: the request path dispatches on this record
    and never matches the metric's name against the catalog again."""

    name: str
    kind: Kind
    resources: tuple[str, ...]  # the API resources it is served for
    base: str  # what is read from the backend: itself, the boosted composite's base; "" for forecast and boost
    window_s: int | None
    combine: Combine  # how an object's pods combine (the base's rule for the boosted composite)
    names: tuple[str, ...] = ()  # the catalog metrics a read queries (itself, or the composite's terms)
    terms: tuple[Term, ...] = ()  # a composite's terms (the base's for the boosted composite)
    flat: frozenset[str] = frozenset()  # the boosted composite's flat terms (``aggregate.at_load``)


def resolve(catalog: Catalog, forecasting: bool) -> dict[str, Served]:
    """Every metric the provider serves, by name: catalog metrics and composites on every resource, and with a
    forecast section and a forecast service the boosted composite (pods, Deployments), the forecast and the boost
    (Deployments)."""
    every = tuple(RESOURCES)
    out: dict[str, Served] = {}
    for name in catalog.names():  # discovery lists them in this order
        if name in catalog.metrics:
            mdef = catalog.metrics[name]
            out[name] = Served(name, "metric", every, name, mdef.window_seconds, mdef.objects, (name,))
            continue
        cdef = catalog.composites[name]
        windows = [w for t in cdef.terms if (w := catalog.metrics[t.metric].window_seconds) is not None]
        names = tuple(dict.fromkeys(t.metric for t in cdef.terms))
        window = max(windows) if windows else None
        out[name] = Served(name, "composite", every, name, window, cdef.objects, names, cdef.terms, cdef.flat_metrics)
    if catalog.forecast is not None and forecasting:
        base = out[catalog.forecast.base]
        boosted = catalog.forecast.boosted
        out[boosted] = Served(
            boosted,
            "boosted",
            ("pods", "deployments.apps"),
            base.name,
            base.window_s,
            base.combine,
            base.names,
            base.terms,
            base.flat,
        )
        out[FORECAST_METRIC] = Served(FORECAST_METRIC, "forecast", ("deployments.apps",), "", None, "max")
        out[BOOST_METRIC] = Served(BOOST_METRIC, "boost", ("deployments.apps",), "", None, "max")
    return out


# A key of the value store: (namespace, catalog metric, the request's metricLabelSelector).
StoreKey = tuple[str, str, Selector]


@dataclass(frozen=True, slots=True)
class NamespaceValues:
    """One catalog metric for every pod of a namespace that has data: what the store keeps per key."""

    query: PromQL
    values: dict[str, PodValue]
    quantities: dict[str, str]  # pod -> ``wire.quantity`` of its value: formatted once per refresh, not per poll


@dataclass(frozen=True, slots=True)
class FusedValues:
    """A composite for every pod of a namespace, fused off the request path from the stored term values in
    ``sources`` (compared by identity: it serves only while those are exactly the values the store holds)."""

    sources: tuple[NamespaceValues, ...]  # the terms' stored values, in ``_names(metric)`` order
    composite: dict[str, CompositeValue]
    values: dict[str, PodValue]
    quantities: dict[str, str]


class ReadObserver(Protocol):
    """observability.py's hook: every composite read, for the per-pod series it exports."""

    def composite_read(
        self, namespace: str, metric: str, values: Mapping[str, CompositeValue], scope_pods: Iterable[str] | None
    ) -> None: ...

    def series_rejected(self, metric: str, counts: Mapping[str, int]) -> None: ...


class PrometheusProvider:
    """MetricsProvider over a PromClient, a PodSource and the catalog."""

    def __init__(
        self,
        catalog: Catalog,
        client: PromClient,
        pods: PodSource,
        clock: Callable[[], float] = time.time,
        forecasts: ForecastService | None = None,
        observer: ReadObserver | None = None,
        store: StoreConfig | None = None,
    ) -> None:
        self.catalog = catalog
        self.client = client
        self.pods = pods
        self.clock = clock
        self.forecasts = forecasts
        self.observer = observer
        self.store: Store[StoreKey, NamespaceValues] | None = None
        if store is not None:
            self.store = Store("metrics", self._load_namespace, store, clock)
        # Composites asked for, per (namespace, composite, metricLabelSelector): fused for the whole namespace
        # whenever one of their terms refreshes (None until then), so a poll only picks its pods' values.
        self._fused: dict[StoreKey, FusedValues | None] = {}
        # Every served metric, resolved once: its kind, window, combine rule, terms (a forecast is about a workload).
        self.served: dict[str, Served] = resolve(catalog, forecasts is not None)
        self._served_on: dict[tuple[str, str], Served] = {
            (name, resource): s for name, s in self.served.items() for resource in s.resources
        }

    # -- discovery ---------------------------------------------------------------------------------
    def list_all_metrics(self) -> list[MetricInfo]:
        return [MetricInfo(resource, name, RESOURCES[resource][2]) for name, resource in self._served_on]

    def knows(self, metric: str) -> bool:
        """Whether ``metric`` is served on some resource (explain's question)."""
        return metric in self.served

    def _resolve(self, info: MetricInfo) -> Served:
        """The served record of a request's metric on its resource; NotFound when it is not served there."""
        served = self._served_on.get((info.metric, info.resource))
        if served is None:
            raise metric_not_found(info)
        return served

    # -- reading -----------------------------------------------------------------------------------
    async def _load_namespace(self, key: StoreKey, at: float) -> NamespaceValues:
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
        # The composites asked for in this namespace that use this metric, fused with the other terms' values as
        # stored now. Two terms may refresh at once: each then fused with the other's old value. So a fusion is
        # kept only if the other values are still the stored ones when it is done, else it is redone; the last
        # refresh to finish sees every other term's newest value, so what stays fused is current.
        for ns, composite, sel in list(self._fused):
            if ns != namespace or sel != metric_selector or name not in (names := self.served[composite].names):
                continue
            for _ in range(3):
                sources = [loaded if n == name else self._peek_value((ns, n, sel)) for n in names]
                if not all(isinstance(v, NamespaceValues) for v in sources):
                    break
                terms = tuple(v for v in sources if v is not None)
                values = await asyncio.to_thread(self._fuse_namespace, composite, terms)
                if all(v is loaded or v is self._peek_value((ns, n, sel)) for n, v in zip(names, terms, strict=True)):
                    self._fused[(namespace, composite, metric_selector)] = values
                    break
        self._report_rejected(name, namespace, rejected)
        return loaded

    def _peek_value(self, key: StoreKey) -> NamespaceValues | None:
        fresh = None if self.store is None else self.store.peek(key)
        return None if fresh is None else fresh.value

    def _fuse_namespace(self, metric: str, sources: tuple[NamespaceValues, ...]) -> FusedValues:
        """``fuse`` over every pod of the namespace: each pod's composite depends on its own term values only,
        so the pods of any request get exactly what fusing just their values gives."""
        served = self.served[metric]
        per_metric = {n: v.values for n, v in zip(served.names, sources, strict=True)}
        composite = fuse(served.terms, per_metric)
        values = {pod: PodValue(cv.value, cv.ts, len(cv.terms)) for pod, cv in composite.items()}
        return FusedValues(sources, composite, values, {pod: quantity(pv.value) for pod, pv in values.items()})

    def _report_rejected(self, metric: str, namespace: str, rejected: Rejections) -> tuple[str, ...]:
        """Log and count what the trust and value rules refused; the notes explain shows."""
        if not rejected:
            return ()
        log.warning("%s in namespace %s: refused %s; first: %s", metric, namespace, rejected.counts, rejected.notes[0])
        if self.observer is not None:
            self.observer.series_rejected(metric, rejected.counts)
        return tuple(rejected.notes)

    def _check_terms(self, metric: Served, scope: Scope, per_metric: Mapping[str, Mapping[str, PodValue]]) -> None:
        """A required composite term with no series for any pod of a list or Deployment is a partial answer:
        serving what is left would re-weight or silently drop every pod. (For one named pod the term's absence
        is just that pod's missing value: 404, as for any metric.)"""
        gone = unservable_terms(metric.terms, per_metric)
        if gone and (scope.pods is None or len(scope.pods) > 1):
            raise UpstreamError(
                f"{metric.name} is unavailable in namespace {scope.namespace}: no series for "
                f"{', '.join(gone)} for any of the pods (is its exporter scraped?)"
            )

    async def current(self, metric: str, scope: Scope, metric_selector: Selector = EVERYTHING) -> MetricReading:
        """Per-pod values of a catalog metric or composite over ``scope`` now: from the store when it is on
        (no backend round-trip once the keys are known), else by ``read()``."""
        if self.store is None or scope.pod_regex is not None:
            return await self.read(metric, scope, metric_selector)
        store = self.store
        served = self.served[metric]
        names = served.names
        keys = [(scope.namespace, n, metric_selector) for n in names]
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
            return MetricReading(
                metric, per_metric[metric], queries, {}, age_s=age, quantities=fresh[0].value.quantities
            )
        self._check_terms(served, scope, per_metric)
        fkey = (scope.namespace, metric, metric_selector)
        cached = self._fused.get(fkey)
        quantities: Mapping[str, str] | None = None
        if cached is not None and all(a is f.value for a, f in zip(cached.sources, fresh, strict=True)):
            if wanted is None:
                fused, values = dict(cached.composite), dict(cached.values)
            else:
                fused = {p: cached.composite[p] for p in wanted if p in cached.composite}
                values = {p: cached.values[p] for p in fused}
            quantities = cached.quantities
        else:  # not fused yet for these term values: fuse this request's pods (and have the next refresh do it)
            if fkey not in self._fused and all(store.has(k) for k in keys):  # terms past a share are not kept
                if len(self._fused) >= self.store.config.max_keys:  # bounded like the store's keys
                    self._prune_fused()
                self._fused[fkey] = None
            fused = fuse(served.terms, per_metric)
            values = {pod: PodValue(cv.value, cv.ts, len(cv.terms)) for pod, cv in fused.items()}
        if self.observer is not None:
            self.observer.composite_read(scope.namespace, metric, fused, scope.pods)
        return MetricReading(
            metric, values, queries, {}, composite=fused, terms=per_metric, age_s=age, quantities=quantities
        )

    def _prune_fused(self) -> None:
        """Forget the composites whose terms the store no longer keeps (idle or evicted keys); all of them if
        that frees nothing (the next refresh of each term fuses again what is still asked for)."""
        store = self.store
        assert store is not None
        for ns, composite, sel in list(self._fused):
            if not all(store.has((ns, n, sel)) for n in self.served[composite].names):
                del self._fused[(ns, composite, sel)]
        if len(self._fused) >= store.config.max_keys:
            self._fused.clear()

    def data_age(self, namespace: str, metric: str, metric_selector: Selector = EVERYTHING) -> float | None:
        """How old the stored data behind ``metric`` in ``namespace`` is (the oldest of its catalog metrics);
        None when the store is off or does not hold it."""
        served = self.served.get(metric)
        if self.store is None or served is None or served.kind not in ("metric", "composite"):
            return None
        fresh = [self.store.peek((namespace, n, metric_selector)) for n in served.names]
        return None if any(f is None for f in fresh) else max(f.age_s for f in fresh if f is not None)

    async def start(self) -> None:
        if self.store is not None:
            self.store.start()

    async def close(self) -> None:
        if self.store is not None:
            await self.store.close()

    async def read(
        self, metric: str, scope: Scope, metric_selector: Selector = EVERYTHING, at: float | None = None
    ) -> MetricReading:
        """Per-pod values of a catalog metric or composite over ``scope`` (one query per catalog metric)."""
        at = self.clock() if at is None else at
        served = self.served[metric]
        names = served.names
        queries = {n: render(self.catalog.metrics[n], self.catalog, scope, metric_selector) for n in names}
        answers = await asyncio.gather(*(self.client.query(queries[n], at) for n in names))
        samples = dict(zip(names, answers, strict=True))
        rejected = Rejections()
        per_metric = {
            n: reduce_by_pod(
                samples[n],
                self.catalog.layouts_for(self.catalog.metrics[n]),
                self.catalog.metrics[n].reduce,
                scope.namespace,
                scope.pods,
                nonnegative=self.catalog.metrics[n].nonnegative,
                rejected=rejected,
            )
            for n in names
        }
        notes = self._report_rejected(metric, scope.namespace, rejected)
        if served.kind == "metric":
            return MetricReading(metric, per_metric[metric], queries, samples, rejected=notes)
        self._check_terms(served, scope, per_metric)
        fused = fuse(served.terms, per_metric)
        if self.observer is not None:
            self.observer.composite_read(scope.namespace, metric, fused, scope.pods)
        values = {pod: PodValue(cv.value, cv.ts, len(cv.terms)) for pod, cv in fused.items()}
        return MetricReading(metric, values, queries, samples, composite=fused, rejected=notes, terms=per_metric)

    def _sample(
        self, obj: ObjectRef, info: MetricInfo, served: Served, pv: PodValue, metric_selector: Selector
    ) -> MetricSample:
        """The served sample; NotFound (never a value no HPA can read, never a 500) when it is out of range."""
        if not servable(pv.value, pv.ts):
            log.warning(
                "%s of %s %s/%s not served: value %r at %r is out of range",
                info.metric,
                info.resource,
                obj.namespace,
                obj.name,
                pv.value,
                pv.ts,
            )
            raise metric_not_found(
                info, obj.name, reason="its value is beyond what an HPA can read (its milli-value overflows int64)"
            )
        return MetricSample(
            obj=obj, metric=info.metric, ts=pv.ts, value=pv.value, window_s=served.window_s, selector=metric_selector
        )

    async def get_metric_by_selector(
        self, namespace: str, selector: Selector, info: MetricInfo, metric_selector: Selector
    ) -> PodSamples | list[MetricSample]:
        served = self._resolve(info)
        selector_matchers(metric_selector)  # a selector PromQL cannot express is a 400 even with no pods
        if info.resource != "pods":
            raise metric_not_found(info, reason="only pods can be listed by selector; name the object instead")
        pods = await self.pods.pods_for_selector(namespace, selector)
        if not pods:
            return []
        # The workload key (every pod's Deployment) is only worked out for a boosted metric.
        boost = self._boost(key_for_pods(namespace, pods), served)
        reading = await self.current(served.base, Scope(namespace, tuple(pods)), metric_selector)
        values = reading.values
        found = [pod for pod in pods if pod in values]
        return PodSamples(
            namespace,
            info.metric,
            served.window_s,
            metric_selector,
            found,
            [values[pod].ts for pod in found],
            [self._at_load(reading, served, pod, boost) for pod in found],
            reading.quantities if boost == 1.0 else None,
        )

    # -- forecast ----------------------------------------------------------------------------------
    def _at_load(self, reading: MetricReading, served: Served, pod: str, boost: float) -> float:
        """The pod's value at ``boost`` times its load: the one rule the simulator uses too
        (``aggregate.at_load``, term by term); the value itself for boost 1."""
        if boost == 1.0:
            return reading.values[pod].value
        assert reading.composite is not None  # only the boosted composite's base
        return at_load(reading.composite[pod], served.flat, boost)

    def _boost(self, key: WorkloadKey, served: Served) -> float:
        """The workload's boost for the boosted composite (registering the workload); 1 for any other metric."""
        if served.kind != "boosted" or self.forecasts is None:
            return 1.0
        self.forecasts.touch(key)
        return self.forecasts.boost(key)[0]

    async def _forecast_sample(
        self, obj: ObjectRef, info: MetricInfo, served: Served, metric_selector: Selector
    ) -> MetricSample:
        """llm_load_forecast / llm_load_boost of a Deployment, from memory (never waits for a fit).

        The Deployment must exist with pods (pod source) before it is registered as a workload."""
        assert self.forecasts is not None and obj.namespace is not None
        if not await self.pods.pods_for_deployment(obj.namespace, obj.name):
            raise metric_not_found(info, obj.name, metric_selector)
        key = WorkloadKey(obj.namespace, (obj.name,))
        if not self.forecasts.touch(key):  # past the namespace's share (or the cap): say so, not "pending"
            raise TooManyRequests(f"{info.metric} of {obj.name} is not forecast: {self.forecasts.refusal}")
        state = self.forecasts.state(key)
        if served.kind == "forecast":
            if state is None or state.peak is None:
                why = "forecast pending" if state is None else f"no forecast: {state.reason}"
                raise metric_not_found(info, obj.name, reason=why)
            value = state.peak
        else:
            if state is None:
                raise metric_not_found(info, obj.name, reason="forecast pending")
            value = self.forecasts.boost(key)[0]
        return self._sample(obj, info, served, PodValue(value, state.step_ts, 1), metric_selector)

    async def object_scope(self, obj: ObjectRef, resource: str) -> Scope:
        """The pods behind a named object."""
        if resource == "pods":
            assert obj.namespace is not None
            return Scope(obj.namespace, (obj.name,))
        if resource == "deployments.apps":
            assert obj.namespace is not None
            return Scope(obj.namespace, tuple(await self.pods.pods_for_deployment(obj.namespace, obj.name)))
        return Scope(obj.name, None)  # a namespace: every pod in it that has data

    async def get_metric_by_name(self, obj: ObjectRef, info: MetricInfo, metric_selector: Selector) -> MetricSample:
        served = self._served_on.get((info.metric, info.resource))
        if served is None:
            raise metric_not_found(info, obj.name)
        selector_matchers(metric_selector)
        if served.kind in ("forecast", "boost"):
            return await self._forecast_sample(obj, info, served, metric_selector)
        scope = await self.object_scope(obj, info.resource)
        if scope.pods is not None and not scope.pods:
            raise metric_not_found(info, obj.name, metric_selector)
        reading = await self.current(served.base, scope, metric_selector)
        if not reading.values or (info.resource == "pods" and obj.name not in reading.values):
            raise metric_not_found(info, obj.name, metric_selector)
        # Only now is the workload known to exist (a named pod has series; a Deployment has pods): register it.
        boost = 1.0
        if info.resource == "pods":
            boost = self._boost(key_for_pods(scope.namespace, [obj.name]), served)
        elif info.resource == "deployments.apps":
            boost = self._boost(WorkloadKey(scope.namespace, (obj.name,)), served)
        if info.resource == "pods":
            pv = reading.values[obj.name]
            boosted_pv = PodValue(self._at_load(reading, served, obj.name, boost), pv.ts, pv.series)
            return self._sample(obj, info, served, boosted_pv, metric_selector)
        values = list(reading.values.values())
        boosted = [self._at_load(reading, served, pod, boost) for pod in reading.values]
        pv = PodValue(combine(boosted, served.combine), max(v.ts for v in values), len(values))
        return self._sample(obj, info, served, pv, metric_selector)

    # -- what explain asks besides the API's questions (explain.collect.ExplainSource) ---------------
    async def pods_for_selector(self, namespace: str, selector: Selector) -> list[str]:
        return await self.pods.pods_for_selector(namespace, selector)

    async def pods_for_deployment(self, namespace: str, name: str) -> list[str]:
        return await self.pods.pods_for_deployment(namespace, name)

    async def raw_query(self, promql: PromQL, at: float) -> list[Sample]:
        """One instant query's samples as the backend answers them (explain's per-GPU samples)."""
        return await self.client.query(promql, at)
