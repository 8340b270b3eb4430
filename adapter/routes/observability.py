"""HTTP in for observability: ``GET /metrics``, ``GET|POST /explain`` and the request-metrics middleware.

The middleware wraps the whole app (it counts what authentication rejects too) and labels each request
with a bounded route name: the matched route's (``custom_metrics.labels``), else ``classify``'s — never with
the raw path, which a client controls.
"""

from __future__ import annotations

import functools
import gzip
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from adapter.api.groups import EXTERNAL_PREFIX, VERSIONS
from adapter.api.groups import PREFIX as API_PREFIX
from adapter.errors import AdapterError, BadRequest, ConfigError, InternalError, Unsupported
from adapter.explain import ExplainSource, Explanation, explain, to_text
from adapter.explain.manifest import ManifestParser
from adapter.observability import Observability
from adapter.provider.base import MetricsProvider
from adapter.routes import custom_metrics
from adapter.routes.http import error_response

log = logging.getLogger("adapter.routes")

# The classic text format: every Prometheus 2.x parses it.
METRICS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_FIXED = {
    "/apis": "apis",
    API_PREFIX: "group",
    "/metrics": "metrics",
    "/explain": "explain",
    "/livez": "health",
    "/healthz": "health",
    "/readyz": "health",
    "/version": "version",
    "/openapi/v2": "openapi",
    "/openapi/v3": "openapi",
}


def classify(path: str) -> tuple[str, str, str | None, str | None]:
    """``(route, version, metric, resource)`` of a request path; route and version are bounded sets.

    Routes: apis, group, discovery, selector (``.../{resource}/*/{metric}``), object (a named namespaced
    object), root_object, namespace_metric (``namespaces/{ns}/metrics/{metric}``), api_other, external
    (anything under external.metrics.k8s.io), metrics, explain, health, version, openapi, other. Version is
    v1beta1, v1beta2, other, or "" off the API.
    """
    fixed = _FIXED.get(path.rstrip("/") or path)
    if fixed is not None:
        return fixed, "", None, None
    if path.startswith(EXTERNAL_PREFIX + "/") or path.rstrip("/") == EXTERNAL_PREFIX:
        ext_version = path[len(EXTERNAL_PREFIX) + 1 :].partition("/")[0]
        return "external", ext_version if ext_version in ("", "v1beta1") else "other", None, None
    if not path.startswith(API_PREFIX + "/"):
        return "other", "", None, None
    version, _, tail = path[len(API_PREFIX) + 1 :].partition("/")
    version = version if version in VERSIONS else "other"
    parts = tail.split("/") if tail else []
    if not parts:
        return "discovery", version, None, None
    if len(parts) == 4 and parts[0] == "namespaces" and parts[2] == "metrics":
        return "namespace_metric", version, parts[3], "namespaces"
    if len(parts) == 5 and parts[0] == "namespaces":
        return ("selector" if parts[3] == "*" else "object"), version, parts[4], parts[2]
    if len(parts) == 3:
        return "root_object", version, parts[2], parts[0]
    return "api_other", version, None, None


class RequestMetrics:
    """Pure ASGI middleware: count and time every HTTP request; note requests for unknown metrics."""

    def __init__(self, app: ASGIApp, observability: Observability) -> None:
        self.app = app
        self.obs = observability

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the server answers if the app raises before starting a response

        async def record_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, record_status)
        finally:
            # The matched route's labels; classify() for requests no explicit route matched.
            route, version, metric, resource = custom_metrics.labels(scope) or classify(scope["path"])
            self.obs.request(route, version, status, time.perf_counter() - started)
            if status == 404 and metric is not None and resource is not None:
                self._maybe_unknown(scope, metric, resource)

    def _maybe_unknown(self, scope: Scope, metric: str, resource: str) -> None:
        # Only 404s get here, so listing the catalog's metrics costs nothing on the served path.
        app = scope.get("app")
        provider: MetricsProvider | None = getattr(getattr(app, "state", None), "metrics_provider", None)
        if provider is None:
            return
        if metric not in {info.metric for info in provider.list_all_metrics()}:
            self.obs.unknown_metric(metric, resource)


