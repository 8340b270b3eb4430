"""The Prometheus / VictoriaMetrics HTTP client: the outgoing edge.

httpx errors are translated into ``UpstreamError`` here and nowhere else (principle: translate foreign errors
once, at the boundary). Queries go out as POST form bodies so a selector over 1,000 pods never makes an
over-long URL. The transport is injected: tests may pass ``httpx.MockTransport``; integration tests use
real servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, TypeVar

import httpx

from adapter.errors import UpstreamError
from adapter.query.backend import (
    DEFAULT_MAX_ANSWER_BYTES,
    Flavour,
    flavour_params,
    open_http,
    redact_url,
    resolve_url,
)
from adapter.query.promql import PromQL
from adapter.query.results import (
    BackendAnswerError,
    PartialAnswer,
    RangeSeries,
    parse_matrix,
    parse_vector,
)
from adapter.samples import Sample
from adapter.ttlcache import TtlCache

if TYPE_CHECKING:
    from adapter.settings import Settings

log = logging.getLogger(__name__)

Backend = Flavour
# Observer hook: (backend, endpoint, seconds, outcome) — observability.py plugs its histograms in here.
QueryObserver = Callable[[str, str, float, str], None]
# Answers at least this big are parsed in a worker thread (item by item, see results.py), off the event loop.
_PARSE_OFF_LOOP_BYTES = 256 * 1024
T = TypeVar("T")


class _TooBig(Exception):
    pass


class PromClient:
    """Async client for the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``).

    ``timeout_s`` is a total deadline per query: waiting for a concurrency slot, connecting, sending, reading
    the whole body and parsing it (a backend that trickles bytes cannot hold a request, or the callers
    single-flighted onto it, past it). Answers over ``max_answer_bytes`` are abandoned mid-stream. Client-facing
    error messages never carry the backend's address or its error text; both go to the log.
    """

    def __init__(
        self,
        base_url: str,
        *,
        http: httpx.AsyncClient,
        backend: Backend = "prometheus",
        timeout_s: float = 5.0,
        max_concurrency: int = 32,
        observer: QueryObserver | None = None,
        cache_ttl_s: float = 0.0,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.backend = backend
        self._http = http
        self._timeout = httpx.Timeout(timeout_s)
        self._timeout_s = timeout_s
        self.max_answer_bytes = max_answer_bytes
        self._params = flavour_params(backend)
        self._where = redact_url(self.base_url)  # for log lines only
        # Bounds what one adapter replica can ask of the backend at once, whatever the HPAs do.
        self._sem = asyncio.Semaphore(max_concurrency)
        self._observer = observer
        self.reachable: bool | None = None
        self.cache_ttl_s = cache_ttl_s
        # Answers (and queries in flight) shared by identical queries; 0 s keeps nothing but still shares.
        self._answers: TtlCache[str, list[Sample]] = TtlCache(lambda _: self.cache_ttl_s, max_entries=4096)

    async def _fetch(self, endpoint: str, form: dict[str, str], parse: Callable[[bytes, int], T]) -> T:
        """POST ``form`` to ``endpoint`` and parse the answer, all within the deadline."""
        started = time.perf_counter()
        outcome = "error"
        try:
            async with asyncio.timeout(self._timeout_s):
                async with self._sem:
                    body, status = await self._post(endpoint, form)
                outcome = f"http_{status}" if status >= 400 else "error"
                if status >= 500 or status in (401, 403, 404, 405, 429):
                    # 5xx: the backend is failing; 401/403/404: misconfigured URL or credentials. Either way
                    # the client should retry later, so it is a 503 for the HPA, never a number.
                    raise BackendAnswerError(
                        f"backend answered HTTP {status} for {endpoint}", f"{_HINTS.get(status, '')}{_error_text(body)}"
                    )
                try:
                    if len(body) >= _PARSE_OFF_LOOP_BYTES:
                        result = await asyncio.to_thread(parse, body, status)
                    else:
                        result = parse(body, status)
                except BackendAnswerError:
                    raise
                except UpstreamError as err:  # not JSON, malformed: log what came instead
                    raise BackendAnswerError(err.message, f"{_HINTS.get(status, '')}{_error_text(body)}") from None
                outcome = "ok" if status < 400 else outcome
                return result
        except (TimeoutError, httpx.TimeoutException):
            outcome = "timeout"
            log.warning("backend %s%s: no complete answer within %gs", self._where, endpoint, self._timeout_s)
            raise UpstreamError(f"backend did not answer {endpoint} within {self._timeout_s:g}s") from None
        except _TooBig:
            outcome = "too_big"
            log.warning(
                "backend %s%s: answer larger than %d bytes (--backend-max-answer-bytes); abandoned",
                self._where,
                endpoint,
                self.max_answer_bytes,
            )
            raise UpstreamError(
                f"backend answer to {endpoint} exceeds the {self.max_answer_bytes}-byte limit"
            ) from None
        except httpx.TransportError as exc:
            outcome = "unreachable"
            self.reachable = False
            log.warning("backend %s%s unreachable: %s: %s", self._where, endpoint, type(exc).__name__, exc)
            raise UpstreamError(f"backend unreachable: {_transport_reason(exc)}") from None
        except BackendAnswerError as err:
            if isinstance(err, PartialAnswer):
                outcome = "partial"
            log.warning("backend %s%s: %s: %s", self._where, endpoint, err.message, err.log_detail)
            raise
        finally:
            if self._observer is not None:
                self._observer(self.backend, endpoint, time.perf_counter() - started, outcome)

    async def _post(self, endpoint: str, form: dict[str, str]) -> tuple[bytes, int]:
        request = self._http.build_request(
            "POST",
            f"{self.base_url}{endpoint}",
            params=self._params,
            content=form_encode(form),
            headers=_FORM_HEADERS,
            timeout=self._timeout,
        )
        resp = await self._http.send(request, stream=True)
        try:
            self.reachable = True
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_answer_bytes:
                raise _TooBig
            chunks: list[bytes] = []
            size = 0
            async for chunk in resp.aiter_bytes():  # decoded: a gzip bomb counts at its real size
                size += len(chunk)
                if size > self.max_answer_bytes:
                    raise _TooBig
                chunks.append(chunk)
            return b"".join(chunks), resp.status_code
        finally:
            await resp.aclose()

    async def query(self, promql: PromQL, at: float) -> list[Sample]:
        """Instant query evaluated at unix time ``at``.

        Identical queries share one upstream round-trip: concurrent callers await the same request
        (single-flight), and with ``cache_ttl_s`` > 0 an answer is reused for that long (keep it below the
        data's resolution: the scrape interval). A failed answer is never cached.
        """
        return await self._answers.get(promql, lambda: self._query(promql, at))

    @property
    def coalesced(self) -> int:
        """Answers served without a round-trip of their own (a cached answer, or one already in flight)."""
        return self._answers.shared

    async def _query(self, promql: PromQL, at: float) -> list[Sample]:
        return await self._fetch("/api/v1/query", {"query": promql, "time": f"{at:.3f}"}, parse_vector)

    async def query_range(self, promql: PromQL, start: float, end: float, step_s: float) -> list[RangeSeries]:
        """Range query over [start, end] at ``step_s`` resolution."""
        form = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        return await self._fetch("/api/v1/query_range", form, parse_matrix)

    async def series(self, match: str, start: float, parse: Callable[[bytes, int], T]) -> T:
        """``/api/v1/series`` for one ``match[]`` selector since unix time ``start`` (no end: up to now), read
        by ``parse`` (body, HTTP status); the same deadline, size cap and error translation as a query."""
        return await self._fetch("/api/v1/series", {"match[]": match, "start": f"{start:.3f}"}, parse)


@contextlib.asynccontextmanager
async def open_backend(
    settings: Settings,
    *,
    limits: httpx.Limits | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    observer: QueryObserver | None = None,
) -> AsyncIterator[PromClient]:
    """The ``PromClient`` every command uses: URL layout, flavour, TLS, credentials, headers, timeout and answer
    limit from ``settings`` (``backend_settings(args)`` fills them from argv). Closes its HTTP client on exit."""
    access = settings.backend_access
    url = resolve_url(settings.prometheus_url, settings.backend, access)
    async with open_http(url, settings.backend, access, limits=limits, transport=transport) as http:
        yield PromClient(
            url,
            http=http,
            backend=settings.backend,
            timeout_s=settings.query_timeout_s,
            max_concurrency=settings.max_upstream_concurrency,
            observer=observer,
            cache_ttl_s=settings.catalog.cache_ttl_seconds,
            max_answer_bytes=access.max_answer_bytes,
        )


_FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}
# application/x-www-form-urlencoded, one C-level translate() pass: urllib's quote_plus walks the bytes in a
# Python list comprehension, ~1 ms for a selector over 100 pods (measured); ASCII is all PromQL needs.
_FORM_TABLE = {
    c: (chr(c) if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "_.-~") else f"%{c:02X}") for c in range(128)
}
_FORM_TABLE[ord(" ")] = "+"


def form_encode(form: dict[str, str]) -> bytes:
    """Encode a form body exactly like ``urllib.parse.urlencode`` (quote_plus), faster for ASCII text."""
    parts = []
    for key, value in form.items():
        for text in (key, value):
            if not text.isascii():
                from urllib.parse import quote_plus

                parts.append(quote_plus(text))
            else:
                parts.append(text.translate(_FORM_TABLE))
    return "&".join(f"{parts[i]}={parts[i + 1]}" for i in range(0, len(parts), 2)).encode("ascii")


_HINTS = {
    400: "a gateway refused the request (no or untrusted client certificate? check --backend-cert-file)",
    401: "check --backend-token-file / --backend-basic-auth-file / --backend-cert-file",
    403: "the credentials were accepted but lack access (RBAC, tenant)",
    404: "check --prometheus-url's path prefix (e.g. /prometheus, /select/0/prometheus)",
}


def _error_text(body: bytes) -> str:
    text = body[:200].decode("utf-8", "replace").strip()
    return f" (answer: {text})" if text else ""


def _transport_reason(exc: httpx.TransportError) -> str:
    """A short, address-free reason: the exception type, and for TLS failures what failed."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"{type(exc).__name__} (TLS: the backend's certificate did not verify)"
        if isinstance(cause, ssl.SSLError):
            return f"{type(exc).__name__} (TLS handshake failed)"
        cause = cause.__cause__ or cause.__context__
    return type(exc).__name__
