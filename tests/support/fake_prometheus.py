"""A fake Prometheus HTTP API for in-process tests: answers keyed by PromQL, errors and held answers on demand.

``FakePrometheus`` is an ``httpx`` transport, so the adapter's real ``PromClient`` (its single-flight, its
answer cache, its error handling) and everything above it run unchanged, with no socket and no process. It
answers ``POST /api/v1/query`` with the vector the test set for that exact PromQL (an empty vector for any
other) and ``POST /api/v1/query_range`` with the same series held constant over the range's steps, counts every
query it receives, answers an HTTP error for a PromQL the test made fail, and holds the answer to a PromQL until
the test releases it (controlled interleaving, no sleeps). It is a fake, not a model of Prometheus: it evaluates
nothing, so the values are the test's; the real-backend tests stay the proof that the rendered PromQL means what
it should.
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

import httpx

from adapter.query.client import PromClient

URL = "http://fake-prometheus.invalid"

Series = tuple[Mapping[str, str], float]


class Gate:
    """Answers held until ``release``: ``arrived`` counts the held queries by PromQL."""

    def __init__(self, match: Callable[[str], bool]) -> None:
        self.match = match
        self.arrived: Counter[str] = Counter()
        self._open = asyncio.Event()
        self._changed = asyncio.Event()

    @property
    def is_open(self) -> bool:
        return self._open.is_set()

    async def hold(self, promql: str) -> None:
        self.arrived[promql] += 1
        self._changed.set()
        await self._open.wait()

    async def reached(self, distinct: int) -> list[str]:
        """Wait until ``distinct`` different PromQL are held here; returns them in order of arrival."""
        while len(self.arrived) < distinct:
            self._changed.clear()
            await self._changed.wait()
        return list(self.arrived)

    def release(self) -> None:
        self._open.set()


class FakePrometheus(httpx.AsyncBaseTransport):
    """``/api/v1/query`` answered from ``answers[promql]``; see the module docstring."""

    def __init__(self, at: float = 0.0) -> None:
        self.at = at  # the sample timestamp every answer carries
        self.answers: dict[str, list[Series]] = {}
        # Asked for a PromQL without an answer of its own (one rendered per pod set, say): None = empty vector.
        self.fallback: Callable[[str], Iterable[Series]] | None = None
        self.failures: dict[str, int] = {}  # PromQL -> the HTTP status answered instead
        self.queries: Counter[str] = Counter()  # PromQL -> how many times it reached the backend
        self._gates: list[Gate] = []

    def answer(self, promql: str, series: Iterable[Series]) -> None:
        """Answer ``promql`` with ``series`` (labels, value) from now on."""
        self.answers[promql] = list(series)

    def fail(self, promql: str, status: int = 503) -> None:
        """Answer ``promql`` with HTTP ``status`` until ``heal``."""
        self.failures[promql] = status

    def heal(self, promql: str) -> None:
        self.failures.pop(promql, None)

    def hold(self, match: str | Callable[[str], bool]) -> Gate:
        """Hold the answers to the PromQL ``match`` names (or accepts) until the returned gate is released."""
        gate = Gate(match if callable(match) else match.__eq__)
        self._gates.append(gate)
        return gate

    @property
    def total(self) -> int:
        """Queries received, all PromQL together."""
        return sum(self.queries.values())

    def client(self, http: httpx.AsyncClient, **kwargs: object) -> PromClient:
        """A real ``PromClient`` whose backend is this fake (``http`` from ``http_client``)."""
        return PromClient(URL, http=http, **kwargs)  # type: ignore[arg-type]

    def http_client(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=self)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path not in ("/api/v1/query", "/api/v1/query_range"):
            return httpx.Response(404, text="the fake answers /api/v1/query and /api/v1/query_range only")
        form = urllib.parse.parse_qs((await request.aread()).decode())
        promql = form["query"][0]
        self.queries[promql] += 1
        for gate in self._gates:
            if not gate.is_open and gate.match(promql):
                await gate.hold(promql)
        status = self.failures.get(promql)
        if status is not None:
            body = {"status": "error", "errorType": "unavailable", "error": "failing on demand"}
            return httpx.Response(status, json=body)
        series = self.answers.get(promql)
        if series is None and self.fallback is not None:
            series = list(self.fallback(promql))
        if request.url.path == "/api/v1/query_range":
            start, end, step = (float(form[k][0]) for k in ("start", "end", "step"))
            steps = [start + i * step for i in range(int((end - start) / step + 1e-9) + 1)]
            matrix = [
                {"metric": dict(labels), "values": [[t, repr(float(v))] for t in steps]} for labels, v in series or []
            ]
            data = {"resultType": "matrix", "result": matrix}
        else:
            result = [{"metric": dict(labels), "value": [self.at, repr(float(v))]} for labels, v in series or []]
            data = {"resultType": "vector", "result": result}
        return httpx.Response(200, content=json.dumps({"status": "success", "data": data}))
