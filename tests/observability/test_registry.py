"""Observability without a server: the registry, its bounded series, request classification, scoring.

Values are read back through prometheus_client's own text parser, i.e. as Prometheus would see them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import prometheus_client
import pytest
from prometheus_client.parser import text_string_to_metric_families

from adapter.aggregate import CompositeValue, TermValue
from adapter.app import create_app
from adapter.catalog import load_catalog
from adapter.forecast.accuracy import Issued, score_forecast
from adapter.forecast_service import ForecastService, ForecastState, WorkloadKey
from adapter.observability import Observability
from adapter.query.client import PromClient
from adapter.routes.observability import classify
from adapter.settings import Settings


class Clock:
    def __init__(self, t: float = 1_700_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def samples(obs: Observability, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """{sorted label pairs: value} of every sample called ``name`` in the exposition."""
    out = {}
    for fam in text_string_to_metric_families(obs.exposition().decode()):
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def composite(value: float) -> CompositeValue:
    terms = (
        TermValue("gpu_utilization_p90", 60.0, 0.75, 0.5, 0.375),
        TermValue("inference_queue_depth", 4.0, 0.5, 0.5, 0.25),
    )
    return CompositeValue(value=value, ts=0.0, terms=terms, missing=("inference_latency_p99_seconds",))


def test_each_app_has_its_own_registry_and_nothing_is_global() -> None:
    before = {m.name for m in prometheus_client.REGISTRY.collect()}
    a, b = Observability(), Observability()
    a.request("selector", "v1beta2", 200, 0.01)
    assert samples(a, "llm_hpa_adapter_requests_total") == {
        (("code", "200"), ("route", "selector"), ("version", "v1beta2")): 1.0
    }
    assert samples(b, "llm_hpa_adapter_requests_total") == {}
    create_app(Settings(prometheus_url="http://127.0.0.1:9"))
    after = {m.name for m in prometheus_client.REGISTRY.collect()}
    assert not any(n.startswith("llm_hpa_adapter") for n in after - before)


@pytest.mark.parametrize(
    ("path", "want"),
    [
        ("/apis", ("apis", "", None, None)),
        ("/apis/custom.metrics.k8s.io", ("group", "", None, None)),
        ("/apis/custom.metrics.k8s.io/v1beta1", ("discovery", "v1beta1", None, None)),
        ("/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/m", ("selector", "v1beta2", "m", "pods")),
        (
            "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/deployments.apps/web/m",
            ("object", "v1beta2", "m", "deployments.apps"),
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/metrics/m",
            ("namespace_metric", "v1beta1", "m", "namespaces"),
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta1/namespaces/ns/m",
            ("root_object", "v1beta1", "m", "namespaces"),
        ),
        ("/apis/custom.metrics.k8s.io/v9/namespaces/ns/pods/*/m", ("selector", "other", "m", "pods")),
        ("/apis/custom.metrics.k8s.io/v1beta1/a/b/c/d/e/f", ("api_other", "v1beta1", None, None)),
        ("/metrics", ("metrics", "", None, None)),
        ("/explain", ("explain", "", None, None)),
        ("/readyz", ("health", "", None, None)),
        ("/anything/the/client/makes/up", ("other", "", None, None)),
    ],
)
def test_routes_are_a_bounded_set(path: str, want: tuple[str, str, str | None, str | None]) -> None:
    assert classify(path) == want


def test_pod_series_follow_reads_and_expire() -> None:
    clock = Clock()
    obs = Observability(clock=clock, pod_ttl_s=60)
    obs.composite_read(
        "ns",
        "llm_composite_load",
        {"web-1-a": composite(0.625), "web-1-b": composite(0.7)},
        ["web-1-a", "web-1-b"],
    )
    got = samples(obs, "llm_hpa_adapter_pod_composite")
    assert (
        got[(("metric", "llm_composite_load"), ("namespace", "ns"), ("pod", "web-1-a"), ("workload", "web"))] == 0.625
    )
    assert len(got) == 2
    terms = samples(obs, "llm_hpa_adapter_pod_term_value")
    assert (
        terms[
            (
                ("metric", "llm_composite_load"),
                ("namespace", "ns"),
                ("pod", "web-1-b"),
                ("term", "gpu_utilization_p90"),
                ("workload", "web"),
            )
        ]
        == 60.0
    )
    assert len(terms) == 4  # two terms with data per pod; the missing one is not invented

    # A read of the same pods that no longer returns web-1-b: its series go at once.
    clock.t += 10
    obs.composite_read("ns", "llm_composite_load", {"web-1-a": composite(0.8)}, ["web-1-a", "web-1-b"])
    got = samples(obs, "llm_hpa_adapter_pod_composite")
    assert [dict(k)["pod"] for k in got] == ["web-1-a"] and list(got.values()) == [0.8]

    # Nobody reads web-1-a any more: it expires after the TTL.
    clock.t += 61
    assert samples(obs, "llm_hpa_adapter_pod_composite") == {}
    assert samples(obs, "llm_hpa_adapter_pod_series") == {(): 0.0}


def test_pod_series_are_capped_dropping_the_least_recently_read() -> None:
    obs = Observability(clock=Clock(), max_pods=5)
    for i in range(8):
        obs.composite_read("ns", "c", {f"p-{i}": composite(float(i))}, None)
    obs.composite_read("ns", "c", {"p-3": composite(3.5)}, None)  # read again: now the most recent
    obs.composite_read("ns", "c", {"p-8": composite(8.0)}, None)
    pods = sorted(dict(k)["pod"] for k in samples(obs, "llm_hpa_adapter_pod_composite"))
    assert pods == ["p-3", "p-5", "p-6", "p-7", "p-8"]


def test_unknown_metric_names_are_capped() -> None:
    obs = Observability(max_unknown_names=2)
    for name in ("a", "b", "c", "d", "a"):
        obs.unknown_metric(name, "pods")
    obs.unknown_metric("e", "services")
    got = {
        (dict(k)["metric"], dict(k)["resource"]): v
        for k, v in samples(obs, "llm_hpa_adapter_unknown_metric_requests_total").items()
    }
    assert got == {("a", "pods"): 2.0, ("b", "pods"): 1.0, ("other", "pods"): 2.0, ("other", "other"): 1.0}


def test_reachability_follows_the_latest_query() -> None:
    clock = Clock()
    obs = Observability(clock=clock)

    def reachable() -> float:
        return samples(obs, "llm_hpa_adapter_upstream_reachable")[(("backend", "prometheus"),)]

    obs.upstream_query("prometheus", "/api/v1/query", 0.01, "ok")
    assert reachable() == 1.0
    clock.t += 5
    obs.upstream_query("prometheus", "/api/v1/query", 5.0, "timeout")
    assert reachable() == 0.0
    obs.upstream_query("prometheus", "/api/v1/query", 0.01, "http_503")  # it answers, with an error
    assert reachable() == 1.0
    obs.upstream_query("prometheus", "/api/v1/query", 0.01, "unreachable")
    assert reachable() == 0.0
    last = samples(obs, "llm_hpa_adapter_upstream_last_success_timestamp_seconds")
    assert last == {(("backend", "prometheus"),): clock.t - 5}
    outcomes = {dict(k)["outcome"]: v for k, v in samples(obs, "llm_hpa_adapter_upstream_queries_total").items()}
    assert outcomes == {"ok": 1.0, "timeout": 1.0, "http_503": 1.0, "unreachable": 1.0}


def test_score_forecast_by_hand() -> None:
    issued = Issued(step_ts=1000.0, values=np.array([10.0, 20.0, 30.0]))
    history = np.array([9.0, 11.0, 12.0, 18.0, 40.0])  # at 900, 1000, 1100, 1200, 1300
    score = score_forecast(issued, 100.0, 900.0, history)
    # actual at 1100, 1200, 1300 = 12, 18, 40: WAPE = (2 + 2 + 10) / 70; the peak 30 < 40: under-forecast.
    assert score is not None and math.isclose(score.error, 14 / 70) and score.under_forecast
    # A gap in the actuals is not an error of the model: it is left out.
    score = score_forecast(issued, 100.0, 900.0, np.array([9.0, 11.0, 12.0, np.nan, 25.0]))
    assert score is not None and math.isclose(score.error, (2 + 5) / 37) and not score.under_forecast
    assert score_forecast(issued, 100.0, 900.0, history[:4]) is None  # horizon not over yet
    assert score_forecast(issued, 100.0, 1200.0, history) is None  # history starts too late
    assert score_forecast(issued, 100.0, 900.0, np.array([1, 1, np.nan, np.nan, np.nan])) is None


def forecast_service(clock: Clock, key: WorkloadKey) -> tuple[ForecastService, ThreadPoolExecutor]:
    cat = load_catalog(None)
    assert cat.forecast is not None
    spec = dataclasses.replace(cat.forecast, workloads=((key.namespace, key.deployments[0]),))
    executor = ThreadPoolExecutor(max_workers=1)
    # The client is never asked anything here: states are fed to the observer directly.
    client = PromClient("http://127.0.0.1:9", http=httpx.AsyncClient())
    return ForecastService(spec, cat, client, clock, executor=executor), executor


def test_forecast_accuracy_and_workload_series() -> None:
    clock = Clock(10_000.0)
    key = WorkloadKey("ns", ("llama",))
    service, executor = forecast_service(clock, key)
    try:
        obs = Observability(clock=clock)
        obs.watch_forecasts(service)
        info = samples(obs, "llm_hpa_adapter_forecast_info")
        assert info == {(("model", ""), ("namespace", "ns"), ("reason", "pending"), ("workload", "llama")): 1.0}

        state = ForecastState(
            step_ts=9_900.0,
            current=10.0,
            forecast=np.array([11.0, 12.0, 13.0]),
            model="ses",
            reason="ok",
            boost=1.3,
            fit_seconds=0.002,
        )
        obs.fitted(key, state)
        # A later pull whose grid (100 s steps from 9,600) covers 10,000 .. 10,200.
        obs.history_pulled(key, 9_600.0, 100.0, np.array([9.0, 9.5, 10.0, 10.0, 12.0, 16.0, 13.0]))
        wl = (("namespace", "ns"), ("workload", "llama"))
        assert samples(obs, "llm_hpa_adapter_forecast_error_ratio_count") == {wl: 1.0}
        # actual 12, 16, 13 against 11, 12, 13: WAPE 5 / 41; peak 13 < 16: under-forecast.
        assert math.isclose(samples(obs, "llm_hpa_adapter_forecast_error_ratio_sum")[wl], 5 / 41)
        assert samples(obs, "llm_hpa_adapter_forecast_under_forecasts_total") == {wl: 1.0}
        assert samples(obs, "llm_hpa_adapter_forecast_fits_total") == {(("model", "ses"), ("reason", "ok")): 1.0}
        # Scored once only, however many pulls follow.
        obs.history_pulled(key, 9_700.0, 100.0, np.array([9.5, 10.0, 10.0, 12.0, 16.0, 13.0, 14.0]))
        assert samples(obs, "llm_hpa_adapter_forecast_error_ratio_count") == {wl: 1.0}
        # The service holds no state for it (nothing was refreshed), so it is still pending there.
        assert samples(obs, "llm_hpa_adapter_workload_boost") == {wl: 1.0}
    finally:
        executor.shutdown()
        asyncio.run(service.client._http.aclose())


def test_forgotten_workloads_take_their_series_with_them() -> None:
    clock = Clock(10_000.0)
    key = WorkloadKey("ns", ("gone",))
    service, executor = forecast_service(clock, WorkloadKey("ns", ("kept",)))
    try:
        obs = Observability(clock=clock)
        obs.watch_forecasts(service)
        obs.fitted(key, ForecastState(9_900.0, 10.0, np.array([11.0]), "ses", "ok", 1.1))
        obs.history_pulled(key, 9_900.0, 100.0, np.array([10.0, 12.0]))
        assert obs._accuracy.get(key) is not None  # scored ...
        names = {dict(k)["workload"] for k in samples(obs, "llm_hpa_adapter_forecast_info")}
        assert names == {"kept"}
        assert len(obs._accuracy) == 0  # ... and dropped with the workload the service forgot
    finally:
        executor.shutdown()
        asyncio.run(service.client._http.aclose())
