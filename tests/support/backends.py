"""Real Prometheus / VictoriaMetrics servers as test backends, and loaders that put series into them.

``start_backend("prometheus" | "victoriametrics")`` gives a ``TestBackend``; ``load()`` writes
``Series`` the way a real producer would (remote write into Prometheus, the JSON-lines import API of
VictoriaMetrics) and returns only once the data answers ``/api/v1/query``. The session fixtures in
``tests/conftest.py`` share one server of each kind; tests keep apart by label (``unique_ns``).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from adapter.demo.servers import PrometheusProcess, VictoriaMetricsProcess
from tests.support.remote_write import REMOTE_WRITE_HEADERS, write_request_body

KINDS = ("prometheus", "victoriametrics")
# Samples per HTTP request: large enough to load a day of 15 s history for a few hundred series quickly,
# small enough that a rejected batch names a small slice of the data.
_BATCH_SAMPLES = 20_000


@dataclass(frozen=True)
class Series:
    """One time series to load: ``labels`` include ``__name__``; samples are ``(unix seconds, value)``.

    Values may be NaN or ±Inf. Timestamps are sent with millisecond precision (rounded).
    """

    labels: Mapping[str, str]
    samples: Sequence[tuple[float, float]]


class LoadError(RuntimeError):
    """The backend refused data (the message carries its status and answer)."""


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


def _batches(series: Iterable[Series], size: int) -> Iterator[list[tuple[Mapping[str, str], list[tuple[int, float]]]]]:
    """Split into requests of at most ``size`` samples; a long series is cut across requests."""
    batch: list[tuple[Mapping[str, str], list[tuple[int, float]]]] = []
    room = size
    for s in series:
        samples = [(_ms(t), float(v)) for t, v in s.samples]
        while samples:
            take, samples = samples[:room], samples[room:]
            batch.append((s.labels, take))
            room -= len(take)
            if room == 0:
                yield batch
                batch, room = [], size
    if batch:
        yield batch


def _vm_number(value: float) -> str:
    """A value as VictoriaMetrics' JSON-lines parser takes it.

    Finite floats use ``repr`` (shortest exact). Non-finite values must be the bare lower-case tokens
    ``nan`` / ``inf`` / ``-inf``: measured on 1.79.5, JSON-ish ``NaN``/``Infinity`` and quoted strings make
    it drop the whole line (HTTP 204 all the same, only a log line and ``vm_rows_invalid_total``).
    NaN is accepted but not stored: VictoriaMetrics keeps no NaN samples.
    """
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


# VictoriaMetrics 1.79 drops rows more than two days ahead of its clock (lib/storage/storage.go, "too big
# timestamp") and still answers 204; its counter for that is refreshed only about once a second, too late
# to check after each load. So the loader refuses such rows itself, with a clear error.
_VM_MAX_FUTURE_SECONDS = 2 * 86400


class TestBackend:
    """One real server plus an HTTP client for it; shared by the whole test session."""

    __test__ = False  # a class named Test* is not a pytest test class

    kind: str
    process: PrometheusProcess | VictoriaMetricsProcess

    def __init__(self, kind: str, process: PrometheusProcess | VictoriaMetricsProcess) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown backend kind {kind!r}; expected one of {KINDS}")
        self.kind = kind
        self.process = process
        # trust_env=False: an environment proxy must never see loopback traffic.
        self._client = httpx.Client(timeout=60.0, trust_env=False)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` of the server (stable across its restarts)."""
        return self.process.url

    def load(self, series: Iterable[Series]) -> None:
        """Write the series; when this returns the samples are visible to ``/api/v1/query``.

        Raises ``LoadError`` if the server rejects a batch (e.g. Prometheus: a sample outside the
        out-of-order window, or a different value for an existing timestamp), or, for VictoriaMetrics,
        before sending samples it would silently drop (more than two days in the future). Earlier
        batches stay loaded. VictoriaMetrics keeps no NaN samples (not an error).
        """
        if self.kind == "prometheus":
            self._load_prometheus(series)
        else:
            self._load_victoriametrics(series)

    def _load_prometheus(self, series: Iterable[Series]) -> None:
        for batch in _batches(series, _BATCH_SAMPLES):
            response = self._client.post(
                f"{self.url}/api/v1/write", content=write_request_body(batch), headers=REMOTE_WRITE_HEADERS
            )
            # Remote write commits before answering, so the samples are queryable once we have a 2xx.
            self._check(response, "remote write")

    def _load_victoriametrics(self, series: Iterable[Series]) -> None:
        limit_ms = _ms(time.time() + _VM_MAX_FUTURE_SECONDS)
        for batch in _batches(series, _BATCH_SAMPLES):
            for labels, samples in batch:
                if samples and max(t for t, _ in samples) > limit_ms:
                    raise LoadError(
                        f"victoriametrics would silently drop samples more than 2 days in the future: {dict(labels)}"
                    )
            lines = [
                '{"metric":'
                + json.dumps(dict(labels))
                + ',"values":['
                + ",".join(_vm_number(v) for _, v in samples)
                + '],"timestamps":['
                + ",".join(str(t) for t, _ in samples)
                + "]}"
                for labels, samples in batch
            ]
            response = self._client.post(f"{self.url}/api/v1/import", content="\n".join(lines) + "\n")
            self._check(response, "import")
        # Imported rows sit in memory buffers for up to a few seconds; this makes them searchable now
        # (searchable, not durable: a SIGKILL within ~5 s still loses them).
        self._check(self._client.get(f"{self.url}/internal/force_flush"), "force_flush")

    def _check(self, response: httpx.Response, what: str) -> None:
        if not response.is_success:
            raise LoadError(f"{self.kind} {what} failed: HTTP {response.status_code}: {response.text[:2000]}")

    def api(self, path: str, params: Mapping[str, str | float]) -> Any:
        """GET ``path`` (e.g. ``/api/v1/query``); the ``data`` of a successful Prometheus API answer.

        VictoriaMetrics also gets ``nocache=1`` so it never answers from its rollup cache.
        """
        query = {k: str(v) for k, v in params.items()}
        if self.kind == "victoriametrics":
            query.setdefault("nocache", "1")
        response = self._client.get(self.url + path, params=query)
        body = response.json()
        if response.status_code != 200 or body.get("status") != "success":
            raise LoadError(f"{self.kind} GET {path} failed: HTTP {response.status_code}: {response.text[:2000]}")
        return body["data"]

    def query(self, expr: str, at: float) -> list[dict[str, Any]]:
        """``/api/v1/query`` at unix time ``at``: the vector result (``[{"metric":..,"value":[t,"v"]}]``)."""
        data = self.api("/api/v1/query", {"query": expr, "time": at})
        result: list[dict[str, Any]] = data["result"]
        return result

    def query_range(self, expr: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """``/api/v1/query_range``: the matrix result (``[{"metric":..,"values":[[t,"v"],..]}]``)."""
        data = self.api("/api/v1/query_range", {"query": expr, "start": start, "end": end, "step": step})
        result: list[dict[str, Any]] = data["result"]
        return result

    def close(self) -> None:
        """Close the client, stop the server and delete its data."""
        self._client.close()
        self.process.close()

    def __repr__(self) -> str:
        return f"<TestBackend {self.kind} {self.process!r}>"


def start_backend(kind: str) -> TestBackend:
    """Start a fresh server of ``kind`` and wrap it. Raises ``adapter.demo.servers.BinaryNotFound``."""
    process: PrometheusProcess | VictoriaMetricsProcess = (
        PrometheusProcess() if kind == "prometheus" else VictoriaMetricsProcess()
    )
    if kind not in KINDS:
        raise ValueError(f"unknown backend kind {kind!r}; expected one of {KINDS}")
    process.start()
    return TestBackend(kind, process)
