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
import re
import ssl
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import TYPE_CHECKING, TypeVar

import httpx

from adapter.errors import UpstreamError
from adapter.query.backend import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_SERIES,
    Flavour,
    flavour_params,
    open_http,
    redact_url,
    resolve_url,
)
from adapter.query.bounds import AnswerBudget, SeriesCounter
from adapter.query.promql import PromQL
from adapter.query.reachability import Reachability
from adapter.query.results import (
    BackendAnswerError,
    ParseDeadline,
    ParseLimits,
    Parser,
    PartialAnswer,
    RangeSeries,
    TooManySeries,
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


class _Busy(Exception):
    """The budget of answer bytes held at once is spent."""


def pool_limits(max_concurrency: int) -> httpx.Limits:
    """The connection pool for a client whose semaphore admits ``max_concurrency`` exchanges: twice as many
    connections. The headroom absorbs connections httpcore fails to give back (encode/httpcore #1093, #830:
    a request cancelled while it waits for a pooled connection can leave one behind for good), and it makes
    ``httpx.PoolTimeout`` proof of such a leak: the semaphore never lets more exchanges in than there are
    connections."""
    return httpx.Limits(max_connections=2 * max_concurrency, max_keepalive_connections=max_concurrency)


class PromClient:
    """Async client for the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``).

    ``timeout_s`` is a total deadline per query: waiting for a concurrency slot, connecting, sending, reading
    the whole body and parsing it (a backend that trickles bytes cannot hold a request, or the callers
    single-flighted onto it, past it). Client-facing error messages never carry the backend's address or its
    error text; both go to the log.

    Bounds (each a 503 for the query that meets it, counted by outcome through the observer):

    - ``max_concurrency`` exchanges at once (a semaphore). An exchange is never cancelled inside the connection
      pool: it runs in a task of its own, bounded by httpx's own pool/connect/write/read timeouts
      (``timeout_s`` each), which keeps its concurrency slot until it ends, even when its caller has given up at
      the deadline; the body read checks the deadline between chunks (an exception raised there closes the
      response cleanly, a cancellation would not). A ``PoolTimeout`` nevertheless (a leaked pool, see
      ``pool_limits``) replaces the HTTP client with a fresh one from ``http_factory``.
    - ``max_answer_bytes`` per answer and ``max_answer_series`` series per answer, both counted while the body
      streams in (abandoned at the first byte or series over), the series again exactly while parsing.
    - ``parse_budget_bytes``: answer bytes held (read or being parsed) at once across all queries; a query that
      would exceed it is refused rather than queued (the memory of parsed JSON is ~10x its size).
    - parsing runs off the event loop for big answers and stops at the deadline.

    ``clock`` (monotonic seconds, a parameter for tests) times the answer cache.
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
        max_answer_series: int = DEFAULT_MAX_ANSWER_SERIES,
        parse_budget_bytes: int | None = None,
        http_factory: Callable[[], httpx.AsyncClient] | None = None,
        reachability: Reachability | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.backend = backend
        self._http = http
        self._http_factory = http_factory
        # The pool wait gets half the deadline: the semaphore admits fewer exchanges than the pool has connections
        # (pool_limits), so any wait for one means leaked connections, and this way the query that meets a wedge
        # learns it (PoolTimeout, counted as pool_wedged) before its own deadline.
        self._timeout = httpx.Timeout(timeout_s, pool=timeout_s / 2)
        self._timeout_s = timeout_s
        self.max_answer_bytes = max_answer_bytes
        self.max_answer_series = max_answer_series
        self._budget = AnswerBudget(max(parse_budget_bytes or 0, max_answer_bytes))
        self._params = flavour_params(backend)
        self._where = redact_url(self.base_url)  # for log lines only
        # Bounds what one adapter replica can ask of the backend at once, whatever the HPAs do.
        self.max_concurrency = max_concurrency
        self._sem = asyncio.Semaphore(max_concurrency)
        self._tasks: set[asyncio.Task[object]] = set()  # exchanges, probes and retired clients closing
        self._observer = observer
        self.reachable: bool | None = None
        self.reachability = reachability or Reachability()
        self.pool_replacements = 0
        self.cache_ttl_s = cache_ttl_s
        # Answers (and queries in flight) shared by identical queries; 0 s keeps nothing but still shares.
        self._answers: TtlCache[str, list[Sample]] = TtlCache(lambda _: self.cache_ttl_s, max_entries=4096, clock=clock)

    def _spawn(self, coro: Coroutine[object, object, T]) -> asyncio.Task[T]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _fetch(self, endpoint: str, form: dict[str, str], parse: Parser[T]) -> T:
        """POST ``form`` to ``endpoint`` and parse the answer, all within the deadline."""
        started = time.perf_counter()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._timeout_s  # loop.time() is time.monotonic()
        outcome = "error"
        held = 0
        try:
            async with asyncio.timeout_at(deadline):
                await self._sem.acquire()  # cancelling a wait here is safe: nothing is in the pool yet
            exchange = self._spawn(self._exchange(endpoint, form, deadline))
            try:
                async with asyncio.timeout_at(deadline):
                    body, status, held = await asyncio.shield(exchange)
            except BaseException:
                exchange.add_done_callback(self._release_abandoned)
                raise
            outcome = f"http_{status}" if status >= 400 else "error"
            if status >= 500 or status in (401, 403, 404, 405, 429):
                # 5xx: the backend is failing; 401/403/404: misconfigured URL or credentials. Either way
                # the client should retry later, so it is a 503 for the HPA, never a number.
                raise BackendAnswerError(
                    f"backend answered HTTP {status} for {endpoint}", f"{_HINTS.get(status, '')}{_error_text(body)}"
                )
            limits = ParseLimits(deadline=deadline, max_series=self.max_answer_series)
            try:
                if len(body) >= _PARSE_OFF_LOOP_BYTES:
                    result = await asyncio.to_thread(parse, body, status, limits)
                else:
                    result = parse(body, status, limits)
            except (BackendAnswerError, TooManySeries, ParseDeadline):
                raise
            except UpstreamError as err:  # not JSON, malformed: log what came instead
                raise BackendAnswerError(err.message, f"{_HINTS.get(status, '')}{_error_text(body)}") from None
            outcome = "ok" if status < 400 else outcome
            return result
        except (TimeoutError, httpx.TimeoutException, ParseDeadline) as exc:
            outcome = "timeout"
            if not isinstance(exc, ParseDeadline):  # a parse past the deadline had its answer: reachable
                self.reachability.failed()
            if isinstance(exc, httpx.PoolTimeout):
                outcome = "pool_wedged"
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
        except TooManySeries:
            outcome = "too_many_series"
            metric = _metric_of(form.get("query", ""))
            log.warning(
                "backend %s%s: answer for %s has more than %d series (--backend-max-answer-series); abandoned",
                self._where,
                endpoint,
                metric,
                self.max_answer_series,
            )
            raise UpstreamError(
                f"the backend's answer for {metric} has more than {self.max_answer_series} series "
                "(--backend-max-answer-series); refused"
            ) from None
        except _Busy:
            outcome = "parse_budget"
            log.warning(
                "backend %s%s: %d answer bytes already held (--backend-max-parse-bytes); query refused",
                self._where,
                endpoint,
                self._budget.total,
            )
            raise UpstreamError("too much backend answer data is being read at once; retry") from None
        except httpx.DecodingError as exc:
            # e.g. ``Content-Encoding: gzip`` on a body that is not: the backend answered, with bytes we cannot read.
            outcome = "undecodable"
            log.warning("backend %s%s: answer does not decode: %s", self._where, endpoint, exc)
            raise UpstreamError("the backend's answer could not be decoded (see the adapter's log)") from None
        except httpx.TransportError as exc:
            outcome = "unreachable"
            self.reachable = False
            self.reachability.failed()
            log.warning("backend %s%s unreachable: %s: %s", self._where, endpoint, type(exc).__name__, exc)
            raise UpstreamError(f"backend unreachable: {_transport_reason(exc)}") from None
        except BackendAnswerError as err:
            if isinstance(err, PartialAnswer):
                outcome = "partial"
            log.warning("backend %s%s: %s: %s", self._where, endpoint, err.message, err.log_detail)
            raise
        finally:
            self._budget.give(held)
            if self._observer is not None:
                self._observer(self.backend, endpoint, time.perf_counter() - started, outcome)

    def _release_abandoned(self, exchange: asyncio.Task[tuple[bytes, int, int]]) -> None:
        """An exchange whose caller gave up: give back the answer bytes it read, once it ends."""
        if not exchange.cancelled() and exchange.exception() is None:
            self._budget.give(exchange.result()[2])

    async def _exchange(self, endpoint: str, form: dict[str, str], deadline: float) -> tuple[bytes, int, int]:
        """One HTTP exchange, holding a concurrency slot until it ends: (body, status, budget bytes held)."""
        try:
            http = self._http
            request = http.build_request(
                "POST",
                f"{self.base_url}{endpoint}",
                params=self._params,
                content=form_encode(form),
                headers=_FORM_HEADERS,
                timeout=self._timeout,
            )
            try:
                # Bounded by httpx's own timeouts, never cancelled by us: see the class doc.
                resp = await http.send(request, stream=True)
            except httpx.PoolTimeout:
                self._pool_wedged(http)
                raise
            return await self._read(resp, deadline)
        finally:
            self._sem.release()

    async def _read(self, resp: httpx.Response, deadline: float) -> tuple[bytes, int, int]:
        held = 0
        try:
            self.reachable = True
            self.reachability.answered()
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_answer_bytes:
                raise _TooBig
            chunks: list[bytes] = []
            series = SeriesCounter(self.max_answer_series)
            loop = asyncio.get_running_loop()
            # The deadline is checked between chunks, never by cancelling the read: a cancellation delivered
            # inside httpcore's stream can interrupt its shielded close, and the pool then keeps that request
            # and its connection for good (measured: every body read cut by asyncio.timeout leaked one). A
            # trickling backend is bounded by the read timeout per chunk plus this check.
            async for chunk in resp.aiter_bytes():  # decoded: a gzip bomb counts at its real size
                if held + len(chunk) > self.max_answer_bytes:
                    raise _TooBig
                if not self._budget.take(len(chunk)):
                    raise _Busy
                held += len(chunk)
                series.feed(chunk)
                chunks.append(chunk)
                if loop.time() > deadline:
                    raise TimeoutError
            return b"".join(chunks), resp.status_code, held
        except BaseException:
            self._budget.give(held)
            raise
        finally:
            await resp.aclose()

    def _pool_wedged(self, http: httpx.AsyncClient) -> None:
        """A PoolTimeout although the semaphore admits fewer exchanges than the pool has connections: the pool
        has lost connections for good. Replace the client (once per wedged client); close the old one."""
        if http is not self._http:
            return  # already replaced
        if self._http_factory is None:
            log.error("backend connection pool is wedged (connections leaked) and cannot be replaced here")
            return
        try:
            self._http = self._http_factory()
        except Exception as exc:  # e.g. a credentials file unreadable right now: keep the old, retry next time
            log.error("backend connection pool is wedged; building a fresh one failed: %s", type(exc).__name__)
            return
        self.pool_replacements += 1
        log.error(
            "backend connection pool was wedged (no connection free while at most %d exchanges run): "
            "replaced by a fresh pool (%d so far)",
            self.max_concurrency,
            self.pool_replacements,
        )
        self._spawn(http.aclose())

    async def probe(self) -> None:
        """One cheap query (``1``) that updates ``reachability``; its failure is only logged."""
        with contextlib.suppress(UpstreamError):
            await self._fetch("/api/v1/query", {"query": "1"}, parse_vector)

    def readiness(self) -> tuple[bool, str]:
        """``reachability.ready()``, after starting a background probe when one is due (never waits)."""
        if self.reachability.probe_due() and not any(t.get_name() == "backend-probe" for t in self._tasks):
            self._spawn(self.probe()).set_name("backend-probe")
        return self.reachability.ready()

    async def aclose(self) -> None:
        """Stop what still runs (exchanges past their deadline, probes) and close the HTTP client."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        await self._http.aclose()

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

    async def series(self, match: str, start: float, parse: Parser[T]) -> T:
        """``/api/v1/series`` for one ``match[]`` selector since unix time ``start`` (no end: up to now), read
        by ``parse`` (body, HTTP status, limits); the same deadline, bounds and error translation as a query."""
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
    limits from ``settings`` (``backend_settings(args)`` fills them from argv), its pool sized by
    ``pool_limits``. Closes its HTTP client on exit. With an injected ``transport`` (tests), a wedged pool is
    not replaced (the transport is the caller's)."""
    access = settings.backend_access
    url = resolve_url(settings.prometheus_url, settings.backend, access)
    pool = limits or pool_limits(settings.max_upstream_concurrency)

    def make() -> httpx.AsyncClient:
        return open_http(url, settings.backend, access, limits=pool, transport=transport)

    client = PromClient(
        url,
        http=make(),
        http_factory=None if transport is not None else make,
        backend=settings.backend,
        timeout_s=settings.query_timeout_s,
        max_concurrency=settings.max_upstream_concurrency,
        observer=observer,
        cache_ttl_s=settings.catalog.cache_ttl_seconds,
        max_answer_bytes=access.max_answer_bytes,
        max_answer_series=access.max_answer_series,
        parse_budget_bytes=access.max_parse_bytes,
        reachability=Reachability(
            unready_after_s=settings.readyz_unreachable_after_s, probe_interval_s=settings.readyz_probe_interval_s
        ),
    )
    try:
        yield client
    finally:
        await client.aclose()


def _metric_of(promql: str) -> str:
    """The first metric name a query selects (for messages: the catalog's, never the client's text)."""
    found = _METRIC_NAME.search(promql)
    return found.group(1) if found else "the query"


_METRIC_NAME = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{")
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
