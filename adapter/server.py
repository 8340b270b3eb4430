"""Build the uvicorn server for the app: HTTPS with the security stack, or explicit plain HTTP."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import uvicorn

from adapter.app import create_app
from adapter.auth.setup import Security
from adapter.auth.tls import TLSConfig
from adapter.settings import Settings


def make_server(settings: Settings, *, host: str, port: int, security: Security | None,
                clock: Callable[[], float] = time.time, log_level: str = "info", **app_kwargs: Any) -> uvicorn.Server:
    """``security=None`` means plain HTTP without authentication (``--insecure-plain-http``)."""
    app = create_app(settings, clock=clock, security=security, **app_kwargs)
    common: dict[str, Any] = {"host": host, "port": port, "log_level": log_level, "access_log": False,
                              "lifespan": "on"}
    if security is not None:
        config: uvicorn.Config = TLSConfig(app, security.ssl_context, **common)
    else:
        config = uvicorn.Config(app, **common)
    return uvicorn.Server(config)
