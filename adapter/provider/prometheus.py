"""The Prometheus/VictoriaMetrics-backed provider: catalog metrics and composites, per pod and per object.

The seam's implementation (``provider/base.py``) for the catalog: it resolves the request's metric to its
``Served`` record (``provider/served.py``), finds the pods behind the request (its ``PodSource``), reads their
values (``provider/values.py``: from the value store, or directly) and applies the boost of the forecast
(``forecast_service.ForecastService``) to the boosted composite; the wire encodes what it returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from adapter.aggregate import PodValue, at_load, boost_value, combine, servable
from adapter.catalog import Catalog
from adapter.errors import TooManyRequests
from adapter.forecast_service import ForecastService, WorkloadKey, key_for_pods
from adapter.labels import EVERYTHING, Selector
from adapter.pods.base import PodSource
from adapter.provider.base import (
    DEPLOYMENTS,
    RESOURCES,
    MetricInfo,
    MetricSample,
    ObjectRef,
    PodSamples,
    metric_not_found,
)
from adapter.provider.reads import NamespaceValues, ReadObserver, StoreKey
from adapter.provider.served import Served, resolve
from adapter.provider.values import MetricReading, Values
from adapter.query.client import PromClient
from adapter.query.promql import PromQL, Scope, selector_matchers
from adapter.samples import Sample
from adapter.store import Store, StoreConfig

log = logging.getLogger(__name__)


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
        self.values = Values(catalog, client, clock, observer, store)
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
    async def read(
        self, metric: str, scope: Scope, metric_selector: Selector = EVERYTHING, at: float | None = None
    ) -> MetricReading:
        """Per-pod values of a catalog metric or composite over ``scope``, read from the backend at ``at``."""
        return await self.values.read(self.served[metric], scope, metric_selector, source="direct", at=at)

    def data_age(self, namespace: str, metric: str, metric_selector: Selector = EVERYTHING) -> float | None:
        """How old the stored data behind ``metric`` in ``namespace`` is; None when the store does not hold it."""
        served = self.served.get(metric)
        if served is None or served.kind not in ("metric", "composite"):
            return None
        return self.values.data_age(namespace, served, metric_selector)

    @property
    def value_store(self) -> Store[StoreKey, NamespaceValues] | None:
        """The value store (None when it is off): what ``/metrics`` exports of it."""
        return self.values.store

    async def start(self) -> None:
        self.values.start()

    async def close(self) -> None:
        await self.values.close()

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
        reading = await self.values.read(self.served[served.base], Scope(namespace, tuple(pods)), metric_selector)
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
        (``aggregate.at_load``: a composite term by term; ``aggregate.boost_value``: a metric of ``forecast.also``);
        the value itself for boost 1."""
        if boost == 1.0:
            return reading.values[pod].value
        if reading.composite is None:  # a boosted metric of forecast.also
            return boost_value(reading.values[pod].value, boost, *served.rule)
        return at_load(reading.composite[pod], served.flat, boost, served.elasticity)

    def _boost(self, key: WorkloadKey, served: Served) -> float:
        """The workload's boost for a boosted metric (registering the workload); 1 for any other metric."""
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
        if resource == DEPLOYMENTS:
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
        reading = await self.values.read(self.served[served.base], scope, metric_selector)
        if not reading.values or (info.resource == "pods" and obj.name not in reading.values):
            raise metric_not_found(info, obj.name, metric_selector)
        # Only now is the workload known to exist (a named pod has series; a Deployment has pods): register it.
        boost = 1.0
        if info.resource == "pods":
            boost = self._boost(key_for_pods(scope.namespace, [obj.name]), served)
        elif info.resource == DEPLOYMENTS:
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
