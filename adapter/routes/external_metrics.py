"""HTTP in for external.metrics.k8s.io: method and content negotiation, then ``api/external.py``; thin.

Errors are metav1.Status documents, as on the custom metrics routes.
"""

from __future__ import annotations

import logging

from starlette.requests import Request
from starlette.responses import Response

from adapter.api.external import ExternalStorage, api_group
from adapter.api.groups import EXTERNAL_PREFIX as PREFIX
from adapter.api.wire import api_group as custom_api_group
from adapter.errors import AdapterError, InternalError, MethodNotAllowed
from adapter.routes.http import check_accept, error_response, json_response

log = logging.getLogger("adapter.routes")


async def apis(request: Request) -> Response:
    """``/apis``: both groups this server serves (the aggregator's discovery; never a 503)."""
    return json_response(
        request, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [custom_api_group(), api_group()]}
    )


async def group(request: Request) -> Response:
    return json_response(request, api_group())


async def metrics_api(request: Request) -> Response:
    """Everything under ``/apis/external.metrics.k8s.io/{version}/...``."""
    try:
        if request.method != "GET":
            raise MethodNotAllowed("the server does not allow this method on the requested resource", details={})
        check_accept(request)
        storage: ExternalStorage = request.app.state.external_storage
        path = request.url.path[len(PREFIX) + 1 :]
        return json_response(request, await storage.get(path, request.query_params))
    except AdapterError as err:
        return error_response(request, err)
    except Exception:  # a bug: log it with its stack, answer a Status without one
        log.exception("unhandled error for %s", request.url.path)
        return error_response(request, InternalError("an internal error occurred; see the adapter's log"))
