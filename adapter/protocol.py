"""The HTTP/1.1 connection protocol the server speaks: uvicorn's httptools protocol with limits in front.

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
* a **connection cap** (``max_connections``): a connection made while that many are open is answered ``503``
  and closed at once, so a flood of slow connections cannot grow memory without bound.

And, over TLS, the verified client leaf certificate (DER) in ``scope["extensions"]["tls"]``: uvicorn verifies
client certificates but does not hand them to the app (test-infrastructure.md).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from adapter.routes.limits import MAX_HEADER_BYTES, MAX_TARGET_BYTES

# Data is fed to the parser in slices this big while a head is incomplete, so an oversized head is caught
# within one slice of the bound; a body is fed the same way (bodies here are small: /explain's HPA manifest).
_SLICE = 16 * 1024
# A refused connection is aborted this long after its error answer was written (time for it to leave).
_ABORT_AFTER_S = 0.5


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
    """

    max_head_bytes: int = MAX_HEADER_BYTES + MAX_TARGET_BYTES + 1024
    max_headers: int = 500
    max_connections: int = 1000
    header_timeout_s: float = 32.0
    max_body_bytes: int = 3 * 1024 * 1024


DEFAULT_LIMITS = ServingLimits()


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
        self._refused = False  # answered 4xx/503 by the protocol itself: read nothing more

    # ------------------------------------------------------------------ connection

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        over_cap = len(self.connections) >= self.limits.max_connections
        super().connection_made(transport)
        if over_cap:
            self.logger.warning("connection cap (%d) reached: refusing a new connection", self.limits.max_connections)
            self._refuse(503, b"Service Unavailable", b"too many connections\n")
            return
        ssl_object = transport.get_extra_info("ssl_object")
        self._peer_der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
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
        super().on_message_complete()
        # The next bytes are the next request's head (keep-alive or pipelining): count and time it afresh.
        self._in_head = True
        self._head_bytes = 0
        self._header_count = 0
        self._body_bytes = 0

    # ------------------------------------------------------------------ helpers

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
        self._refused = True
        answering = self.cycle is not None and self.cycle.response_started and not self.cycle.response_complete
        if not answering:  # never write into the middle of an answer already on its way
            self.transport.write(_plain_response(code, phrase, message))
        self.transport.pause_reading()
        self.loop.call_later(_ABORT_AFTER_S, self.transport.abort)
