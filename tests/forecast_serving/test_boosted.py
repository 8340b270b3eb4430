"""The forecast-boosted composite against a real Prometheus holding 10 h of history.

History is scripted: a Deployment's pods churn (one ReplicaSet for the first five hours, another after a
rollout) and its request rate ramps up over the last hour. The boost is recomputed independently here from
a hand-written range query and the model's public API, and the boosted value from the numpy composite.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time

import httpx
import numpy as np
import pytest

from adapter import forecast_service
from adapter.catalog import load_catalog
from adapter.forecast.boost import boost_factor, rise_quantile
from adapter.forecast.registry import get_model
from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import get, running_adapter
from tests.support.backends import Series, TestBackend
from tests.support.fleet_data import PodSpec, build, expected

HOUR = 3600.0


def rate_at(t: float, now: float) -> float:
    """Total request rate (req/s): flat 10, then a ramp to 40 over the last hour."""
    return 10.0 if t < now - HOUR else 10.0 + 30.0 * (t - (now - HOUR)) / HOUR


def history(namespace: str, now: float, hours: float) -> list[Series]:
    """vllm:request_success_total per pod, sampled every 60 s; pods churn at the midpoint."""
    start = now - hours * HOUR
    mid = start + hours * HOUR / 2
    eras = [(["llama-6c8d5f7b9-aaaa1"], start, mid), (["llama-7f9b8c6d4-bbbb1", "llama-7f9b8c6d4-bbbb2"], mid, now)]
    out = []
    for pods, t0, t1 in eras:
        for pod in pods:
            ts = np.arange(t0, t1 + 1, 60.0)
            counter = np.cumsum([rate_at(t, now) / len(pods) * 60.0 for t in ts])
            out.append(
                Series(
                    {
                        "__name__": "vllm:request_success_total",
                        "namespace": namespace,
                        "pod": pod,
                        "model_name": "m",
                        "finished_reason": "stop",
                    },
                    list(zip(ts.tolist(), counter.tolist(), strict=True)),
                )
            )
    return out


def catalog_with(model: str, itl_elasticity: float = 1.0):
    """The embedded catalog with forecast model ``model`` and the ITL term's elasticity set to ``itl_elasticity``."""
    cat = load_catalog(None)
    base = cat.composites["llm_composite_load"]
    terms = tuple(
        dataclasses.replace(t, elasticity=itl_elasticity) if t.metric == "inference_itl_p99_seconds" else t
        for t in base.terms
    )
    composites = {**cat.composites, base.name: dataclasses.replace(base, terms=terms)}
    return dataclasses.replace(cat, forecast=dataclasses.replace(cat.forecast, model=model), composites=composites)


def independent_boost(backend: TestBackend, ns: str, now: float, model: str) -> float:
    spec = load_catalog(None).forecast
    end = math.floor(now / spec.step_s) * spec.step_s
    start = end - (spec.history_points - 1) * spec.step_s
    (series,) = backend.query_range(
        f'sum(rate(vllm:request_success_total{{namespace="{ns}"}}[5m]))', start, end, spec.step_s
    )
    grid = {float(t): float(v) for t, v in series["values"]}
    values = np.array([grid.get(start + i * spec.step_s, np.nan) for i in range(spec.history_points)])
    fitted = get_model(model).fit(values, step_s=spec.step_s, start_ts=start)
    finite = values[np.isfinite(values)]
    # The boost's floor: 1 + the load's own rise within rise_within at the catalog's quantile.
    rise = rise_quantile(values, spec.rise_lead_steps, spec.rise_quantile) or 0.0
    return boost_factor(float(finite[-1]), fitted.forecast(spec.horizon_steps), spec.max_boost, rise=rise)[0]


def at_load(pod: PodSpec, boost: float, catalog=None) -> float:
    """The pod's composite at ``boost`` times its load, from its own data and the catalog (default: the embedded
    one): each term that tracks load times boost ** its elasticity, the flat GPU term up to its target and never
    below what it reads."""
    terms = (catalog or load_catalog(None)).composites["llm_composite_load"].terms
    total_w = sum(t.weight for t in terms)
    out = 0.0
    for t in terms:
        value = expected(pod, t.metric)
        norm = 0.0 if value is None else max(value - t.idle, 0.0) / (t.target - t.idle)
        out += t.weight / total_w * (max(norm, min(boost * norm, 1.0)) if t.flat else boost**t.elasticity * norm)
    return out


