"""The backend's credentials, read from files and re-read when they change: what lets a rotated token or
certificate take effect without a restart.

- ``FileSecret``: a bearer token or basic-auth file, re-read whenever the file changes (stat: inode, size,
  mtime), so a projected ServiceAccount token that the kubelet rotates is picked up; an unreadable file at
  request time is an ``UpstreamError`` (a 503, logged with the path, never the content).
- ``TLSReloader``: a rotated client certificate (and CA bundle) loaded into the live ``SSLContext`` for new
  connections.
- ``FileAuth``: the ``httpx.Auth`` that sets ``Authorization`` from them per request (one stat) and lets the
  reloader look at the TLS files first.

Secrets never appear in logs or error messages: every value read is registered with ``log_redaction``.
"""

from __future__ import annotations

import base64
import logging
import os
import ssl
import threading
from collections.abc import Callable, Generator

import httpx

from adapter.backend_access import BackendAccess
from adapter.errors import ConfigError, UpstreamError
from adapter.log_redaction import register_secret

log = logging.getLogger(__name__)


class FileSecret:
    """A secret kept in a file, re-read whenever the file changes (inode, size or mtime), thread-safe.

    ``parse`` turns the file's text into the value (e.g. strip a token's newline). A missing or unreadable file
    is an ``UpstreamError`` with a generic message (the path goes to the log, the content nowhere).
    """

    def __init__(self, path: str, what: str, parse: Callable[[str], str]) -> None:
        self.path = path
        self._what = what
        self._parse = parse
        self._stamp: tuple[int, int, int] | None = None
        self._value = ""
        self._lock = threading.Lock()

    def get(self) -> str:
        try:
            st = os.stat(self.path)
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            with self._lock:
                if stamp != self._stamp:
                    with open(self.path, encoding="utf-8") as fh:
                        value = self._parse(fh.read())
                    if self._stamp is not None:
                        log.info("backend %s file %s changed: using its new content", self._what, self.path)
                    self._value, self._stamp = value, stamp
                return self._value
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            log.warning("cannot read the backend %s file %s: %s", self._what, self.path, type(exc).__name__)
            raise UpstreamError(f"the backend {self._what} file cannot be read") from None


def _token(text: str) -> str:
    token = text.strip()
    if not token or any(c in token for c in "\r\n"):
        raise ValueError("empty or multi-line token")
    register_secret(token)
    return token


def _basic(text: str) -> str:
    line = text.strip()
    user, sep, password = line.partition(":")
    if not sep or not user or "\n" in line:
        raise ValueError("expected one line USER:PASSWORD")
    credential = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    register_secret(password)
    register_secret(credential)
    return "Basic " + credential


def _stamp(path: str | None) -> tuple[int, int, int] | None:
    if not path:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_size, st.st_mtime_ns


class TLSReloader:
    """Loads a changed client certificate / key (and a changed CA bundle) into the live ``SSLContext``, so a
    certificate that cert-manager or the kubelet rotates is used by new connections without a restart.

    Checked per request (a few stats). A half-rotated pair (new certificate, old key) fails to load: the old one
    stays in use and the next request tries again. A changed CA bundle is added to what is trusted (OpenSSL
    cannot forget a CA), which is what a CA rollover needs.
    """

    def __init__(self, ctx: ssl.SSLContext, access: BackendAccess) -> None:
        self._ctx = ctx
        self._access = access
        self._stamps = self._now()
        self._lock = threading.Lock()

    def _now(self) -> tuple[tuple[int, int, int] | None, ...]:
        a = self._access
        return _stamp(a.cert_file), _stamp(a.key_file), _stamp(a.ca_file)

    def check(self) -> None:
        stamps = self._now()
        if stamps == self._stamps:
            return
        with self._lock:
            if stamps == self._stamps:
                return
            a = self._access
            try:
                if a.cert_file and stamps[:2] != self._stamps[:2]:
                    self._ctx.load_cert_chain(a.cert_file, a.key_file)
                    log.info("backend client certificate %s changed: new connections use it", a.cert_file)
                if a.ca_file and stamps[2] != self._stamps[2] and not a.insecure_skip_verify:
                    self._ctx.load_verify_locations(cafile=a.ca_file)
                    log.info("backend CA file %s changed: its certificates are trusted too", a.ca_file)
            except (OSError, ssl.SSLError) as exc:
                log.warning(
                    "backend TLS files changed but do not load (yet): %s; keeping the previous ones", type(exc).__name__
                )
                return
            self._stamps = stamps


class FileAuth(httpx.Auth):
    """``Authorization`` from a bearer-token file or a basic-auth file, read per request (cheap: one stat);
    also the hook that lets ``TLSReloader`` look at the TLS files before each request."""

    def __init__(self, access: BackendAccess, tls: TLSReloader | None = None) -> None:
        self._token = FileSecret(access.token_file, "bearer token", _token) if access.token_file else None
        self._basic = FileSecret(access.basic_auth_file, "basic auth", _basic) if access.basic_auth_file else None
        self._tls = tls

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self._tls is not None:
            self._tls.check()
        if self._token is not None:
            request.headers["Authorization"] = "Bearer " + self._token.get()
        elif self._basic is not None:
            request.headers["Authorization"] = self._basic.get()
        elif request.url.username or request.url.password:
            # Credentials in --prometheus-url itself (https://user:pass@host): what httpx does with no auth set.
            userinfo = f"{request.url.username}:{request.url.password}"
            request.headers["Authorization"] = "Basic " + base64.b64encode(userinfo.encode()).decode("ascii")
        yield request

    def check(self) -> None:
        """Read the files once at start-up so a wrong path is a ConfigError, not a 503 at the first query."""
        for secret in (self._token, self._basic):
            if secret is not None:
                try:
                    secret.get()
                except UpstreamError:
                    raise ConfigError(
                        f"cannot read {secret.path} (or it is empty / not in the expected format)"
                    ) from None
