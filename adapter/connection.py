"""The HTTP/1.1 connection protocol the server speaks (an ``asyncio.Protocol``, not a ``typing.Protocol``):
uvicorn's httptools protocol with limits in front.

Why httptools and not h11: both are safe once bounded (h11 with ``h11_max_incomplete_event_size``), but
httptools (llhttp, C) is what every figure in ``benchmarks/`` was measured with, and h11 served about half the
requests per second (``benchmarks/serving_protocol.py``: best rounds 0.46x httptools, the guards 0.93x);
h11's bound also covers only the header bytes, not slow clients or the connection count.
llhttp sets no limit of its own: httptools accumulates each header value in memory as it arrives, so
without a guard five clients sending 250 MB header blocks held 1.4 GB before any check in the app ran.

``ServingProtocol`` adds, per connection, before a byte reaches the parser:

* a **head size bound**: request line plus headers may be at most ``max_head_bytes``; the data is fed to the
  parser in slices and counted while the head is incomplete, so the parser never holds more than the bound
  (plus one slice). Over it: ``431`` and the connection is closed.
* a **header count bound** (``max_headers``): thousands of tiny headers cost far more memory than their bytes.
* a **head read timeout** (``header_timeout_s``): a request head must be complete within this time of its
  first byte (or of the connection being made); otherwise ``408`` and close. This is Go's
  ``http.Server.ReadHeaderTimeout``, which kube-apiserver sets to 32 s
  (kubernetes/apiserver ``pkg/server/secure_serving.go``). Idle keep-alive connections are closed by uvicorn's
  ``timeout_keep_alive`` as before.
* a **body bound** (``max_body_bytes``): a declared ``Content-Length`` over it, or a body that grows past it,
  gets ``413`` and the connection is dropped. Only ``POST /explain`` reads a body (one HPA manifest), and it
  read it whole into memory.
* a **body read deadline** (``body_timeout_s`` plus the declared length at ``min_body_rate``): a request body
  must be complete within this time of its head; otherwise ``408`` and close. A body is only ever read after
  its head was accepted, so together with the head timeout every byte a client owes has a deadline.
* **no keep-alive with a body outstanding**: when the app answers before it has read the request's whole body
  (a ``401`` to a client without credentials, any early error), the connection is dropped after the answer
  instead of being kept alive for the rest of a body that may never come (uvicorn cancels its keep-alive timer
  on every byte received and re-arms it only when a response completes, so one body byte a minute kept such
  a connection open for ever).
* a **connection cap** (``max_connections``): a connection made while that many are open is answered ``503``
  and closed at once, so a flood of slow connections cannot grow memory without bound.
* a **share per client address** (``max_connections_per_address``): one address may hold at most this many of
  the shared connections; one more is answered ``503`` and closed, so one pod cannot take the whole cap.
* a **reserved pool for the front proxy** (``front_proxy_connections``): a connection whose TLS client
  certificate is a valid front-proxy certificate (issued by the request-header CA, an allowed CN: what
  kube-aggregator presents when it forwards the HPA controller's requests) is counted in its own pool, never
  against the shared cap nor the per-address share. All front-proxied traffic comes from the kube-apiserver's
  few addresses; a per-address cap applied to it would starve every HPA, and a flood that fills the shared
  cap must not either.

And, over TLS, the verified client leaf certificate (DER) in ``scope["extensions"]["tls"]``: uvicorn verifies
client certificates but does not hand them to the app (test-infrastructure.md).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from adapter.routes.limits import MAX_HEADER_BYTES, MAX_TARGET_BYTES

# Data is fed to the parser in slices this big while a head is incomplete, so an oversized head is caught
# within one slice of the bound; a body is fed the same way (bodies here are small: /explain's HPA manifest).
_SLICE = 16 * 1024
# A refused connection is aborted this long after its error answer was written (time for it to leave).
_ABORT_AFTER_S = 0.5
# Refusals are counted in /metrics; the log says so at most this often per cap (a flood is one line, not 1,000/s).
_LOG_EVERY_S = 10.0


@dataclass(frozen=True)
class ServingLimits:
    """Per-server connection limits (see the module docstring). The defaults and why:

    * ``max_head_bytes``: the app's own 64 KiB header limit plus its 32 KiB request-target limit plus 1 KiB
      for the request line and line ends, so every head the app would accept reaches it (and gets its
      Kubernetes ``Status`` 431 when over the app's finer limits).
    * ``max_headers``: kube-aggregator forwards one ``X-Remote-Group`` header per group and one
      ``X-Remote-Extra-*`` per extra value; 500 leaves room for users in hundreds of groups.
    * ``max_connections``: the HPA controller, kube-aggregator, the kubelet's probes and one Prometheus need
      tens of connections. At 1,000 the worst case held by slow clients, each bounded by the head limit
      (about 160 KiB with parser state), is about 160 MB: well inside the Deployment's 1 GiB memory limit
      on top of the adapter's ~100 MB.
    * ``header_timeout_s``: kube-apiserver's ReadHeaderTimeout (32 s).
    * ``max_body_bytes``: kube-apiserver's limit on request bodies, 3 MiB (kubernetes/apiserver
      ``pkg/server/config.go``, ``MaxRequestBodyBytes``); an HPA manifest is a few KiB.
    * ``body_timeout_s`` and ``min_body_rate``: the body must arrive within 32 s (the head's budget) plus its
      declared length at 64 KiB/s, so the largest body allowed (3 MiB) has 80 s; an HPA manifest has 32 s.
    * ``max_connections_per_address``: the clients that connect directly (the kubelet's probes, one
      monitoring Prometheus, kubectl port-forwards) need a handful each; 64 leaves room for several behind
      one address (a node's SNAT) while 16 addresses are needed to fill the shared cap.
    * ``front_proxy_connections``: kube-aggregator opens a connection per concurrent proxied request per
      kube-apiserver; 256 covers several apiservers, each with the HPA controller's 5 workers and kubectl
      users, and bounds the reserved memory at about 40 MB (the same 160 KiB per connection).
    """

    max_head_bytes: int = MAX_HEADER_BYTES + MAX_TARGET_BYTES + 1024
    max_headers: int = 500
    max_connections: int = 1000
    header_timeout_s: float = 32.0
    max_body_bytes: int = 3 * 1024 * 1024
    body_timeout_s: float = 32.0
    min_body_rate: float = 64 * 1024
    max_connections_per_address: int = 64
    front_proxy_connections: int = 256


DEFAULT_LIMITS = ServingLimits()

# (the peer's DER client certificate) -> True when it is a valid front-proxy certificate (see the module docstring)
FrontProxyCheck = Callable[[bytes], bool]


@dataclass
class ConnectionShares:
    """The server-wide connection counts behind the caps: shared connections per client address, the
    front-proxy pool, and how many connections each cap refused (exported in ``/metrics``). One instance per
    server, shared by all its connections (they all run on the event loop's thread)."""

    by_address: Counter[str] = field(default_factory=Counter)
    shared: int = 0
    front_proxy: int = 0
    refused: Counter[str] = field(default_factory=Counter)  # cap -> connections refused
    closed_with_body_pending: int = 0
    body_timeouts: int = 0
    logged_at: dict[str, float] = field(default_factory=dict)  # cap -> when a refusal was last logged


def connection_shares(config: Any) -> ConnectionShares:
    """The server's ``ConnectionShares`` (kept on its config, which every connection of the server shares)."""
    shares: ConnectionShares | None = getattr(config, "connection_shares", None)
    if shares is None:
        shares = ConnectionShares()
        config.connection_shares = shares
    return shares


def _plain_response(code: int, phrase: bytes, message: bytes) -> bytes:
    return (
        b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %d\r\n"
        b"connection: close\r\n\r\n%s" % (code, phrase, len(message), message)
    )


class ServingProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the limits of ``config.serving_limits`` and the peer certificate."""

    def __init__(self, config: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.limits: ServingLimits = getattr(config, "serving_limits", DEFAULT_LIMITS)
        self._peer_der: bytes | None = None
        self._in_head = True  # the bytes arriving now belong to a request head
        self._head_bytes = 0
        self._header_count = 0
        self._body_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_pending = False  # a head was accepted and its body is not complete yet
        self._refused = False  # answered 4xx/503 by the protocol itself: read nothing more
        self.shares = connection_shares(config)
        self._front_proxy_check: FrontProxyCheck | None = getattr(config, "front_proxy_check", None)
        self._pool: str | None = None  # "shared" or "front_proxy" once counted
        self._address = ""

    # ------------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        self._peer_der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        refusal = self._admit()
        if refusal is not None:
            self.shares.refused[refusal] += 1
            now = self.loop.time()
            if now - self.shares.logged_at.get(refusal, -_LOG_EVERY_S) >= _LOG_EVERY_S:  # a flood: a line per 10 s
                self.shares.logged_at[refusal] = now
                self.logger.warning(
                    "%s cap reached: refusing connections (this one from %s; %d refused so far)",
                    refusal.replace("_", " "),
                    self._address,
                    self.shares.refused[refusal],
                )
            message = (
                b"too many connections from your address\n" if refusal == "per_address" else b"too many connections\n"
            )
            self._refuse(503, b"Service Unavailable", message)
            return
        self._arm_head_timer()

    def _admit(self) -> str | None:
        """Count this connection in its pool, or name the cap it is over (and count it nowhere)."""
        shares, limits = self.shares, self.limits
        self._address = self.client[0] if self.client else ""
        if (
            self._peer_der is not None
            and self._front_proxy_check is not None
            and self._front_proxy_check(self._peer_der)
        ):
            if shares.front_proxy >= limits.front_proxy_connections:
                return "front_proxy"
            shares.front_proxy += 1
            self._pool = "front_proxy"
            return None
        if shares.shared >= limits.max_connections:
            return "max_connections"
        if shares.by_address[self._address] >= limits.max_connections_per_address:
            return "per_address"
        shares.shared += 1
        shares.by_address[self._address] += 1
        self._pool = "shared"
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        self._cancel_body_timer()
        if self._pool == "front_proxy":
            self.shares.front_proxy -= 1
        elif self._pool == "shared":
            self.shares.shared -= 1
            self.shares.by_address[self._address] -= 1
            if self.shares.by_address[self._address] <= 0:
                del self.shares.by_address[self._address]
        self._pool = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        view = memoryview(data)
        while view and not self._refused and not self.transport.is_closing():
            piece, view = view[:_SLICE], view[_SLICE:]
            if self._in_head:
                if self._head_bytes == 0 and self._head_timer is None:
                    self._arm_head_timer()
                self._head_bytes += len(piece)
                if self._head_bytes > self.limits.max_head_bytes:
                    self._refuse(431, b"Request Header Fields Too Large", b"request head too large\n")
                    return
            super().data_received(piece.tobytes())

    # ------------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {"tls": {"client_cert_der": self._peer_der}}

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self.limits.max_headers:
            self._refuse(431, b"Request Header Fields Too Large", b"too many request headers\n")
            return
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._refused or self.transport.is_closing():
            return  # refused while parsing this head: no request to start
        self._in_head = False
        self._cancel_head_timer()
        declared = next((v for k, v in self.headers if k == b"content-length"), b"0")
        if not declared.isdigit() or int(declared) > self.limits.max_body_bytes:
            self._refuse(413, b"Content Too Large", b"request body too large\n")
            return
        chunked = any(k == b"transfer-encoding" for k, _ in self.headers)
        if int(declared) > 0 or chunked:
            self._body_pending = True
            length = int(declared) if not chunked else self.limits.max_body_bytes
            self._arm_body_timer(self.limits.body_timeout_s + length / self.limits.min_body_rate)
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        if self._refused:
            return
        self._body_bytes += len(body)
        if self._body_bytes > self.limits.max_body_bytes:  # chunked: no length declared up front
            self._refuse(413, b"Content Too Large", b"request body too large\n")
            return
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._in_head or self._refused:
            return  # this head was refused (connection closing): no request was started
        self._body_pending = False
        self._cancel_body_timer()
        super().on_message_complete()
        # The next bytes are the next request's head (keep-alive or pipelining): count and time it afresh.
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        self._body_bytes = 0

    def on_response_complete(self) -> None:
        """An answer went out before its request's body was read whole (a 401 without credentials, any early
        error): drop the connection rather than keep it alive for a body that may never come."""
        if self._body_pending and not self.pipeline and not self._refused:
            self.shares.closed_with_body_pending += 1
            self.server_state.total_requests += 1
            self._drop()
            return
        super().on_response_complete()

    # ------------------------------------------------------------------ helpers

    def _arm_body_timer(self, seconds: float) -> None:
        self._cancel_body_timer()
        self._body_timer = self.loop.call_later(seconds, self._body_timed_out)

    def _cancel_body_timer(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_timed_out(self) -> None:
        self._body_timer = None
        if self._body_pending and not self._refused and not self.transport.is_closing():
            self.shares.body_timeouts += 1
            self._refuse(408, b"Request Timeout", b"request body not received in time\n")

    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self._in_head and not self._refused and not self.transport.is_closing():
            self._refuse(408, b"Request Timeout", b"request head not received in time\n")

    def _refuse(self, code: int, phrase: bytes, message: bytes) -> None:
        """Answer ``code``, stop reading, and drop the connection; nothing of this request reaches the app.

        Not a graceful ``close()``: over TLS that waits (up to 30 s) for the client's close_notify while still
        reading and decrypting whatever it sends, so a client could go on streaming its header block. Reading
        stops at once and the connection is aborted once the answer has had time to leave."""
        self._cancel_head_timer()
        if self._refused:
            return
        answering = self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete
        if not answering:  # never write into the middle of an answer already on its way
            self.transport.write(_plain_response(code, phrase, message))
        self._drop()

    def _drop(self) -> None:
        """Stop reading and abort the connection once what was written has had time to leave."""
        self._refused = True
        self._cancel_body_timer()
        self._unset_keepalive_if_required()
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.keep_alive = False
        self.transport.pause_reading()
        self.loop.call_later(_ABORT_AFTER_S, self.transport.abort)
