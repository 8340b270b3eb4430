"""Issue 26 row 11: ``llm_load_forecast`` on the custom-metrics path has the external path's range check.

A real Prometheus holds one Deployment whose request counter grows at ``rate`` per second and a victim
Deployment at 4/s. Once both are fitted, the absurd one is refused on ``custom.metrics.k8s.io`` with a 404
Status saying why (never a value whose milli-value overflows int64, never a 500), and the victim is served its
forecast on both paths.
"""

from __future__ import annotations

import time

import httpx
import pytest

from adapter.aggregate import MAX_SERVABLE
from adapter.forecast_service import WorkloadKey
from adapter.quantity import milli, parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import Series, TestBackend


def deployment_history(ns: str, deployments: dict[str, float]) -> list[Series]:
    """11 h of request counters growing at each Deployment's rate per second, and its pod's ownership."""
    now = float(int(time.time()) - 20)
    hist = [now - 11 * 3600 + 60 * i for i in range(11 * 60 + 1)]
    series = []
    for dep, rps in deployments.items():
        pod, rs = f"{dep}-5d8f7b9c6-{dep[:3]}01", f"{dep}-5d8f7b9c6"
        owner = {"namespace": ns, "owner_kind": "ReplicaSet", "owner_name": rs}
        series += [
            Series(
                {"__name__": "vllm:request_success_total", "namespace": ns, "pod": pod},
                [(t, rps * (t - hist[0])) for t in hist],
            ),
            Series({"__name__": "kube_pod_owner", "pod": pod, **owner}, [(t, 1.0) for t in hist[-10:]]),
            Series(
                {
                    "__name__": "kube_replicaset_owner",
                    "namespace": ns,
                    "replicaset": rs,
                    "owner_kind": "Deployment",
                    "owner_name": dep,
                },
                [(t, 1.0) for t in hist[-10:]],
            ),
        ]
    return series


def custom(adapter: str, ns: str, dep: str) -> httpx.Response:
    path = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/deployments.apps/{dep}/llm_load_forecast"
    return httpx.get(adapter + path, timeout=30, trust_env=False)


@pytest.mark.parametrize("rate", [1e20, 1e300])
def test_custom_path_refuses_a_forecast_no_hpa_can_read(prometheus: TestBackend, unique_ns: str, rate: float) -> None:
    prometheus.load(deployment_history(unique_ns, {"small": 4.0, "huge": rate}))
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", forecast_tick_s=0.2)
    with running_adapter(settings) as adapter:
        custom(adapter, unique_ns, "small")  # registers both workloads (a forecast is fitted once asked for)
        custom(adapter, unique_ns, "huge")
        deadline = time.monotonic() + 60
        while True:
            states = APPS[adapter].state.forecasts.workloads()
            if len(states) == 2 and all(s is not None for s in states.values()):
                break
            assert time.monotonic() < deadline, states
            time.sleep(0.3)
        huge = states[WorkloadKey(unique_ns, ("huge",))]
        assert huge.peak is not None and not abs(huge.peak) <= MAX_SERVABLE  # fitted, and out of range

        r = custom(adapter, unique_ns, "huge")
        assert r.status_code == 404, r.text  # before the fix: 200 with an unreadable value (1e20), or 500 (1e300)
        doc = r.json()
        assert doc["kind"] == "Status" and doc["reason"] == "NotFound" and "milli-value overflows" in doc["message"]

        r = custom(adapter, unique_ns, "small")
        assert r.status_code == 200, r.text
        value = parse_quantity(r.json()["items"][0]["value"])
        assert 0 < float(value) < 1e6 and milli(float(value)) > 0
