"""The catalog's forecast load reads demand, not completions, on a real Prometheus and a real VictoriaMetrics.

Three pods of one Deployment, scraped every 15 s for an hour, as a real vLLM exports them:

- ``sat`` is saturated: it completes 4 req/s (its capacity) while 6 req/s arrive, so ``num_requests_waiting``
  grows by 2 per second and ``num_requests_running`` sits at the batch size;
- ``idle`` is below capacity: 3 req/s arrive and complete, and the gauges wander around a constant;
- ``bare`` exports only the success counter (2 req/s): its completions still count.

The catalog's ``load_query``, rendered by the adapter's own renderer, must read the arrivals per pod (6, 3, 2)
where completions alone (the counter's rate) read 4 for the saturated pod.
"""

from __future__ import annotations

import dataclasses
import math
import time

import numpy as np
import pytest

from adapter.catalog import load_catalog
from adapter.labels import EVERYTHING
from adapter.query.promql import Scope, deployment_pods_regex, render
from tests.support.backends import Series, TestBackend

SCRAPE_S = 15.0
HOUR = 3600.0
PODS = {"sat": "llama-6c8d5f7b9-sat01", "idle": "llama-6c8d5f7b9-idl01", "bare": "llama-6c8d5f7b9-bar01"}


def _engine(ns: str, pod: str, name: str, **extra: str) -> dict[str, str]:
    return {"__name__": name, "namespace": ns, "pod": pod, "engine": "0", "model_name": "m", **extra}


def history(ns: str, now: float) -> list[Series]:
    """The three pods' series over the last hour (module docstring)."""
    ts = np.arange(now - HOUR, now + 1.0, SCRAPE_S)
    age = ts - ts[0]
    rng = np.random.default_rng(5)
    out: list[Series] = []

    def add(labels: dict[str, str], values: np.ndarray) -> None:
        out.append(Series(labels, list(zip(ts.tolist(), values.tolist(), strict=True))))

    sat, idle, bare = PODS["sat"], PODS["idle"], PODS["bare"]
    # Completions split over two finish reasons, as vLLM labels them.
    add(_engine(ns, sat, "vllm:request_success_total", finished_reason="stop"), 3.0 * age)
    add(_engine(ns, sat, "vllm:request_success_total", finished_reason="length"), 1.0 * age)
    add(_engine(ns, sat, "vllm:num_requests_waiting"), 2.0 * age)
    add(_engine(ns, sat, "vllm:num_requests_running"), np.full(ts.size, 64.0))
    add(_engine(ns, idle, "vllm:request_success_total", finished_reason="stop"), 3.0 * age)
    add(_engine(ns, idle, "vllm:num_requests_waiting"), np.zeros(ts.size))
    add(_engine(ns, idle, "vllm:num_requests_running"), rng.integers(8, 13, size=ts.size).astype(float))
    add(_engine(ns, bare, "vllm:request_success_total", finished_reason="stop"), 2.0 * age)
    return out


def per_pod(backend: TestBackend, query: str, start: float, end: float) -> dict[str, np.ndarray]:
    out = {}
    for s in backend.query_range(query, start, end, 300.0):
        out[s["metric"]["pod"]] = np.array([float(v) for _, v in s["values"]])
    return out


def test_the_load_query_reads_arrivals_where_completions_are_capped(backend: TestBackend, unique_ns: str) -> None:
    now = float(int(time.time()) - 60)
    backend.load(history(unique_ns, now))
    catalog = load_catalog(None)
    assert catalog.forecast is not None
    scope = Scope(unique_ns, pod_regex=deployment_pods_regex(["llama"]))
    demand = render(catalog.forecast.load, catalog, scope, EVERYTHING)
    completions = f'sum by (pod) (rate(vllm:request_success_total{{namespace="{unique_ns}"}}[5m]))'
    # Steps whose 5-minute window lies inside the hour of data.
    start, end = math.ceil((now - HOUR + 600) / 300) * 300, math.floor((now - 60) / 300) * 300
    read = per_pod(backend, demand, start, end)
    done = per_pod(backend, completions, start, end)
    assert set(read) == set(PODS.values())
    assert read[PODS["sat"]].size >= 8
    np.testing.assert_allclose(read[PODS["sat"]], 6.0, rtol=0.02)  # 4 completed + 2 queued per second
    np.testing.assert_allclose(done[PODS["sat"]], 4.0, rtol=0.02)  # what completions alone would forecast
    np.testing.assert_allclose(read[PODS["idle"]], 3.0, atol=0.1)  # below capacity: arrivals = completions
    np.testing.assert_allclose(read[PODS["bare"]], 2.0, rtol=0.02)  # no gauges: its completions


@pytest.mark.parametrize("window", ["2m", "10m"])
def test_the_load_query_holds_for_other_windows(backend: TestBackend, unique_ns: str, window: str) -> None:
    """No constant in the query depends on the window (no subquery resolution): any window reads the same."""
    now = float(int(time.time()) - 60)
    backend.load(history(unique_ns, now))
    catalog = load_catalog(None)
    assert catalog.forecast is not None
    load = dataclasses.replace(catalog.forecast.load, window=window)
    scope = Scope(unique_ns, pod_regex=deployment_pods_regex(["llama"]))
    start, end = math.ceil((now - HOUR + 900) / 300) * 300, math.floor((now - 60) / 300) * 300
    read = per_pod(backend, render(load, catalog, scope, EVERYTHING), start, end)
    np.testing.assert_allclose(read[PODS["sat"]], 6.0, rtol=0.02)
    np.testing.assert_allclose(read[PODS["bare"]], 2.0, rtol=0.02)
