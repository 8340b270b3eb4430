"""Live forecast accuracy: a forecast issued at t0 is scored by the history pulled once its horizon passed.

Real Prometheus with 12 h of request-rate history; the ForecastService runs on a clock the test moves
forward. The expected WAPE and under-forecast flag are computed here from an independent range query and
the forecast the service issued.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from adapter.catalog import load_catalog
from adapter.forecast_service import ForecastService, ForecastState, WorkloadKey
from adapter.observability import Observability
from adapter.query.client import PromClient
from tests.support.backends import Series, TestBackend

HOUR = 3600.0


def rate_at(t: float) -> float:
    """Requests/s: a daily-ish wave plus a surge in the last two hours."""
    base = 20.0 + 8.0 * math.sin(2 * math.pi * t / (6 * HOUR))
    return base + (15.0 if t % (2 * HOUR) > HOUR else 0.0)


def history(ns: str, end: float, hours: float) -> list[Series]:
    ts = np.arange(end - hours * HOUR, end + 1, 60.0)
    counter = np.cumsum([rate_at(t) * 60.0 for t in ts])
    labels = {
        "__name__": "vllm:request_success_total",
        "namespace": ns,
        "pod": "llama-6c8d5f7b9-aaaa1",
        "model_name": "m",
        "finished_reason": "stop",
    }
    return [Series(labels, list(zip(ts.tolist(), counter.tolist(), strict=True)))]


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def values(obs: Observability) -> dict[str, float]:
    out = {}
    for fam in text_string_to_metric_families(obs.exposition().decode()):
        for s in fam.samples:
            if s.name.startswith("llm_hpa_adapter_forecast") and "workload" in s.labels:
                out[s.name] = s.value
    return out


def test_a_forecast_is_scored_once_its_horizon_has_passed(prometheus: TestBackend, unique_ns: str) -> None:
    now = float(int(time.time()) - 60)
    prometheus.load(history(unique_ns, now, hours=12))
    catalog = load_catalog(None)
    assert catalog.forecast is not None
    spec = dataclasses.replace(catalog.forecast, model="ses")
    key = WorkloadKey(unique_ns, ("llama",))
    clock = Clock(now - HOUR)
    obs = Observability(clock=clock)

    async def scenario() -> tuple[ForecastState, ForecastState, dict[str, float]]:
        executor = ThreadPoolExecutor(max_workers=1)
        async with httpx.AsyncClient() as http:
            client = PromClient(prometheus.url, http=http, backend="prometheus", observer=obs.upstream_query)
            service = ForecastService(spec, catalog, client, clock, executor=executor, observer=obs)
            obs.watch_forecasts(service)
            service.touch(key)
            first = await service.refresh(key)
            assert first is not None and first.reason == "ok", first
            assert "llm_hpa_adapter_forecast_error_ratio_count" not in values(obs)  # nothing to score yet
            clock.t += spec.horizon_steps * spec.step_s + 2 * spec.step_s  # the horizon is over
            second = await service.refresh(key)
            assert second is not None
            got = values(obs)  # read while the service still knows the workload
        executor.shutdown()
        return first, second, got

    first, second, got = asyncio.run(scenario())

    # Independently: the real load at the forecast's horizon points.
    assert first.forecast is not None
    times = first.step_ts + spec.step_s * np.arange(1, spec.horizon_steps + 1)
    (series,) = prometheus.query_range(
        f'sum(rate(vllm:request_success_total{{namespace="{unique_ns}"}}[5m]))',
        float(times[0]),
        float(times[-1]),
        spec.step_s,
    )
    actual = np.array([float(v) for _, v in series["values"]])
    assert actual.size == spec.horizon_steps
    want = float(np.abs(first.forecast - actual).sum() / np.abs(actual).sum())
    assert got["llm_hpa_adapter_forecast_error_ratio_count"] == 1.0
    assert math.isclose(got["llm_hpa_adapter_forecast_error_ratio_sum"], want, rel_tol=1e-9)
    assert math.isclose(got["llm_hpa_adapter_forecast_last_error_ratio"], want, rel_tol=1e-9)
    under = float(first.forecast.max()) < float(actual.max())
    assert got["llm_hpa_adapter_forecast_under_forecasts_total"] == float(under)
    # The second forecast is pending: its horizon has not passed on the test clock.
    assert second.step_ts > first.step_ts
