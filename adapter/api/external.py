"""external.metrics.k8s.io/v1beta1: request path → provider → document, the only caller of the external provider.

``GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector=...`` answers an
ExternalMetricValueList (kubernetes/metrics ``pkg/apis/external_metrics/v1beta1``; the path the HPA's external
metrics client builds: kubernetes/metrics ``pkg/client/external_metrics/client.go``);
``/apis/external.metrics.k8s.io/v1beta1`` is discovery. The namespace and the selector are checked as on the
custom metrics API (``api/params.py``) before the provider is asked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from adapter.api.groups import EXTERNAL_GROUP as GROUP
from adapter.api.groups import EXTERNAL_VERSION as VERSION
from adapter.api.params import check_name, selector
from adapter.api.wire import quantity, rfc3339
from adapter.errors import route_not_found
from adapter.labels import Selector
from adapter.provider.external import ExternalValue


class ExternalMetrics(Protocol):
    """The external provider: ``provider.external.ExternalProvider``, or ``provider.dispatch.ExternalDispatcher``
    with prometheus-adapter's rules."""

    def list_all_metrics(self) -> list[str]: ...

    async def get(self, namespace: str, metric: str, selector: Selector) -> list[ExternalValue]: ...


def api_group() -> dict[str, Any]:
    version = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version], "preferredVersion": version}


def value_list(items: list[ExternalValue]) -> dict[str, Any]:
    """ExternalMetricValueList, fields in Go's order (metricName, metricLabels, timestamp, window, value)."""
    out = []
    for v in items:
        item: dict[str, Any] = {"metricName": v.metric, "metricLabels": dict(v.labels), "timestamp": rfc3339(v.ts)}
        if v.window_s is not None:
            item["window"] = v.window_s
        item["value"] = quantity(v.value)
        out.append(item)
    return {"kind": "ExternalMetricValueList", "apiVersion": f"{GROUP}/{VERSION}", "metadata": {}, "items": out}


def resource_list(metrics: list[str]) -> dict[str, Any]:
    """APIResourceList for discovery: one namespaced resource per external metric."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{GROUP}/{VERSION}",
        "resources": [
            {"name": m, "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList", "verbs": ["get"]}
            for m in metrics
        ],
    }


class ExternalStorage:
    """Turns a request path under ``/apis/external.metrics.k8s.io/`` into provider calls and a document.
    ``provider`` None (the app was given a custom metrics provider only): discovery lists nothing, every metric
    is NotFound."""

    def __init__(self, provider: ExternalMetrics | None) -> None:
        self.provider = provider

    async def get(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        """``path``: what follows the group's prefix and its slash, ``{version}[/namespaces/{ns}/{metric}]``."""
        version, _, tail = path.partition("/")
        parts = tail.split("/") if tail else []
        if version != VERSION or any(p == "" for p in parts):
            raise route_not_found()
        if not parts:
            return resource_list(self.provider.list_all_metrics() if self.provider is not None else [])
        if len(parts) != 3 or parts[0] != "namespaces":
            raise route_not_found()
        namespace, metric = parts[1], parts[2]
        check_name("namespace", namespace, label=True)
        series = selector(params, "labelSelector")
        if self.provider is None:
            raise route_not_found(f"external metric {metric!r}")
        return value_list(await self.provider.get(namespace, metric, series))
