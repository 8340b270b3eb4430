"""Shared HTTP helpers for the routes: content negotiation, pretty-printing, Status responses."""

from __future__ import annotations

import logging
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from adapter.api.wire import error_headers, go_json, status
from adapter.errors import AdapterError, NotAcceptable

log = logging.getLogger("adapter.routes")

JSON = "application/json"
_PRETTY_AGENTS = ("curl", "Wget", "Mozilla/5.0")


def check_accept(request: Request) -> None:
    """We speak JSON only. The HPA sends ``application/vnd.kubernetes.protobuf, */*`` and must get JSON
    (client-go rest/request.go setAcceptHeader); a client that accepts nothing we speak gets 406."""
    accept = request.headers.get("accept", "")
    if not accept.strip():
        return
    for part in accept.split(","):
        media = part.split(";")[0].strip().lower()
        if media in ("*/*", "application/*", JSON, "application/json;stream=watch"):
            return
    raise NotAcceptable("only the following media types are accepted: application/json")


def is_pretty(request: Request) -> bool:
    """apiserver negotiate.go isPrettyPrint: ?pretty=true, or a curl/wget/browser User-Agent."""
    pretty = request.query_params.get("pretty")
    if pretty is not None:
        return pretty in ("1", "true", "True")
    return request.headers.get("user-agent", "").startswith(_PRETTY_AGENTS)


def json_response(request: Request, doc: Any, code: int = 200) -> Response:
    return Response(go_json(doc, pretty=is_pretty(request)), status_code=code, media_type=JSON)


def error_response(request: Request, err: AdapterError) -> Response:
    if err.code >= 500:
        log.warning("%s %s -> %d: %s", request.method, request.url.path, err.code, err.message)
    response = json_response(request, status(err), err.code)
    response.headers.update(error_headers(err))
    return response


def plain_not_found() -> Response:
    """Go's http.NotFound, what an apiserver answers outside its registered prefixes."""
    return Response(b"404 page not found\n", status_code=404, media_type="text/plain; charset=utf-8")
