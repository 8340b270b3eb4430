"""Build the uvicorn server for the app: HTTPS with the security stack, or explicit plain HTTP.

Both speak HTTP/1.1 through ``ServingProtocol`` (adapter/protocol.py): bounded request heads, a head read
timeout and a connection cap, in front of the app, before any byte is buffered without limit.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import Any

import uvicorn

from adapter.app import create_app
from adapter.auth.setup import Security
from adapter.protocol import DEFAULT_LIMITS, ServingLimits, ServingProtocol
from adapter.settings import Settings


class ServingConfig(uvicorn.Config):
    """uvicorn.Config that serves with ``ServingProtocol`` and its limits, and with our own (reloadable)
    SSLContext when one is given (uvicorn would otherwise build a fresh context from file names)."""

    def __init__(self, app: Any, *, limits: ServingLimits, ssl_context: ssl.SSLContext | None = None,
                 **kwargs: Any) -> None:
        super().__init__(app, http=ServingProtocol, **kwargs)
        self.serving_limits = limits
        self._ssl_context = ssl_context

    def load(self) -> None:
        super().load()
        if self._ssl_context is not None:
            self.ssl = self._ssl_context


def make_server(settings: Settings, *, host: str, port: int, security: Security | None,
                clock: Callable[[], float] = time.time, log_level: str = "info",
                limits: ServingLimits = DEFAULT_LIMITS, **app_kwargs: Any) -> uvicorn.Server:
    """``security=None`` means plain HTTP without authentication (``--insecure-plain-http``)."""
    app = create_app(settings, clock=clock, security=security, **app_kwargs)
    config = ServingConfig(app, limits=limits, ssl_context=security.ssl_context if security else None,
                           host=host, port=port, log_level=log_level, access_log=False, lifespan="on")
    return uvicorn.Server(config)