async def metrics(request: Request) -> Response:
    """``GET /metrics``: the Prometheus text exposition of the app's own registry."""
    obs: Observability = request.app.state.observability
    body = obs.exposition()
    if "gzip" in request.headers.get("accept-encoding", ""):
        # Prometheus asks for gzip; a 1,000-pod exposition shrinks about 10x at the cheapest level.
        return Response(
            gzip.compress(body, compresslevel=1),
            media_type=METRICS_CONTENT_TYPE,
            headers={"Content-Encoding": "gzip", "Vary": "Accept-Encoding"},
        )
    return Response(body, media_type=METRICS_CONTENT_TYPE)


async def _hpa_from_body(request: Request) -> Any:
    from adapter.hpa.spec import load_hpa

    try:
        body = await request.body()
    except ClientDisconnect:  # the body did not arrive (the connection's body deadline, or the client left)
        raise BadRequest("the request body was not received") from None
    if not body.strip():
        return None
    parser: ManifestParser | None = getattr(request.app.state, "manifest_parser", None)
    if parser is None:  # one per app, made on the app's event loop (its semaphore belongs to that loop)
        parser = request.app.state.manifest_parser = ManifestParser()
    doc = await parser.parse(body)  # off the event loop, bounded (explain/manifest.py)
    if not isinstance(doc, dict):
        raise BadRequest("the request body must be one HorizontalPodAutoscaler manifest")
    return load_hpa(doc)


async def explain_endpoint(request: Request) -> Response:
    """``GET /explain?namespace=NS&metric=M&(selector=SEL|deployment=NAME)[&format=text]``.

    ``POST`` with an HPA manifest (YAML or JSON) as the body adds the replicas that HPA would want.
    Answers JSON (``Explanation.to_json``) or, with ``format=text``, the tables as plain text.
    """
    try:
        ex = await _explain(request)
    except AdapterError as err:
        return error_response(request, err)
    except ConfigError as err:  # an HPA manifest the model cannot read
        return error_response(request, BadRequest(str(err)))
    except Exception:  # a bug: log it with its stack, answer without one
        log.exception("explain failed")
        return error_response(request, InternalError("explain failed; see the adapter's log"))
    if request.query_params.get("format") == "text":
        return PlainTextResponse(to_text(ex))
    return Response(json.dumps(ex.to_json(), indent=2) + "\n", media_type="application/json")


async def _explain(request: Request) -> Explanation:
    source: ExplainSource | None = getattr(request.app.state, "explain_source", None)
    if source is None:
        raise Unsupported("explain needs a provider that can explain its values (the Prometheus-backed one)")
    params = request.query_params
    namespace, metric = params.get("namespace"), params.get("metric")
    if not namespace or not metric:
        raise BadRequest("namespace and metric are required, and one of selector or deployment")
    hpa = await _hpa_from_body(request) if request.method == "POST" else None
    return await explain(
        source,
        namespace=namespace,
        metric=metric,
        selector=params.get("selector"),
        deployment=params.get("deployment"),
        hpa=hpa,
        may_read=_may_read(request, namespace),
    )


def _may_read(request: Request, namespace: str) -> Callable[[str], Awaitable[bool]] | None:
    """Whether the caller may read a further metric an HPA manifest names (the middleware authorized the path
    and the metric explained): the same review as reading it through the API (``app.py`` sets the check).
    None without authorization."""
    check: Callable[[Any, str, str], Awaitable[bool]] | None = getattr(request.app.state, "may_read_metric", None)
    user = request.scope.get("extensions", {}).get("user")
    return None if check is None or user is None else functools.partial(check, user, namespace)


def add_routes(app: Any) -> None:
    """Register ``/metrics`` and ``/explain`` on ``app`` (a Starlette/FastAPI app)."""
    app.add_route("/metrics", metrics, methods=["GET"])
    app.add_route("/explain", explain_endpoint, methods=["GET", "POST"])
