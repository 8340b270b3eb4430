"""``explain()``: the reads behind an explanation, through the narrow ``ExplainSource`` interface.

It asks the provider the same questions the API asks it (so the served values are the API's own answers,
not a re-computation), plus one raw query per GPU metric to show the per-GPU samples behind each P90 (a
debugging tool, not the hot path), then hands everything to the pure ``build``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from adapter.catalog import BOOST_METRIC, FORECAST_METRIC, Catalog
from adapter.errors import AdapterError, BadRequest, NotFound
from adapter.explain.build import (
    build,
    explain_forecast,
    explain_hpa,
    gpu_metric,
    raw_queries,
    read_metrics,
    serves,
)
from adapter.explain.model import Explanation
from adapter.forecast_service import ForecastService, WorkloadKey, key_for_pods
from adapter.hpa.spec import HPASpec
from adapter.labels import EVERYTHING, Selector, parse_selector
from adapter.provider.base import (
    DEPLOYMENTS,
    MetricInfo,
    MetricSample,
    MetricsProvider,
    ObjectRef,
    deployment_ref,
    pod_ref,
)
from adapter.provider.values import MetricReading
from adapter.query.promql import PromQL, Scope
from adapter.samples import Sample


class ExplainSource(MetricsProvider, Protocol):
    """All ``explain()`` may ask a provider: the API's own questions (``MetricsProvider``) plus these.

    ``PrometheusProvider`` is one; the HTTP endpoint and the CLI depend on this interface, not on it."""

    @property
    def catalog(self) -> Catalog: ...
    @property
    def forecasts(self) -> ForecastService | None: ...
    @property
    def clock(self) -> Callable[[], float]: ...

    def knows(self, metric: str) -> bool: ...
    def data_age(self, namespace: str, metric: str, metric_selector: Selector = EVERYTHING) -> float | None: ...
    async def read(
        self, metric: str, scope: Scope, metric_selector: Selector = EVERYTHING, at: float | None = None
    ) -> MetricReading: ...
    async def pods_for_selector(self, namespace: str, selector: Selector) -> list[str]: ...
    async def pods_for_deployment(self, namespace: str, name: str) -> list[str]: ...
    async def raw_query(self, promql: PromQL, at: float) -> list[Sample]: ...


async def explain(
    provider: ExplainSource,
    *,
    namespace: str,
    metric: str,
    selector: str | None = None,
    deployment: str | None = None,
    hpa: HPASpec | None = None,
    refresh_forecast: bool = False,
    may_read: Callable[[str], Awaitable[bool]] | None = None,
) -> Explanation:
    """Explain ``metric`` for the pods of ``selector`` or ``deployment`` in ``namespace``.

    ``refresh_forecast`` pulls the history and fits once when the provider holds no forecast for the
    workload yet (the one-shot CLI); the server's endpoint shows the forecast it already holds. With ``hpa``,
    the HPA's other metrics the adapter serves are read too, each only if ``may_read(name)`` (the endpoint's
    caller may read it; the CLI reads with the backend's own credentials and passes None).
    Raises NotFound for a metric the catalog does not serve, BadRequest for a bad selector or arguments.
    """
    if (selector is None) == (deployment is None):
        raise BadRequest("give exactly one of selector or deployment")
    if not provider.knows(metric):
        known = ", ".join(i for i in sorted({m.metric for m in provider.list_all_metrics()}))
        raise NotFound(f"the catalog serves no metric {metric!r}; it serves: {known}")
    catalog = provider.catalog
    sel: Selector | None = None
    if selector is not None:
        try:
            sel = parse_selector(selector)
        except ValueError as exc:
            raise BadRequest(f"invalid selector {selector!r}: {exc}") from None
        pods = await provider.pods_for_selector(namespace, sel)
    else:
        assert deployment is not None
        pods = await provider.pods_for_deployment(namespace, deployment)
    forecast_metrics = {FORECAST_METRIC, BOOST_METRIC}
    boosted_base = catalog.boosted_base(metric)
    boosted = metric if boosted_base is not None else None
    base = boosted_base or metric
    problems: list[str] = []

    forecast = None
    boost = 1.0
    if provider.forecasts is not None and (metric == boosted or metric in forecast_metrics):
        key = WorkloadKey(namespace, (deployment,)) if deployment else key_for_pods(namespace, pods)
        service = provider.forecasts
        if refresh_forecast and service.state(key) is None:
            service.touch(key)
            await service.refresh(key)
        b, reason = service.boost(key)
        forecast = explain_forecast(key, service.state(key), b, reason)
        boost = b if metric == boosted else 1.0
    elif metric == boosted:
        problems.append("the adapter runs no forecast service: the boost is 1")

    if metric in forecast_metrics:
        object_value = await _object_value(provider, namespace, deployment, metric, problems)
        return build(
            catalog=catalog,
            namespace=namespace,
            metric=metric,
            base=metric,
            pods=pods,
            reading=None,
            raw={},
            raw_promql={},
            served={},
            boost=boost,
            forecast=forecast,
            selector=selector,
            deployment=deployment,
            object_value=object_value,
            problems=problems,
        )

    reading = None
    raw: dict[str, list[Sample]] = {}
    raw_promql: dict[str, PromQL] = {}
    served: dict[str, float] = {}
    object_value = None
    if pods:
        scope = Scope(namespace, tuple(pods))
        reading = await provider.read(base, scope)
        names = read_metrics(catalog, base)
        raw_promql = raw_queries(catalog, names, scope)
        at = provider.clock()
        for name, q in raw_promql.items():
            raw[name] = await provider.raw_query(q, at)
        for name in [n for n in raw_promql if not gpu_metric(n, catalog, raw)]:
            del raw[name], raw_promql[name]  # per-engine series, not per-GPU: nothing to show
        served, object_value = await _served(provider, namespace, sel, deployment, pods, metric, problems)
    hpa_part = None
    if hpa is not None:
        values = {metric: (served, object_value)}
        for m in hpa.metrics:  # the HPA's other metrics this adapter answers: it takes the largest proposal
            if not (pods and m.name not in values and provider.knows(m.name) and serves(m, deployment)):
                continue
            if may_read is not None and not await may_read(m.name):
                problems.append(f"{m.describe()}: not read, the caller may not get pods/{m.name} in {namespace}")
                continue
            kinds = {e.type for e in hpa.metrics if e.name == m.name and serves(e, deployment)}
            try:  # per pod for a Pods entry, the Deployment's value for an Object or External one
                values[m.name] = await _served(
                    provider, namespace, sel, deployment, pods, m.name, problems,
                    per_pod="Pods" in kinds, whole=kinds != {"Pods"},
                )  # fmt: skip
            except AdapterError as exc:  # the HPA sees this entry fail; the others still propose
                problems.append(f"{m.describe()}: {exc.message}")
                values[m.name] = ({}, None)
        hpa_part = explain_hpa(hpa, metric, values, pods, provider.clock(), deployment)
    return build(
        catalog=catalog,
        namespace=namespace,
        metric=metric,
        base=base,
        pods=pods,
        reading=reading,
        raw=raw,
        raw_promql=raw_promql,
        served=served,
        boost=boost,
        forecast=forecast,
        selector=selector,
        deployment=deployment,
        object_value=object_value,
        hpa=hpa_part,
        problems=problems,
        data_age_s=provider.data_age(namespace, base),
    )


async def _served(
    provider: ExplainSource,
    namespace: str,
    sel: Selector | None,
    deployment: str | None,
    pods: list[str],
    metric: str,
    problems: list[str],
    *,
    per_pod: bool = True,
    whole: bool = True,
) -> tuple[dict[str, float], float | None]:
    """What the API serves for ``metric``: per pod (``per_pod``: as the HPA asks for a Pods metric) and, when a
    Deployment is named, its Object value (``whole``)."""
    served: dict[str, float] = {}
    if per_pod and sel is not None:
        samples = await provider.get_metric_by_selector(namespace, sel, MetricInfo("pods", metric, True), EVERYTHING)
        served = {s.obj.name: s.value for s in samples}
    elif per_pod:
        for pod in pods:
            sample = await _by_name(provider, pod_ref(pod, namespace), "pods", metric)
            if sample is not None:
                served[pod] = sample.value
    object_value = await _object_value(provider, namespace, deployment, metric, problems) if whole else None
    return served, object_value


async def _by_name(provider: ExplainSource, obj: ObjectRef, resource: str, metric: str) -> MetricSample | None:
    try:
        return await provider.get_metric_by_name(obj, MetricInfo(resource, metric, True), EVERYTHING)
    except NotFound:
        return None


async def _object_value(
    provider: ExplainSource, namespace: str, deployment: str | None, metric: str, problems: list[str]
) -> float | None:
    if deployment is None:
        return None
    try:
        sample = await provider.get_metric_by_name(
            deployment_ref(deployment, namespace),
            MetricInfo(DEPLOYMENTS, metric, True),
            EVERYTHING,
        )
    except AdapterError as exc:
        problems.append(f"Deployment {deployment}: {exc.message}")
        return None
    return sample.value
