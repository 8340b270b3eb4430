"""HTTPS serving: the SSL context, certificate rotation without restart, and the peer certificate in scope.

uvicorn verifies client certificates but does not hand them to the app (no ASGI ``tls`` extension), so a
small subclass of its httptools protocol puts the verified leaf (DER) into ``scope["extensions"]["tls"]``
(test-infrastructure.md). Rotation: the files are polled; a changed serving pair is loaded into the live
context (new handshakes use it), new CAs are added to its trust store, and the authenticator is given the
current CA set, so a CA removed from the files stops vouching for anyone at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from adapter.tasks import BackgroundLoop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TLSFiles:
    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    requestheader_ca_file: str | None = None

    def paths(self) -> list[str]:
        return [p for p in (self.cert_file, self.key_file, self.client_ca_file, self.requestheader_ca_file) if p]


def build_context(files: TLSFiles, extra_ca_pem: str = "") -> ssl.SSLContext:
    """A TLS ≥ 1.2 server context; client certificates are requested and verified when CAs are known."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(files.cert_file, files.key_file)
    cas = [p for p in (files.client_ca_file, files.requestheader_ca_file) if p]
    for ca in cas:
        ctx.load_verify_locations(cafile=ca)
    if extra_ca_pem.strip():
        ctx.load_verify_locations(cadata=extra_ca_pem)
    if cas or extra_ca_pem.strip():
        ctx.verify_mode = ssl.CERT_OPTIONAL
    return ctx


class CertReloader:
    """Polls the TLS files and applies changes to the live context (and tells the authenticator)."""

    def __init__(self, ctx: ssl.SSLContext, files: TLSFiles, on_ca_change: Callable[[], None] | None = None,
                 interval_s: float = 5.0) -> None:
        self.ctx = ctx
        self.files = files
        self.on_ca_change = on_ca_change
        self.interval_s = interval_s
        self._mtimes = self._stat()
        self._loop = BackgroundLoop("cert-reloader", self._poll, interval_s, log=log)
        self.reloads = 0

    def _stat(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for p in self.files.paths():
            try:
                out[p] = os.stat(p).st_mtime_ns
            except OSError:
                out[p] = -1
        return out

    def check(self) -> bool:
        """Reload what changed; True if anything did. A half-written pair is retried on the next poll."""
        now = self._stat()
        changed = {p for p in now if now[p] != self._mtimes.get(p)}
        if not changed:
            return False
        try:
            if changed & {self.files.cert_file, self.files.key_file}:
                self.ctx.load_cert_chain(self.files.cert_file, self.files.key_file)
            for ca in (self.files.client_ca_file, self.files.requestheader_ca_file):
                if ca and ca in changed:
                    self.ctx.load_verify_locations(cafile=ca)
                    self.ctx.verify_mode = ssl.CERT_OPTIONAL
        except (ssl.SSLError, OSError) as exc:
            log.warning("TLS files changed but could not be loaded yet: %s", exc)
            return False
        self._mtimes = now
        self.reloads += 1
        if self.on_ca_change is not None:
            self.on_ca_change()
        log.info("reloaded TLS files: %s", ", ".join(sorted(changed)))
        return True

    async def _poll(self) -> None:
        self.check()

    def start(self) -> None:
        self._loop.start()

    async def close(self) -> None:
        await self._loop.stop()


class PeerCertProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, plus the verified client leaf certificate in every request's scope."""

    _peer_der: bytes | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        ssl_object = transport.get_extra_info("ssl_object")
        self._peer_der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {"tls": {"client_cert_der": self._peer_der}}


class TLSConfig(uvicorn.Config):
    """uvicorn.Config that serves with our own (reloadable) SSLContext."""

    def __init__(self, app: Any, ssl_context: ssl.SSLContext, **kwargs: Any) -> None:
        super().__init__(app, http=PeerCertProtocol, **kwargs)
        self._ssl_context = ssl_context

    def load(self) -> None:
        super().load()
        self.ssl = self._ssl_context
