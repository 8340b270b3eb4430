"""Issue 11 row 4: requests for Deployments that do not exist must not create forecast workloads, and
the number of workloads is capped (catalog ``forecast.max_workloads``).

Against a real Prometheus and the real adapter (kube-state-metrics pod source): 3,000 requests for the
boosted metric, the forecast and the boost of random non-existent Deployments and pods are all 404 and
leave the forecast set empty (no range queries, no per-workload /metrics series). With a cap of 2, four
real Deployments are all served, two of them unboosted, and the refusals are counted.
"""

from __future__ import annotations

import copy
import re
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from importlib import resources

import httpx
import yaml

from adapter.catalog import parse_catalog
from adapter.forecast_service import WorkloadKey
from adapter.settings import Settings
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import Series, TestBackend

DEPLOYMENTS = ("alpha", "bravo", "charlie", "delta")


def pod_of(dep: str) -> str:
    return f"{dep}-5d8f7b9c6-{dep[:3]}01"


def load(backend: TestBackend, ns: str) -> None:
    now = float(int(time.time()) - 20)
    ts = [now - 600 + 15 * i for i in range(41)]

    def gauge(name: str, labels: dict[str, str], value: float) -> Series:
        return Series({"__name__": name, "namespace": ns, **labels}, [(t, value) for t in ts])

    series = []
    for i, dep in enumerate(DEPLOYMENTS):
        pod, rs = pod_of(dep), f"{dep}-5d8f7b9c6"
        series += [
            gauge("vllm:num_requests_waiting", {"pod": pod}, float(2 + 2 * i)),
            gauge(
                "DCGM_FI_DEV_GPU_UTIL", {"pod": pod, "gpu": "0", "UUID": f"GPU-{pod}", "Hostname": "n1"}, 50.0
            ),  # every composite term needs its series
            Series(
                {"__name__": "vllm:request_success_total", "namespace": ns, "pod": pod},
                [(t, 10.0 * (t - ts[0])) for t in ts],
            ),
            gauge("kube_pod_labels", {"pod": pod, "label_app": dep}, 1.0),
            gauge("kube_pod_owner", {"pod": pod, "owner_kind": "ReplicaSet", "owner_name": rs}, 1.0),
            gauge("kube_replicaset_owner", {"replicaset": rs, "owner_kind": "Deployment", "owner_name": dep}, 1.0),
        ]
    backend.load(series)


def metric_value(text: str, name: str) -> float:
    found = re.search(rf"^llm_hpa_adapter_{name} (\S+)$", text, re.MULTILINE)
    assert found is not None, name
    return float(found.group(1))


def test_tenant_nonexistent_deployments_register_no_workload(prometheus: TestBackend, unique_ns: str) -> None:
    load(prometheus, unique_ns)
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", forecast_tick_s=0.2)
    base = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}"
    paths = [
        "pods/{}-7c9d8f6b5-x1y2z/llm_composite_load_boosted",
        "deployments.apps/{}/llm_composite_load_boosted",
        "deployments.apps/{}/llm_load_forecast",
        "deployments.apps/{}/llm_load_boost",
    ]
    with running_adapter(settings) as adapter, httpx.Client(timeout=30) as client:

        def ask(i: int) -> int:
            name = "ghost-" + uuid.uuid4().hex[:10]
            return client.get(adapter + base + "/" + paths[i % len(paths)].format(name)).status_code

        with ThreadPoolExecutor(8) as pool:
            codes = list(pool.map(ask, range(3000)))
        assert set(codes) == {404}
        forecasts = APPS[adapter].state.forecasts
        assert forecasts.workloads() == {}
        time.sleep(0.5)  # a few refresh ticks: nothing to fit, so no range query
        text = client.get(adapter + "/metrics").text
        assert metric_value(text, "forecast_workloads") == 0
        assert 'endpoint="query_range"' not in text and "llm_hpa_adapter_workload_boost{" not in text
        # A real Deployment still registers.
        r = client.get(f"{adapter}{base}/deployments.apps/alpha/llm_composite_load_boosted")
        assert r.status_code == 200, r.text
        assert set(forecasts.workloads()) == {WorkloadKey(unique_ns, ("alpha",))}


def test_tenant_workload_cap(prometheus: TestBackend, unique_ns: str) -> None:
    load(prometheus, unique_ns)
    doc = yaml.safe_load(resources.files("adapter").joinpath("catalog.yaml").read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    doc["forecast"]["max_workloads"] = 2
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", catalog=parse_catalog(doc))
    base = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}"
    with running_adapter(settings) as adapter, httpx.Client(timeout=30) as client:
        for dep in DEPLOYMENTS:
            boosted = client.get(f"{adapter}{base}/deployments.apps/{dep}/llm_composite_load_boosted")
            plain = client.get(f"{adapter}{base}/deployments.apps/{dep}/llm_composite_load")
            assert boosted.status_code == 200 and plain.status_code == 200, boosted.text
        forecasts = APPS[adapter].state.forecasts
        assert sorted(k.deployments[0] for k in forecasts.workloads()) == ["alpha", "bravo"]
        assert forecasts.refused == 2
        for dep in ("charlie", "delta"):  # beyond the cap: served, unboosted
            boosted = client.get(f"{adapter}{base}/deployments.apps/{dep}/llm_composite_load_boosted").json()
            plain = client.get(f"{adapter}{base}/deployments.apps/{dep}/llm_composite_load").json()
            assert boosted["items"][0]["value"] == plain["items"][0]["value"]
        text = client.get(adapter + "/metrics").text
        assert metric_value(text, "forecast_workloads") == 2
        assert metric_value(text, "forecast_workloads_refused_total") == 4  # each of the two, asked twice
