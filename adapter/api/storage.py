"""Request → provider → document: the only caller of the MetricsProvider.

Follows the routes of kubernetes-sigs/custom-metrics-apiserver (``pkg/apiserver/installer/cmhandlers.go``):
``{resource}/{name}/{metric}`` (root-scoped), ``namespaces/{ns}/{resource}/{name}/{metric}`` and
``namespaces/{ns}/metrics/{metric}`` (rewritten to the Namespace object ``ns``, ``endpoints/handlers/get.go``).
A name of ``*`` lists by ``labelSelector``; any other name answers exactly one item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from adapter.api.groups import GROUP, VERSIONS
from adapter.api.params import check_name, selector
from adapter.api.wire import MetricValueList, resource_list
from adapter.errors import route_not_found
from adapter.provider.base import RESOURCE_ALIASES, RESOURCES, MetricInfo, MetricsProvider, ObjectRef, metric_not_found
from adapter.provider.promadapter import ResolvedResource


class Storage:
    """Turns a parsed request path into provider calls and a MetricValueList or APIResourceList.

    ``resolve`` names the resources beyond the catalog's three (Services, Jobs, a CRD's plural) that a
    prometheus-adapter rule may serve: canonical name, kind and apiVersion of their objects, scope."""

    def __init__(
        self, provider: MetricsProvider, resolve: Callable[[str], ResolvedResource | None] | None = None
    ) -> None:
        self.provider = provider
        self.resolve = resolve

    def discovery(self, version: str) -> dict[str, Any]:
        return resource_list(f"{GROUP}/{version}", self.provider.list_all_metrics())

    async def get(
        self, version: str, namespace: str | None, resource: str, name: str, metric: str, params: Mapping[str, str]
    ) -> MetricValueList:
        """One request of a matched route (``routes/custom_metrics.py``): ``namespace`` None for root-scoped
        objects, and for ``namespaces/{ns}/metrics/{metric}``, which arrives as resource "namespaces", name ns."""
        if version not in VERSIONS:
            raise route_not_found()
        if namespace is not None:
            check_name("namespace", namespace, label=True)
        if name != "*":
            check_name("object", name, label=(resource in ("namespaces", "namespace")))
        metric_selector = selector(params, "metricLabelSelector")
        canonical = RESOURCE_ALIASES.get(resource)
        resolved = None
        if canonical is None and self.resolve is not None:
            resolved = self.resolve(resource)
            canonical = None if resolved is None else resolved.canonical
        root = canonical == "namespaces" or (resolved is not None and resolved.root_scoped)
        info = MetricInfo(canonical or resource, metric, namespace is not None)
        # Namespaced resources must be asked for inside a namespace and root-scoped ones outside it.
        if canonical is None or root == (namespace is not None):
            raise metric_not_found(MetricInfo(resource, metric, namespace is not None))

        if name == "*":
            if root or namespace is None:
                reason = "name the namespace" if canonical == "namespaces" else "name the object"
                raise metric_not_found(MetricInfo(canonical, metric, False), reason=reason)
            pods = selector(params, "labelSelector")
            samples = await self.provider.get_metric_by_selector(namespace, pods, info, metric_selector)
            return MetricValueList(version, samples)

        if resolved is not None:
            kind, api_version = resolved.kind, resolved.api_version
        else:
            kind, api_version, _ = RESOURCES[canonical]
        obj = ObjectRef(kind, api_version, name, namespace)
        sample = await self.provider.get_metric_by_name(obj, info, metric_selector)
        return MetricValueList(version, [sample])
