"""HTTPS serving: the SSL context and certificate rotation without restart.

Rotation: the files are polled; a changed serving pair is first loaded into a scratch context from one
snapshot of both files, and only a pair that loads there (certificate and key match) replaces the live one,
so a rotation that writes the certificate before its key keeps the last good pair serving until the key
arrives. New CAs are added to the live trust store, and the authenticator is given the current CA set, so a
CA removed from the files stops vouching for anyone at once. (The verified client certificate reaches the
app through ``adapter/connection.py``.)
"""

from __future__ import annotations

import logging
import os
import ssl
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

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


def load_pair(ctx: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    """Load the serving pair into ``ctx`` only if it is consistent; else raise and leave ``ctx`` as it was.

    Loading straight into the live context is not safe: OpenSSL installs the new certificate first and drops
    the old key when it does not match, so a new certificate with the old key (or a half-written file) left
    the context with no usable pair. Both files are read once, checked in a scratch context, and the very
    same bytes go into the live one (from a private temporary directory, since ``ssl`` loads from paths).
    """
    cert, key = Path(cert_file).read_bytes(), Path(key_file).read_bytes()
    with tempfile.TemporaryDirectory(prefix="adapter-tls-") as tmp:  # mode 0700
        cert_copy, key_copy = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_copy.write_bytes(cert)
        key_copy.touch(mode=0o600)
        key_copy.write_bytes(key)
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(cert_copy, key_copy)  # raises if inconsistent
        ctx.load_cert_chain(cert_copy, key_copy)


class CertReloader:
    """Polls the TLS files and applies changes to the live context (and tells the authenticator)."""

    def __init__(
        self,
        ctx: ssl.SSLContext,
        files: TLSFiles,
        on_ca_change: Callable[[], None] | None = None,
        interval_s: float = 5.0,
    ) -> None:
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
        """Reload what changed; True if anything did. A pair that does not load (a certificate without its key
        yet, a half-written file) changes nothing and is retried on the next poll; the CAs reload on their own."""
        now = self._stat()
        changed = {p for p in now if now[p] != self._mtimes.get(p)}
        loaded: set[str] = set()
        pair = {self.files.cert_file, self.files.key_file}
        if changed & pair:
            try:
                load_pair(self.ctx, self.files.cert_file, self.files.key_file)
                loaded |= changed & pair
            except (ssl.SSLError, OSError) as exc:
                log.warning(
                    "serving certificate changed but the pair does not load yet (keeping the last good one): %s", exc
                )
        cas_loaded = False
        for ca in (self.files.client_ca_file, self.files.requestheader_ca_file):
            if ca and ca in changed:
                try:
                    self.ctx.load_verify_locations(cafile=ca)
                except (ssl.SSLError, OSError) as exc:
                    log.warning("CA file %s changed but could not be loaded yet: %s", ca, exc)
                    continue
                self.ctx.verify_mode = ssl.CERT_OPTIONAL
                loaded.add(ca)
                cas_loaded = True
        if not loaded:
            return False
        self._mtimes.update({p: now[p] for p in loaded})
        self.reloads += 1
        if cas_loaded and self.on_ca_change is not None:
            self.on_ca_change()
        log.info("reloaded TLS files: %s", ", ".join(sorted(loaded)))
        return True

    async def _poll(self) -> None:
        self.check()

    def start(self) -> None:
        self._loop.start()

    async def close(self) -> None:
        await self._loop.stop()
