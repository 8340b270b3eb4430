"""The served values, end to end: real Prometheus and VictoriaMetrics, the real adapter over HTTP.

Every value is checked against an independent numpy computation from the generated data
(tests/support/fleet_data.py), for all pod-label layouts, both API versions, and pod-list, single-pod,
Deployment and namespace requests.
"""

from __future__ import annotations

import math
import time

import pytest

from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import get, running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build, expected

METRICS = [
    "gpu_utilization_p90",
    "gpu_memory_used_p90",
    "gpu_mem_copy_utilization_p90",
    "gpu_power_usage_p90",
    "gpu_xid_errors",
    "inference_queue_depth",
    "inference_latency_p99_seconds",
    "inference_ttft_p99_seconds",
    "inference_itl_p99_seconds",
    # the SLO guard's: the P99 above, or 0 on a pod whose engine answered nothing (the quiet and no-latency pods)
    "inference_ttft_p99_guard_seconds",
    "inference_itl_p99_guard_seconds",
    "llm_composite_load",
]
VERSIONS = ["v1beta1", "v1beta2"]


def fleet() -> list[PodSpec]:
    app = {"app": "llama", "tier": "serve"}
    return [
        PodSpec("llama-5d8f7b9c6-aaaa1", gpus=1, layout="honor", labels=app, deployment="llama"),
        PodSpec(
            "llama-5d8f7b9c6-bbbb2",
            gpus=2,
            layout="honor",
            labels=app,
            hostname_label="hostname",
            deployment="llama",
            engines=2,
        ),
        PodSpec(
            "llama-5d8f7b9c6-cccc8",
            gpus=8,
            layout="exported",
            labels=app,
            deployment="llama",
            xid=[0, 0, 0, 43, 0, 0, 0, 0],
        ),
        PodSpec("llama-5d8f7b9c6-dddd2", gpus=2, layout="old", labels=app, deployment="llama", with_latency=False),
        PodSpec("llama-5d8f7b9c6-ffff1", gpus=1, layout="honor", labels=app, deployment="llama", quiet=True),
        PodSpec("other-7c9d8f6b5-eeee1", gpus=2, layout="honor", labels={"app": "other"}),
        PodSpec("llama-5d8f7b9c6-nogpu", gpus=0, layout="honor", labels=app, deployment="llama", with_gpu=False),
    ]


@pytest.fixture
def scenario(backend: TestBackend, unique_ns: str):
    now = float(int(time.time()) - 30)
    pods = fleet()
    backend.load(build(unique_ns, pods, now))
    settings = Settings(prometheus_url=backend.url, backend=backend.kind, pod_source="prometheus")
    with running_adapter(settings, clock=lambda: now) as url:
        yield url, unique_ns, pods, now


def _value(item: dict) -> float:
    return float(parse_quantity(item["value"]))


def _close(got: float, want: float) -> bool:
    # Values are served at milli precision (what the HPA reads).
    return math.isclose(got, want, abs_tol=0.0006, rel_tol=1e-9)


@pytest.mark.parametrize("version", VERSIONS)
def test_pods_list_matches_numpy(scenario, version: str) -> None:
    url, ns, pods, now = scenario
    selected = [p for p in pods if p.labels.get("app") == "llama"]
    for metric in METRICS:
        r = get(
            f"{url}/apis/custom.metrics.k8s.io/{version}/namespaces/{ns}/pods/%2A/{metric}",
            params={"labelSelector": "app=llama"},
            headers={"Accept": "application/vnd.kubernetes.protobuf, */*"},
        )
        assert r.status_code == 200, (metric, r.text)
        assert r.headers["content-type"] == "application/json"
        doc = r.json()
        assert doc["kind"] == "MetricValueList"
        assert doc["apiVersion"] == f"custom.metrics.k8s.io/{version}"
        got = {item["describedObject"]["name"]: item for item in doc["items"]}
        want = {p.name: expected(p, metric) for p in selected}
        want = {name: v for name, v in want.items() if v is not None}
        assert set(got) == set(want), metric
        for name, item in got.items():
            assert _close(_value(item), want[name]), (metric, name, item["value"], want[name])
            assert item["timestamp"] == time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(now))
            assert item["describedObject"] == {"kind": "Pod", "namespace": ns, "name": name, "apiVersion": "/v1"}
            if version == "v1beta1":
                assert item["metricName"] == metric and item["selector"] is None
                assert "metric" not in item and "windowSeconds" not in item
            else:
                assert item["metric"] == {"name": metric, "selector": None}
                assert "metricName" not in item and "window" not in item


