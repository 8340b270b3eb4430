"""The Prometheus / VictoriaMetrics HTTP client: the outgoing edge.

httpx errors are translated into ``UpstreamError`` here and nowhere else (principle: translate foreign errors
once, at the boundary). Queries go out as POST form bodies so a selector over 1,000 pods never makes an
over-long URL. The transport is injected: tests may pass ``httpx.MockTransport``; integration tests use
real servers.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Literal

import httpx

from adapter.errors import UpstreamError
from adapter.query.promql import PromQL
from adapter.query.results import RangeSeries, parse_matrix, parse_vector
from adapter.samples import Sample

log = logging.getLogger(__name__)

Backend = Literal["prometheus", "victoriametrics"]
# Observer hook: (backend, endpoint, seconds, outcome) — observability.py plugs its histograms in here.
QueryObserver = Callable[[str, str, float, str], None]


class PromClient:
    """Async client for the Prometheus HTTP API (``/api/v1/query``, ``/api/v1/query_range``)."""

    def __init__(self, base_url: str, *, http: httpx.AsyncClient, backend: Backend = "prometheus",
                 timeout_s: float = 5.0, max_concurrency: int = 32,
                 observer: QueryObserver | None = None, cache_ttl_s: float = 0.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.backend = backend
        self._http = http
        self._timeout = httpx.Timeout(timeout_s)
        self._timeout_s = timeout_s
        # Bounds what one adapter replica can ask of the backend at once, whatever the HPAs do.
        self._sem = asyncio.Semaphore(max_concurrency)
        self._observer = observer
        self.reachable: bool | None = None
        self.cache_ttl_s = cache_ttl_s
        self._cache: dict[str, tuple[float, list[Sample]]] = {}
        self._inflight: dict[str, asyncio.Future[list[Sample]]] = {}
        self.coalesced = 0  # answers served without a round-trip of their own

    def _params(self, extra: dict[str, str]) -> dict[str, str]:
        if self.backend == "victoriametrics":
            # VM caches query results and evaluates "now" at now-30s by default; an explicit time plus
            # nocache=1 gives the same answer Prometheus would (test-infrastructure.md).
            extra["nocache"] = "1"
        return extra

    async def _post(self, endpoint: str, form: dict[str, str]) -> tuple[bytes, int]:
        url = f"{self.base_url}{endpoint}"
        started = time.perf_counter()
        outcome = "error"
        try:
            async with self._sem:
                resp = await self._http.post(url, content=form_encode(form), timeout=self._timeout,
                                             headers=_FORM_HEADERS)
            body = resp.content
            self.reachable = True
            outcome = "ok" if resp.status_code < 400 else f"http_{resp.status_code}"
            if resp.status_code >= 500 or resp.status_code in (401, 403, 404, 405, 429):
                # 5xx: the backend is failing; 401/403/404: misconfigured URL or auth. Either way the
                # client should retry later, so it is a 503 for the HPA, never a number.
                detail = _error_text(body)
                raise UpstreamError(f"backend answered HTTP {resp.status_code} for {endpoint}{detail}")
            return body, resp.status_code
        except httpx.TimeoutException:
            outcome = "timeout"
            raise UpstreamError(f"backend did not answer {endpoint} within {self._timeout_s:g}s") from None
        except httpx.TransportError as exc:
            outcome = "unreachable"
            self.reachable = False
            raise UpstreamError(f"backend unreachable at {self.base_url}: {type(exc).__name__}") from None
        finally:
            if self._observer is not None:
                self._observer(self.backend, endpoint, time.perf_counter() - started, outcome)

    async def query(self, promql: PromQL, at: float) -> list[Sample]:
        """Instant query evaluated at unix time ``at``.

        Identical queries share one upstream round-trip: concurrent callers await the same request
        (single-flight), and with ``cache_ttl_s`` > 0 an answer is reused for that long (keep it below the
        data's resolution: the scrape interval). A failed answer is never cached.
        """
        now = time.monotonic()
        hit = self._cache.get(promql)
        if hit is not None and now - hit[0] < self.cache_ttl_s:
            self.coalesced += 1
            return hit[1]
        flight = self._inflight.get(promql)
        if flight is not None:
            self.coalesced += 1
            return await asyncio.shield(flight)
        flight = asyncio.ensure_future(self._query(promql, at))
        self._inflight[promql] = flight
        try:
            result = await asyncio.shield(flight)
        finally:
            self._inflight.pop(promql, None)
        if self.cache_ttl_s > 0:
            if len(self._cache) > 4096:  # bounded: drop everything old at once
                self._cache = {k: v for k, v in self._cache.items() if now - v[0] < self.cache_ttl_s}
            self._cache[promql] = (now, result)
        return result

    async def _query(self, promql: PromQL, at: float) -> list[Sample]:
        body, status = await self._post("/api/v1/query", self._params({"query": promql, "time": f"{at:.3f}"}))
        return parse_vector(body, status)

    async def query_range(self, promql: PromQL, start: float, end: float, step_s: float) -> list[RangeSeries]:
        """Range query over [start, end] at ``step_s`` resolution."""
        form = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}"}
        body, status = await self._post("/api/v1/query_range", self._params(form))
        return parse_matrix(body, status)


_FORM_HEADERS = {"Content-Type": "application/x-www-form-urlencoded"}
# application/x-www-form-urlencoded, one C-level translate() pass: urllib's quote_plus walks the bytes in a
# Python list comprehension, ~1 ms for a selector over 100 pods (measured); ASCII is all PromQL needs.
_FORM_TABLE = {c: (chr(c) if chr(c).isascii() and (chr(c).isalnum() or chr(c) in "_.-~") else f"%{c:02X}")
               for c in range(128)}
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


def _error_text(body: bytes) -> str:
    text = body[:200].decode("utf-8", "replace").strip()
    return f": {text}" if text else ""
