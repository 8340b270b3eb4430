"""HTTP in for custom.metrics.k8s.io: the upstream route shapes, registered explicitly; thin.

Per served version, the routes kubernetes-sigs/custom-metrics-apiserver installs
(``pkg/apiserver/installer/cmhandlers.go``), plus discovery at the version's root:

- ``{resource}/{name}/{metric}``: root-scoped objects (here: namespaces);
- ``namespaces/{namespace}/{resource}/{name}/{metric}``: namespaced objects (pods, Deployments);
- ``namespaces/{namespace}/metrics/{metric}``: the metric of the namespace itself.

Anything else under the group's prefix answers what a generic apiserver answers for a registered prefix (a
Status 404, or 405 for a method other than GET), never Go's plain-text 404. Parsing and rendering live in api/.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

from adapter.api.groups import PREFIX, VERSIONS
from adapter.api.storage import Storage
from adapter.api.wire import MetricValueList, api_group, api_group_list
from adapter.errors import AdapterError, InternalError, MethodNotAllowed, route_not_found
from adapter.routes.http import check_accept, error_response, json_response

log = logging.getLogger("adapter.routes")
ALL_METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
Endpoint = Callable[[Request], Awaitable[Response]]
# (route, version, metric, resource): the bounded request-metric labels of a request (routes/observability.py).
Labels = tuple[str, str, str | None, str | None]


async def apis(request: Request) -> Response:
    """``/apis``: only reached by the aggregator's discovery manager; must never be a 503."""
    return json_response(request, api_group_list())


async def group(request: Request) -> Response:
    return json_response(request, api_group())


async def _answer(request: Request, get: Callable[[Storage], Awaitable[dict[str, Any] | MetricValueList]]) -> Response:
    """Method and content negotiation, then ``get``; every error becomes a Status, a bug one without a stack."""
    try:
        if request.method != "GET":  # HEAD too: Starlette adds it to every GET route
            raise MethodNotAllowed("the server does not allow this method on the requested resource", details={})
        check_accept(request)
        return json_response(request, await get(request.app.state.storage))
    except AdapterError as err:
        return error_response(request, err)
    except Exception:  # a bug: log it with its stack, answer a Status without one
        log.exception("unhandled error for %s", request.url.path)
        return error_response(request, InternalError("an internal error occurred; see the adapter's log"))


def _discovery(version: str) -> Endpoint:
    async def discovery(request: Request) -> Response:
        async def get(storage: Storage) -> dict[str, Any]:
            return storage.discovery(version)

        return await _answer(request, get)

    return discovery


def _metric(version: str, shape: str) -> Endpoint:
    """The endpoint of one route shape: "root", "namespaced" or "namespace" (the namespace's own metric)."""

    async def metric(request: Request) -> Response:
        # Starlette matches the percent-decoded path, so %2A arrives as "*" like the literal form.
        p: Mapping[str, str] = request.path_params
        if shape == "namespace":
            namespace, resource, name = None, "namespaces", p["namespace"]
        else:
            namespace, resource, name = p.get("namespace"), p["resource"], p["name"]

        async def get(storage: Storage) -> MetricValueList:
            return await storage.get(version, namespace, resource, name, p["metric"], request.query_params)

        return await _answer(request, get)

    return metric


async def unmatched(request: Request) -> Response:
    """Under the prefix but no route: 405 for other methods, else the generic apiserver's Status 404."""

    async def get(storage: Storage) -> dict[str, Any]:
        raise route_not_found()

    return await _answer(request, get)


_SHAPES = (
    ("namespace", "/namespaces/{namespace}/metrics/{metric}"),
    ("namespaced", "/namespaces/{namespace}/{resource}/{name}/{metric}"),
    ("root", "/{resource}/{name}/{metric}"),
)


def _table() -> tuple[list[tuple[str, Endpoint, list[str]]], dict[Endpoint, tuple[str, str]]]:
    routes: list[tuple[str, Endpoint, list[str]]] = [("/apis", apis, ["GET"]), (PREFIX, group, ["GET"])]
    shapes: dict[Endpoint, tuple[str, str]] = {}
    for version in VERSIONS:
        base = f"{PREFIX}/{version}"
        discovery = _discovery(version)
        shapes[discovery] = (version, "discovery")
        routes += [(base, discovery, ["GET"]), (base + "/", discovery, ["GET"])]
        for shape, path in _SHAPES:
            endpoint = _metric(version, shape)
            shapes[endpoint] = (version, shape)
            routes.append((base + path, endpoint, ["GET"]))
    routes.append((PREFIX + "/{rest:path}", unmatched, ALL_METHODS))  # last: whatever matched nothing above
    return routes, shapes


# Built once: the endpoints are the same objects in every app, so labels() can key on them.
ROUTES, _ENDPOINTS = _table()


def add_routes(app: Any) -> None:
    """Register the group's routes on ``app`` (a Starlette/FastAPI app)."""
    for path, endpoint, methods in ROUTES:
        app.add_route(path, endpoint, methods=methods)


def labels(scope: Scope) -> Labels | None:
    """The request-metric labels of the explicit route ``scope`` was matched to (the router puts the endpoint
    and its path parameters into the scope); None for a request no route of this module matched."""
    found = _ENDPOINTS.get(scope.get("endpoint"))  # type: ignore[arg-type]
    if found is None:
        return None
    version, shape = found
    p: Mapping[str, str] = scope.get("path_params", {})
    if shape == "discovery":
        return "discovery", version, None, None
    if shape == "namespace":
        return "namespace_metric", version, p["metric"], "namespaces"
    if shape == "namespaced":
        return ("selector" if p["name"] == "*" else "object"), version, p["metric"], p["resource"]
    return "root_object", version, p["metric"], p["resource"]
