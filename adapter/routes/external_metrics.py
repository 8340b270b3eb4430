"""HTTP in for external.metrics.k8s.io/v1beta1 (kubernetes/metrics ``pkg/apis/external_metrics/v1beta1``).

``GET /apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}?labelSelector=...`` answers an
ExternalMetricValueList (the path the HPA's external metrics client builds: kubernetes/metrics
``pkg/client/external_metrics/client.go``); ``/apis/external.metrics.k8s.io/v1beta1`` is discovery. Errors
are metav1.Status documents, as on the custom metrics routes.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import Response

from adapter.api.groups import EXTERNAL_GROUP as GROUP
from adapter.api.groups import EXTERNAL_PREFIX as PREFIX
from adapter.api.groups import EXTERNAL_VERSION as VERSION
from adapter.api.wire import api_group as custom_api_group
from adapter.api.wire import quantity, rfc3339
from adapter.errors import AdapterError, BadRequest, InternalError, MethodNotAllowed, route_not_found
from adapter.labels import EVERYTHING, Selector, parse_selector
from adapter.provider.external import ExternalProvider, ExternalValue
from adapter.provider.prometheus import PrometheusProvider
from adapter.routes.http import check_accept, error_response, json_response

log = logging.getLogger("adapter.routes")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MAX_SELECTOR_CHARS = 16 * 1024


def api_group() -> dict[str, Any]:
    version = {"groupVersion": f"{GROUP}/{VERSION}", "version": VERSION}
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": [version], "preferredVersion": version}


async def apis(request: Request) -> Response:
    """``/apis``: both groups this server serves (the aggregator's discovery; never a 503)."""
    return json_response(
        request, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [custom_api_group(), api_group()]}
    )


async def group(request: Request) -> Response:
    return json_response(request, api_group())


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


class ExternalMetrics(Protocol):
    """What the routes read: ``ExternalProvider``, or ``ExternalDispatcher`` with prometheus-adapter's rules."""

    def list_all_metrics(self) -> list[str]: ...

    async def get(self, namespace: str, metric: str, selector: Selector) -> list[ExternalValue]: ...


def _provider(request: Request) -> ExternalMetrics | None:
    existing = getattr(request.app.state, "external_provider", None)
    if existing is not None:
        return existing  # type: ignore[no-any-return]
    prov = getattr(request.app.state, "provider", None)
    if not isinstance(prov, PrometheusProvider):
        return None
    request.app.state.external_provider = ExternalProvider(prov)
    return request.app.state.external_provider  # type: ignore[no-any-return]


def _selector(request: Request) -> Selector:
    text = request.query_params.get("labelSelector")
    if not text:
        return EVERYTHING
    if len(text) > MAX_SELECTOR_CHARS:
        raise BadRequest(f"invalid labelSelector: longer than {MAX_SELECTOR_CHARS} characters")
    try:
        return parse_selector(text)
    except ValueError as exc:
        raise BadRequest(f"invalid labelSelector {text!r}: {exc}") from None


async def metrics_api(request: Request) -> Response:
    """Everything under ``/apis/external.metrics.k8s.io/{version}/...``."""
    try:
        if request.method != "GET":
            raise MethodNotAllowed("the server does not allow this method on the requested resource", details={})
        check_accept(request)
        version, _, tail = request.url.path[len(PREFIX) + 1 :].partition("/")
        parts = tail.split("/") if tail else []
        if version != VERSION or any(p == "" for p in parts):
            raise route_not_found()
        provider = _provider(request)
        if not parts:
            return json_response(request, resource_list(provider.list_all_metrics() if provider else []))
        if len(parts) != 3 or parts[0] != "namespaces":
            raise route_not_found()
        namespace, metric = parts[1], parts[2]
        if len(namespace) > 63 or not _DNS1123_LABEL.match(namespace):
            raise BadRequest(
                f"invalid namespace name {namespace[:80]!r}: must be a lowercase RFC 1123 label "
                "of at most 63 characters"
            )
        selector = _selector(request)
        if provider is None:
            raise route_not_found(f"external metric {metric!r}")
        items = await provider.get(namespace, metric, selector)
        return json_response(request, value_list(items))
    except AdapterError as err:
        return error_response(request, err)
    except Exception:  # a bug: log it with its stack, answer a Status without one
        log.exception("unhandled error for %s", request.url.path)
        return error_response(request, InternalError("an internal error occurred; see the adapter's log"))