def test_literal_star_and_set_selector(scenario) -> None:
    url, ns, pods, _ = scenario
    r = get(
        f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/*/gpu_utilization_p90",
        params={"labelSelector": "app in (llama,other),tier!=serve"},
    )
    assert r.status_code == 200, r.text
    assert [i["describedObject"]["name"] for i in r.json()["items"]] == ["other-7c9d8f6b5-eeee1"]


@pytest.mark.parametrize("version", VERSIONS)
def test_single_pod_deployment_and_namespace(scenario, version: str) -> None:
    url, ns, pods, now = scenario
    base = f"{url}/apis/custom.metrics.k8s.io/{version}/namespaces/{ns}"
    rules = {"inference_queue_depth": sum, "gpu_xid_errors": max}
    for metric in METRICS:
        for pod in pods:
            want = expected(pod, metric)
            r = get(f"{base}/pods/{pod.name}/{metric}")
            if want is None:
                assert r.status_code == 404, (metric, pod.name)
                assert r.json()["message"] == (f"the server could not find the metric {metric} for pods {pod.name}")
                continue
            assert r.status_code == 200, r.text
            (item,) = r.json()["items"]
            assert _close(_value(item), want), (metric, pod.name)

        def combined(members: list[PodSpec], metric: str = metric) -> float:
            values = [v for v in (expected(p, metric) for p in members) if v is not None]
            rule = rules.get(metric)
            return rule(values) if rule else sum(values) / len(values)

        r = get(f"{base}/deployments.apps/llama/{metric}")
        assert r.status_code == 200, r.text
        (item,) = r.json()["items"]
        assert item["describedObject"] == {
            "kind": "Deployment",
            "namespace": ns,
            "name": "llama",
            "apiVersion": "apps/v1",
        }
        assert _close(_value(item), combined([p for p in pods if p.deployment == "llama"])), metric

        r = get(f"{base}/metrics/{metric}")
        assert r.status_code == 200, r.text
        (item,) = r.json()["items"]
        assert item["describedObject"] == {"kind": "Namespace", "name": ns, "apiVersion": "/v1"}
        assert _close(_value(item), combined(pods)), metric


def test_window_is_reported_for_rate_metrics(scenario) -> None:
    url, ns, _, _ = scenario
    base = f"{url}/apis/custom.metrics.k8s.io"
    r1 = get(f"{base}/v1beta1/namespaces/{ns}/pods/*/inference_latency_p99_seconds")
    r2 = get(f"{base}/v1beta2/namespaces/{ns}/pods/*/inference_latency_p99_seconds")
    assert {i["window"] for i in r1.json()["items"]} == {120}
    assert {i["windowSeconds"] for i in r2.json()["items"]} == {120}


def test_metric_label_selector_filters_series_and_is_echoed(scenario) -> None:
    url, ns, pods, _ = scenario
    base = f"{url}/apis/custom.metrics.k8s.io"
    r = get(
        f"{base}/v1beta2/namespaces/{ns}/pods/*/inference_queue_depth",
        params={"labelSelector": "app=llama", "metricLabelSelector": "engine=1"},
    )
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    two_engines = next(p for p in pods if p.engines == 2)
    assert [i["describedObject"]["name"] for i in items] == [two_engines.name]
    assert _close(_value(items[0]), two_engines.waiting[1])
    assert items[0]["metric"]["selector"] == {"matchLabels": {"engine": "1"}}
    r = get(
        f"{base}/v1beta1/namespaces/{ns}/pods/*/inference_queue_depth",
        params={"labelSelector": "app=llama", "metricLabelSelector": "engine in (1)"},
    )
    assert r.json()["items"][0]["selector"] == {
        "matchExpressions": [{"key": "engine", "operator": "In", "values": ["1"]}]
    }


def test_unknown_deployment_and_empty_selection(scenario) -> None:
    url, ns, _, _ = scenario
    base = f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}"
    r = get(f"{base}/deployments.apps/nope/llm_composite_load")
    assert r.status_code == 404
    assert r.json()["reason"] == "NotFound"
    r = get(f"{base}/pods/*/llm_composite_load", params={"labelSelector": "app=nothing-has-this"})
    assert r.status_code == 200 and r.json()["items"] == []
