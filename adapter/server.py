"""Build the uvicorn server for the app: HTTPS with the security stack, or explicit plain HTTP.

Both speak HTTP/1.1 through ``ServingProtocol`` (adapter/connection.py): bounded request heads, a head read
timeout and a connection cap, in front of the app, before any byte is buffered without limit. The TLS
handshake, which happens before the protocol sees the connection, is bounded by the same timeout through
the event loop (``_HandshakeTimeout``).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from adapter.app import create_app
from adapter.auth.setup import Security
from adapter.connection import DEFAULT_LIMITS, ConnectionShares, FrontProxyCheck, ServingLimits, ServingProtocol
from adapter.settings import Settings


class _HandshakeTimeout:
    """Event-loop mixin: servers with TLS get ``ssl_handshake_timeout`` (uvicorn passes none, so the loop's
    60 s default applied). A TLS connection reaches ``ServingProtocol`` only after its handshake, so this is
    what bounds a client that connects and never finishes (or never starts) the handshake."""

    handshake_timeout_s: float = 60.0

    async def create_server(self, *args: Any, **kwargs: Any) -> asyncio.Server:
        if kwargs.get("ssl") is not None:
            kwargs.setdefault("ssl_handshake_timeout", self.handshake_timeout_s)
        server: asyncio.Server = await super().create_server(*args, **kwargs)  # type: ignore[misc]
        return server


def _loop_factory(timeout_s: float) -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop when installed (what uvicorn's "auto" picks), else asyncio's selector loop, with the mixin."""
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvicorn[standard] brings uvloop

        class SelectorLoop(_HandshakeTimeout, asyncio.SelectorEventLoop):
            handshake_timeout_s = timeout_s

        return SelectorLoop

    class UVLoop(_HandshakeTimeout, uvloop.Loop):  # type: ignore[misc]  # uvloop stubs vs AbstractEventLoop
        handshake_timeout_s = timeout_s

    return UVLoop


class ServingConfig(uvicorn.Config):
    """uvicorn.Config that serves with ``ServingProtocol`` and its limits, and with our own (reloadable)
    SSLContext when one is given (uvicorn would otherwise build a fresh context from file names)."""

    def __init__(
        self,
        app: Any,
        *,
        limits: ServingLimits,
        ssl_context: ssl.SSLContext | None = None,
        front_proxy_check: FrontProxyCheck | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(app, http=ServingProtocol, **kwargs)
        self.serving_limits = limits
        self.front_proxy_check = front_proxy_check  # connections it accepts get the reserved pool
        self.connection_shares = ConnectionShares()
        self._ssl_context = ssl_context

    def load(self) -> None:
        super().load()
        if self._ssl_context is not None:
            self.ssl = self._ssl_context

    def get_loop_factory(self) -> Callable[[], asyncio.AbstractEventLoop] | None:
        """uvicorn's extension point for the event loop: ours bounds TLS handshakes by the head timeout."""
        return _loop_factory(self.serving_limits.header_timeout_s)


class FrontDoorCollector(Collector):
    """``/metrics`` series for the front door's shares: open connections per pool, connections refused per cap,
    connections dropped (body pending after an early answer, body too slow), reviews refused over a share."""

    def __init__(self, shares: ConnectionShares, security: Security | None) -> None:
        self.shares = shares
        self.security = security

    def collect(self) -> list[Metric]:
        prefix = "llm_hpa_adapter_"
        s = self.shares
        open_ = GaugeMetricFamily(prefix + "connections_open", "Open client connections, by pool", labels=["pool"])
        open_.add_metric(["shared"], s.shared)
        open_.add_metric(["front_proxy"], s.front_proxy)
        refused = CounterMetricFamily(
            prefix + "connections_refused",
            "Connections answered 503 and closed at once, by the cap they were over "
            "(max_connections, per_address, front_proxy)",
            labels=["cap"],
        )
        for cap in ("max_connections", "per_address", "front_proxy"):
            refused.add_metric([cap], s.refused[cap])
        dropped = CounterMetricFamily(
            prefix + "connections_dropped",
            "Connections closed by the server while a request body was outstanding: body_pending (answered "
            "before the body was read), body_timeout (408: the body did not arrive in time)",
            labels=["reason"],
        )
        dropped.add_metric(["body_pending"], s.closed_with_body_pending)
        dropped.add_metric(["body_timeout"], s.body_timeouts)
        out: list[Metric] = [open_, refused, dropped]
        if self.security is not None:
            reviews = CounterMetricFamily(
                prefix + "reviews_refused",
                "Requests answered 429 because their caller had its share of authorization reviews in flight",
                labels=["reason"],
            )
            reviews.add_metric(["user_share"], self.security.authorizer.refused_over_share)
            out.append(reviews)
        return out


def make_server(
    settings: Settings,
    *,
    host: str,
    port: int,
    security: Security | None,
    clock: Callable[[], float] = time.time,
    log_level: str = "info",
    limits: ServingLimits = DEFAULT_LIMITS,
    **app_kwargs: Any,
) -> uvicorn.Server:
    """``security=None`` means plain HTTP without authentication (``--insecure-plain-http``)."""
    app = create_app(settings, clock=clock, security=security, **app_kwargs)
    config = ServingConfig(
        app,
        limits=limits,
        ssl_context=security.ssl_context if security else None,
        # a getter through ``security``: the request-header CA may be reloaded while we serve
        front_proxy_check=(lambda der: security.authenticator.is_front_proxy(der)) if security else None,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan="on",
    )
    app.state.observability.registry.register(FrontDoorCollector(config.connection_shares, security))
    return uvicorn.Server(config)