def wait_for(url: str, timeout: float = 30.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        r = get(url)
        if r.status_code == 200 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def load_ramp(backend: TestBackend, namespace: str) -> tuple[float, list[PodSpec]]:
    """10 h of the ramp's history and the two pods of Deployment llama in ``namespace``: (now, pods)."""
    now = float(int(time.time()) - 60)
    backend.load(history(namespace, now, hours=10))
    pods = [
        PodSpec(name, gpus=2, layout="honor", labels={"app": "llama"}, deployment="llama")
        for name in ("llama-7f9b8c6d4-bbbb1", "llama-7f9b8c6d4-bbbb2")
    ]
    backend.load(build(namespace, pods, now))
    return now, pods


@pytest.fixture
def ramp(prometheus: TestBackend, unique_ns: str):
    now, pods = load_ramp(prometheus, unique_ns)
    return unique_ns, now, pods


@pytest.mark.parametrize("model,itl_elasticity", [("ar", 1.0), ("ar", 1.7)])
def test_boosted_rises_above_the_live_composite_before_the_peak(
    prometheus: TestBackend, ramp, model: str, itl_elasticity: float
) -> None:
    ns, now, pods = ramp
    catalog = catalog_with(model, itl_elasticity)
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", catalog=catalog, forecast_tick_s=0.2)
    base = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}"
    with running_adapter(settings, clock=lambda: now) as url:
        # The first request only registers the workload: boost 1 until a fit exists, never a wait.
        first = get(f"{url}{base}/deployments.apps/llama/llm_composite_load_boosted")
        assert first.status_code == 200
        r = wait_for(f"{url}{base}/deployments.apps/llama/llm_load_boost")
        assert r.status_code == 200, r.text
        boost = float(parse_quantity(r.json()["items"][0]["value"]))
        want = independent_boost(prometheus, ns, now, model)
        assert math.isclose(boost, want, abs_tol=0.0006), (boost, want)
        assert boost > 1.05, "a ramp in progress must be seen coming"

        forecast = get(f"{url}{base}/deployments.apps/llama/llm_load_forecast").json()["items"][0]
        assert float(parse_quantity(forecast["value"])) > rate_at(now - 300, now)

        r = get(f"{url}{base}/pods/*/llm_composite_load_boosted", params={"labelSelector": "app=llama"})
        items = {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}
        assert set(items) == {p.name for p in pods}
        for p in pods:
            live = expected(p, "llm_composite_load")
            assert math.isclose(items[p.name], at_load(p, boost, catalog), rel_tol=0.002, abs_tol=0.0011)
            assert items[p.name] > live

        r = get(f"{url}{base}/deployments.apps/llama/llm_composite_load_boosted").json()["items"][0]
        live = sum(expected(p, "llm_composite_load") for p in pods) / len(pods)
        boosted = sum(at_load(p, boost, catalog) for p in pods) / len(pods)  # objects: mean of the pods' values
        assert math.isclose(float(parse_quantity(r["value"])), boosted, rel_tol=0.002, abs_tol=0.0011)
        assert boosted > live

        # The SLO guard's P99s at the forecast's load (the catalog's forecast.also): the TTFT P99 x the boost, the
        # ITL P99 by the rule of the composite's ITL term (its idle, and its elasticity, here 1 or 1.7); the
        # Deployment's value the mean of its pods'.
        (itl_term,) = [
            t for t in catalog.composites["llm_composite_load"].terms if t.metric.startswith("inference_itl")
        ]
        rules = {
            "inference_ttft_p99_guard_seconds": lambda v: boost * v,
            "inference_itl_p99_guard_seconds": lambda v: itl_term.idle + (v - itl_term.idle) * boost**itl_elasticity,
        }
        for guard, rule in rules.items():
            r = get(f"{url}{base}/pods/*/{guard}_boosted", params={"labelSelector": "app=llama"})
            items = {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}
            want = {p.name: rule(expected(p, guard)) for p in pods}
            assert items == pytest.approx(want, rel=0.002, abs=0.0011)
            assert all(items[name] > expected(p, guard) > 0 for p in pods if (name := p.name))
            r = get(f"{url}{base}/deployments.apps/llama/{guard}_boosted").json()["items"][0]
            assert float(parse_quantity(r["value"])) == pytest.approx(sum(want.values()) / 2, rel=0.002, abs=0.0011)


