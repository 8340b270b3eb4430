"""HTTP in for custom.metrics.k8s.io: thin; parsing and rendering live in api/."""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from adapter.api.storage import Storage
from adapter.api.wire import api_group, api_group_list
from adapter.errors import AdapterError, InternalError, MethodNotAllowed
from adapter.routes.http import check_accept, error_response, json_response

log = logging.getLogger("adapter.routes")
PREFIX = "/apis/custom.metrics.k8s.io"


async def apis(request: Request) -> Response:
    """``/apis``: only reached by the aggregator's discovery manager; must never be a 503."""
    return json_response(request, api_group_list())


async def group(request: Request) -> Response:
    return json_response(request, api_group())


async def metrics_api(request: Request) -> Response:
    """Everything under ``/apis/custom.metrics.k8s.io/{version}/...``."""
    storage: Storage = request.app.state.storage
    try:
        if request.method != "GET":
            raise MethodNotAllowed("the server does not allow this method on the requested resource",
                                   details={})
        check_accept(request)
        # Starlette has already percent-decoded the path, so %2A arrives as "*" like the literal form.
        rest = request.url.path[len(PREFIX) + 1:]
        version, _, tail = rest.partition("/")
        parts = tail.split("/") if tail else []
        doc = await storage.get(version, parts, request.query_params)
        return json_response(request, doc)
    except AdapterError as err:
        return error_response(request, err)
    except Exception:  # a bug: log it with its stack, answer a Status without one
        log.exception("unhandled error for %s", request.url.path)
        return error_response(request, InternalError("an internal error occurred; see the adapter's log"))
