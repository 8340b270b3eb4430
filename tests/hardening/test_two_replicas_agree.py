"""Two replicas on one backend serve identical values, on both sides of a forecast step boundary.

The shipped Deployment runs two replicas behind one Service; the HPA controller reads whichever answers, so
the two must never disagree (a flapping value is a flapping replica count). Two real adapter servers (the
shipped catalog, default model) read one real Prometheus holding 10 h of a ramping workload; their clocks
are one injected clock, so the step boundary is crossed by moving it, not by waiting 5 minutes. Before and
after the boundary both serve the same boost, forecast and boosted composites, value for value, and the
values after differ from those before (the boundary was really crossed: the comparison is not vacuous).
"""

from __future__ import annotations

import math
import time

import httpx

from adapter.catalog import load_catalog
from adapter.settings import Settings
from tests.forecast_serving.test_boosted import history
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build

POLLS = 300  # bound on every wait (x 0.1 s)


def _served(url: str, ns: str) -> dict[str, str]:
    """Every forecast-dependent value the HPA controller can read for the workload, as served (quantities)."""
    base = f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}"
    out: dict[str, str] = {}
    for metric in ("llm_load_boost", "llm_load_forecast", "llm_composite_load_boosted"):
        r = httpx.get(f"{base}/deployments.apps/llama/{metric}", timeout=10)
        assert r.status_code == 200, (metric, r.text)
        out[metric] = r.json()["items"][0]["value"]
    r = httpx.get(f"{base}/pods/*/llm_composite_load_boosted", params={"labelSelector": "app=llama"}, timeout=10)
    assert r.status_code == 200, r.text
    for item in r.json()["items"]:
        out["pods/" + item["describedObject"]["name"]] = item["value"]
    return out


def _forecast_age(url: str, ns: str) -> float | None:
    """The workload's ``forecast_age_seconds`` in the replica's /metrics (clock minus the fitted step)."""
    for line in httpx.get(f"{url}/metrics", timeout=10).text.splitlines():
        if line.startswith("llm_hpa_adapter_forecast_age_seconds{") and f'namespace="{ns}"' in line:
            return float(line.split()[-1])
    return None


def _wait_fitted_at(urls: list[str], ns: str, age: float) -> None:
    """Wait (bounded by count) until every replica's forecast was fitted at the step ``age`` seconds ago."""
    for _ in range(POLLS):
        if all(_forecast_age(u, ns) == age for u in urls):
            return
        time.sleep(0.1)
    lines = [
        ln for ln in httpx.get(f"{urls[0]}/metrics", timeout=10).text.splitlines() if "forecast" in ln and ns in ln
    ]
    raise AssertionError(
        f"the replicas did not fit the step {age} s ago: {[_forecast_age(u, ns) for u in urls]} {lines}"
    )


def test_two_replicas_serve_identical_values_across_a_step_boundary(prometheus: TestBackend, unique_ns: str) -> None:
    wall = float(int(time.time()) - 60)
    prometheus.load(history(unique_ns, wall, hours=10))
    pods = [
        PodSpec(name, gpus=2, layout="honor", labels={"app": "llama"}, deployment="llama")
        for name in ("llama-7f9b8c6d4-bbbb1", "llama-7f9b8c6d4-bbbb2")
    ]
    prometheus.load(build(unique_ns, pods, wall))
    catalog = load_catalog(None)
    assert catalog.forecast is not None
    step = catalog.forecast.step_s
    # The latest boundary with 20 s of data after it; the pods' series (fleet_data: 10 min) cover both sides.
    boundary = math.floor((wall - 20.0) / step) * step
    clock = [boundary - 20.0]
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", catalog=catalog, forecast_tick_s=0.1)
    with (
        running_adapter(settings, clock=lambda: clock[0]) as one,
        running_adapter(settings, clock=lambda: clock[0]) as two,
    ):
        replicas = [one, two]
        for url in replicas:  # the first read registers the workload in each replica
            httpx.get(
                f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}/deployments.apps/llama/"
                "llm_composite_load_boosted",
                timeout=10,
            )
        _wait_fitted_at(replicas, unique_ns, age=step - 20.0)
        before = [_served(u, unique_ns) for u in replicas]
        assert before[0] == before[1]
        assert len(before[0]) == 5

        clock[0] = boundary + 20.0  # a new step: each replica refits on its own
        _wait_fitted_at(replicas, unique_ns, age=20.0)
        after = [_served(u, unique_ns) for u in replicas]
        assert after[0] == after[1]
        assert after[0]["llm_load_forecast"] != before[0]["llm_load_forecast"], "the step boundary changed nothing"