def test_short_history_degrades_to_boost_one(prometheus: TestBackend, unique_ns: str) -> None:
    now = float(int(time.time()) - 60)
    prometheus.load(history(unique_ns, now, hours=2))  # 24 points at 5 min: below the 30-point minimum
    pods = [PodSpec("llama-7f9b8c6d4-bbbb1", gpus=1, layout="honor", labels={"app": "llama"}, deployment="llama")]
    prometheus.load(build(unique_ns, pods, now))
    settings = Settings(
        prometheus_url=prometheus.url, pod_source="prometheus", catalog=catalog_with("ar"), forecast_tick_s=0.2
    )
    base = f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{unique_ns}/deployments.apps/llama"
    with running_adapter(settings, clock=lambda: now) as url:
        get(f"{url}{base}/llm_composite_load_boosted")
        r = wait_for(f"{url}{base}/llm_load_boost")
        assert r.status_code == 200 and r.json()["items"][0]["value"] == "1"
        r = get(f"{url}{base}/llm_load_forecast")
        assert r.status_code == 404 and "insufficient_history" in r.json()["message"]
        boosted = float(parse_quantity(get(f"{url}{base}/llm_composite_load_boosted").json()["items"][0]["value"]))
        assert math.isclose(boosted, expected(pods[0], "llm_composite_load"), abs_tol=0.0006)


def test_a_slow_fit_never_holds_a_request(prometheus: TestBackend, ramp, monkeypatch) -> None:
    ns, now, _ = ramp
    release = threading.Event()
    started = threading.Event()
    real_fit = forecast_service.fit_history

    def slow_fit(*args, **kwargs):
        started.set()
        release.wait(30)  # the fit is stuck until the request below has been answered
        return real_fit(*args, **kwargs)

    monkeypatch.setattr(forecast_service, "fit_history", slow_fit)
    settings = Settings(
        prometheus_url=prometheus.url, pod_source="prometheus", catalog=catalog_with("ar"), forecast_tick_s=0.1
    )
    base = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}"
    try:
        with running_adapter(settings, clock=lambda: now) as url:
            get(f"{url}{base}/deployments.apps/llama/llm_composite_load_boosted")
            assert started.wait(30), "the fit never started"
            r = get(f"{url}{base}/pods/*/llm_composite_load_boosted", params={"labelSelector": "app=llama"})
            assert r.status_code == 200 and len(r.json()["items"]) == 2
            assert get(f"{url}{base}/deployments.apps/llama/llm_load_boost").status_code == 404  # still pending
            assert not release.is_set()  # answered while the fit was still running
            release.set()
    finally:
        release.set()


def test_a_forecast_older_than_two_steps_is_not_applied() -> None:
    """Staleness is judged at read time: a healthy forecast whose step is more than two steps behind the
    clock gives boost 1 with reason "stale" (no backend involved: the state is set directly)."""
    clock = [10_000.0 * 300]
    spec = load_catalog(None).forecast
    service = forecast_service.ForecastService(
        spec,
        load_catalog(None),
        client=None,  # type: ignore[arg-type]
        clock=lambda: clock[0],
    )
    key = forecast_service.WorkloadKey("ns", ("llama",))
    service.touch(key)
    state = forecast_service.ForecastState(
        step_ts=clock[0], current=10.0, forecast=np.array([20.0] * 6), model="ar", reason="ok", boost=2.0
    )
    service._workloads[key].state = state
    assert service.boost(key) == (2.0, "ok")
    clock[0] += 2 * spec.step_s
    assert service.boost(key) == (2.0, "ok")  # two steps old: still applied
    clock[0] += spec.step_s + 1
    assert service.boost(key) == (1.0, "stale")
