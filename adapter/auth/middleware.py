"""ASGI middleware: authenticate, then authorize, every request before the app sees it.

Health paths skip both (kubelet probes carry no credentials). ``/explain`` needs two decisions: the
non-resource path, and reading the namespace's metric it shows (``user.explain_attributes``). No
credentials or invalid ones → 401, a denial → 403 with upstream's message, a review that cannot be made → 503,
a caller over its share of the review lane (``authz.TooManyReviews``) → 429 with ``Retry-After``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

from adapter.api.wire import error_headers, go_json, status
from adapter.auth.authn import AuthenticationError, Authenticator
from adapter.auth.authz import Authorizer, TooManyReviews, forbidden
from adapter.auth.user import EXPLAIN_PATH, explain_attributes, request_attributes
from adapter.errors import AdapterError, UpstreamError

log = logging.getLogger(__name__)


class Unauthorized(AdapterError):
    code = 401
    reason = "Unauthorized"


class AuthMiddleware:
    def __init__(self, app: ASGIApp, authenticator: Callable[[], Authenticator], authorizer: Authorizer) -> None:
        self.app = app
        self.authenticator = authenticator  # a getter: the CA files may be reloaded while we run
        self.authorizer = authorizer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        if path in self.authorizer.always_allow_paths:
            await self.app(scope, receive, send)
            return
        peer = scope.get("extensions", {}).get("tls", {}).get("client_cert_der")
        try:
            user = await self.authenticator().authenticate(scope["headers"], peer)
        except AuthenticationError as exc:
            log.info("authentication failed for %s: %s", path, exc)
            user = None
        except UpstreamError as exc:
            log.warning("token review failed: %s", exc.message)
            user = None
        if user is None:
            await _reply(send, Unauthorized("Unauthorized"))
            return
        query: bytes = scope.get("query_string", b"")
        checks = [request_attributes(user, scope["method"], path, query)]
        if path == EXPLAIN_PATH:
            explained = explain_attributes(user, query)
            if explained is not None:
                checks.append(explained)  # and the namespace's data it shows (user.explain_attributes)
        for attrs in checks:
            try:
                allowed, reason = await self.authorizer.authorize(attrs)
            except UpstreamError as exc:
                await _reply(send, UpstreamError(f"authorization review failed: {exc.message}"))
                return
            except TooManyReviews as exc:
                await _reply(send, exc)
                return
            if not allowed:
                await _reply(send, forbidden(attrs, reason))
                return
        scope.setdefault("extensions", {})["user"] = user
        await self.app(scope, receive, send)


async def _reply(send: Send, err: AdapterError) -> None:
    body = go_json(status(err))
    headers: list[tuple[bytes, bytes]] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((name.encode(), value.encode()) for name, value in error_headers(err).items()),
    ]
    start: dict[str, Any] = {"type": "http.response.start", "status": err.code, "headers": headers}
    await send(start)
    await send({"type": "http.response.body", "body": body})
