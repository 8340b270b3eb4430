"""Health, version and OpenAPI endpoints.

They read only interfaces the app publishes on ``app.state``: ``metrics_provider`` (a ``MetricsProvider``:
what is served) and ``pod_source`` (a ``PodSource``: is it synced) -- never a provider's internals."""

from __future__ import annotations

import platform

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response

from adapter import __version__
from adapter.api.groups import VERSIONS
from adapter.api.openapi import discovery_document, group_version_document
from adapter.errors import route_not_found
from adapter.provider.base import MetricsProvider
from adapter.routes.http import error_response, json_response


async def livez(request: Request) -> Response:
    return PlainTextResponse("ok")


async def readyz(request: Request) -> Response:
    """Ready once the pod source can answer (its first list has arrived), and while this replica reaches its
    metrics backend (``adapter/query/reachability.py`` states the rule). Never waits on the backend."""
    pods = getattr(request.app.state, "pod_source", None)
    if pods is not None and not pods.ready():
        return PlainTextResponse("pod source not synced yet\n", status_code=503)
    client = getattr(request.app.state, "client", None)
    if client is not None:
        ready, why = client.readiness()
        if not ready:
            return PlainTextResponse(why + "\n", status_code=503)
    return PlainTextResponse("ok")


async def version(request: Request) -> Response:
    # Shaped like k8s.io/apimachinery version.Info. The kubectl dispatcher picks a kubectl by the
    # server's minor version, so we name the API level we implement and put our own version in gitVersion.
    return json_response(
        request,
        {
            "major": "1",
            "minor": "32",
            "gitVersion": f"v1.32.0+llm-hpa-adapter.{__version__}",
            "gitCommit": "",
            "gitTreeState": "",
            "buildDate": "",
            "goVersion": "",
            "compiler": "cpython",
            "platform": f"{platform.system().lower()}/{platform.machine()}",
        },
    )


async def openapi(request: Request) -> Response:
    # /openapi/v2: 404 is what kube-aggregator treats as "this server publishes no spec" and skips
    # gracefully (kube-aggregator pkg/controllers/openapi/aggregator/downloader.go).
    return error_response(request, route_not_found())


def _served_metrics(request: Request) -> list[str]:
    provider: MetricsProvider = request.app.state.metrics_provider
    return sorted({m.metric for m in provider.list_all_metrics()})


async def openapi_v3(request: Request) -> Response:
    return json_response(request, discovery_document(_served_metrics(request)))


async def openapi_v3_group_version(request: Request) -> Response:
    version = request.path_params["version"]
    if version not in VERSIONS:
        return error_response(request, route_not_found())
    return json_response(request, group_version_document(version, _served_metrics(request)))
