"""Request-size guard in front of the app: oversized header sets get a Kubernetes ``Status`` 431 before any work.

The connection protocol (``adapter/connection.py``) already refuses heads past 97 KiB before buffering them (the
memory bound); this finer check answers the heads in between with a proper Status, before routing and
authentication see them.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from adapter.api.wire import go_json, status
from adapter.errors import AdapterError

MAX_HEADER_BYTES = 64 * 1024
MAX_TARGET_BYTES = 32 * 1024


class TooLarge(AdapterError):
    code = 431
    reason = "RequestHeaderFieldsTooLarge"


class SizeLimit:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            header_bytes = sum(len(k) + len(v) + 4 for k, v in scope["headers"])
            target = len(scope.get("raw_path", b"")) + len(scope.get("query_string", b""))
            if header_bytes > MAX_HEADER_BYTES or target > MAX_TARGET_BYTES:
                what = "request headers" if header_bytes > MAX_HEADER_BYTES else "request target"
                body = go_json(status(TooLarge(f"{what} too large")))
                await send(
                    {
                        "type": "http.response.start",
                        "status": 431,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
