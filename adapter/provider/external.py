"""external.metrics.k8s.io: workload-level values, read through the catalog provider's read path.

Modelled on kubernetes-sigs/custom-metrics-apiserver ``pkg/provider/interfaces.go`` (ExternalMetricsProvider:
``ListAllExternalMetrics`` and ``GetExternalMetric(namespace, metricSelector, info)``). An external metric
has no described object: the request names a namespace and a metric, and ``labelSelector`` selects among
the metric's series by their labels. The HPA (``type: External``) adds up every item it gets.

Two kinds of metric are served:

- per-Deployment metrics of the forecast (``<base>_boosted``, ``llm_load_forecast``, ``llm_load_boost``): one
  item per Deployment, labelled ``{"deployment": NAME}``. The selector picks them by that label; a selector
  that names Deployments (``deployment=NAME`` or ``deployment in (A,B)``) reads those, one that does not
  lists the Deployments already forecast in the namespace. A Deployment without pods is omitted: it is
  never registered as a workload (issue 11 row 4).
- every catalog metric and composite, combined over the namespace's pods by the catalog's ``objects`` rule
  (e.g. ``inference_queue_depth``: the queue summed over every pod whose series match the selector): one
  item, labelled with the selector's equality requirements. The selector becomes PromQL matchers on the
  series' own labels, exactly as a custom metric's ``metricLabelSelector``. For a composite it selects the pods
  (any term series of the pod matches), whose every term is then read: engine labels such as ``model_name``
  are never on dcgm-exporter's series, and a term missing for every pod is a 503, never a re-weighted value.
  A selector on ``deployment`` alone that names Deployments reads them as the per-Deployment metrics do: one
  item per Deployment, its Object metric (the catalog's ``objects`` rule over the pods the pod source gives
  it), so an External HPA reads a catalog metric for its own Deployment; no series label is trusted to name one.

Both are answered from the value store, as custom metrics are (``provider/values.py``): a (namespace, catalog
metric, labelSelector) is one store key, refreshed with one query per interval, whatever the number of HPAs
polling it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from adapter.aggregate import combine, servable
from adapter.errors import BadRequest, NotFound, route_not_found
from adapter.labels import EVERYTHING, Selector
from adapter.provider.base import DEPLOYMENTS, MetricInfo, deployment_ref
from adapter.provider.prometheus import PrometheusProvider
from adapter.provider.served import Served
from adapter.query.promql import Scope, selector_matchers

log = logging.getLogger(__name__)

DEPLOYMENT_LABEL = "deployment"
# One HPA scales one workload; a selector naming more Deployments than this is refused (400) rather than
# turned into that many pod-source lookups and reads.
MAX_DEPLOYMENTS = 50


@dataclass(frozen=True, slots=True)
class ExternalValue:
    """One item of an ExternalMetricValueList."""

    metric: str
    labels: dict[str, str]
    ts: float
    value: float
    window_s: int | None


class ExternalProvider:
    """ExternalMetricsProvider over a PrometheusProvider (its catalog, pod source, forecasts and reads)."""

    def __init__(self, provider: PrometheusProvider) -> None:
        self.provider = provider
        self.values = provider.values
        self.served = provider.served  # the catalog's metrics and composites, and the forecast's with a service

    def list_all_metrics(self) -> list[str]:
        """Every external metric name (discovery); no I/O."""
        return sorted(self.served)

    async def get(self, namespace: str, metric: str, selector: Selector) -> list[ExternalValue]:
        """The items for ``metric`` in ``namespace`` selected by ``selector``; NotFound for an unknown metric,
        BadRequest for a selector that cannot apply."""
        served = self.served.get(metric)
        if served is None:
            raise route_not_found(f"external metric {metric!r} is not served; see discovery")
        if served.kind in ("metric", "composite") and not _names_deployments(selector):
            return await self._combined(namespace, served, selector)
        return await self._per_deployment(namespace, metric, selector)

    async def _combined(self, namespace: str, served: Served, selector: Selector) -> list[ExternalValue]:
        selector_matchers(selector, "labelSelector")  # 400 before any query for what PromQL cannot express
        scope = Scope(namespace, None)
        if served.kind == "composite" and selector.requirements:
            # A composite's terms come from different exporters: engine labels (model_name, ...) are on the
            # engine's series only, never on dcgm-exporter's. So the selector picks the *pods* (those with a
            # term series matching it), and every term is then read for exactly those pods.
            readings = [await self.values.read(self.served[name], scope, selector) for name in served.names]
            pods = sorted({pod for r in readings for pod in r.values})
            if not pods:
                return []
            scope, selector = Scope(namespace, tuple(pods)), EVERYTHING
        reading = await self.values.read(served, scope, selector)
        if not reading.values:
            return []
        values = list(reading.values.values())
        metric = served.name
        combined = combine([v.value for v in values], served.combine)
        if not servable(combined):  # a sum of large per-pod values
            log.warning("external %s in %s: combined value %r is not servable", metric, namespace, combined)
            return []
        labels = {r.key: r.values[0] for r in selector.requirements if r.operator in ("=", "==")}
        return [ExternalValue(metric, labels, max(v.ts for v in values), combined, served.window_s)]

    def _deployments(self, namespace: str, selector: Selector) -> list[str]:
        named: set[str] | None = None
        for r in selector.requirements:
            if r.key == DEPLOYMENT_LABEL and r.operator in ("=", "==", "in"):
                named = set(r.values) if named is None else named & set(r.values)
        if named is None:  # not pinned by name: the Deployments already forecast in the namespace
            assert self.provider.forecasts is not None
            named = {
                k.deployments[0]
                for k in self.provider.forecasts.workloads()
                if k.namespace == namespace and len(k.deployments) == 1
            }
        if len(named) > MAX_DEPLOYMENTS:
            raise BadRequest(f"labelSelector names {len(named)} Deployments; at most {MAX_DEPLOYMENTS} per request")
        return sorted(d for d in named if selector.matches({DEPLOYMENT_LABEL: d}))

    async def _per_deployment(self, namespace: str, metric: str, selector: Selector) -> list[ExternalValue]:
        out = []
        info = MetricInfo(DEPLOYMENTS, metric, True)
        for name in self._deployments(namespace, selector):
            try:
                sample = await self.provider.get_metric_by_name(deployment_ref(name, namespace), info, EVERYTHING)
            except NotFound:
                continue  # no such Deployment, no pods, or no data yet: omitted, never a made-up value
            if not servable(sample.value, sample.ts):
                # e.g. a forecast fitted to an absurd history: omit this Deployment, serve the others
                log.warning(
                    "external %s: Deployment %s/%s omitted, unservable value %r at %r",
                    metric,
                    namespace,
                    name,
                    sample.value,
                    sample.ts,
                )
                continue
            out.append(ExternalValue(metric, {DEPLOYMENT_LABEL: name}, sample.ts, sample.value, sample.window_s))
        return out


def _names_deployments(selector: Selector) -> bool:
    """True when every requirement is on ``deployment`` and one names Deployments (``=``, ``==``, ``in``)."""
    reqs = selector.requirements
    return (
        bool(reqs)
        and all(r.key == DEPLOYMENT_LABEL for r in reqs)
        and any(r.operator in ("=", "==", "in") for r in reqs)
    )
