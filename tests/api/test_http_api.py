"""Wire behaviour of the running adapter: discovery, routing, negotiation and every error Status.

Expected bodies are the upstream shapes quoted in shared/reference/k8s-metrics-protocol.md (§1.4, §1.8, §5).
"""

from __future__ import annotations

import json

import httpx
import pytest

from adapter.catalog import load_catalog
from adapter.demo.servers import free_port
from adapter.settings import Settings
from tests.support.adapter_server import get, running_adapter
from tests.support.backends import TestBackend

BASE = "/apis/custom.metrics.k8s.io"


@pytest.fixture(scope="module")
def adapter_url(prometheus: TestBackend):
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with running_adapter(settings) as url:
        yield url


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_discovery_is_derived_from_the_catalog(adapter_url: str, version: str) -> None:
    r = get(f"{adapter_url}{BASE}/{version}")
    assert r.status_code == 200
    doc = r.json()
    assert list(doc) == ["kind", "apiVersion", "groupVersion", "resources"]
    assert (doc["kind"], doc["apiVersion"], doc["groupVersion"]) == (
        "APIResourceList",
        "v1",
        f"custom.metrics.k8s.io/{version}",
    )
    names = {r["name"] for r in doc["resources"]}
    for metric in load_catalog(None).names():
        assert {f"pods/{metric}", f"deployments.apps/{metric}", f"namespaces/{metric}"} <= names
    ns_entry = next(r for r in doc["resources"] if r["name"] == "namespaces/llm_composite_load")
    assert ns_entry == {
        "name": "namespaces/llm_composite_load",
        "singularName": "",
        "namespaced": False,
        "kind": "MetricValueList",
        "verbs": ["get"],
    }
    # Go's encoder: compact, trailing newline.
    assert r.content.endswith(b"]}\n") and b": " not in r.content


def test_apis_and_group_documents(adapter_url: str) -> None:
    doc = get(f"{adapter_url}/apis").json()
    assert doc["kind"] == "APIGroupList"
    group = get(f"{adapter_url}{BASE}").json()
    assert group["preferredVersion"] == {"groupVersion": "custom.metrics.k8s.io/v1beta2", "version": "v1beta2"}
    assert [v["version"] for v in group["versions"]] == ["v1beta2", "v1beta1"]


def test_health_version_openapi(adapter_url: str) -> None:
    for path in ("/livez", "/readyz", "/healthz"):
        assert get(adapter_url + path).text == "ok"
    assert get(adapter_url + "/version").json()["major"] == "1"
    r = get(adapter_url + "/openapi/v2")  # no v2 spec: the aggregator skips a 404 gracefully
    assert r.status_code == 404 and r.json()["kind"] == "Status"
    discovery = get(adapter_url + "/openapi/v3").json()
    assert set(discovery["paths"]) == {"apis/custom.metrics.k8s.io/v1beta1", "apis/custom.metrics.k8s.io/v1beta2"}
    for entry in discovery["paths"].values():
        doc = get(adapter_url + entry["serverRelativeURL"]).json()
        assert doc["openapi"] == "3.0.0" and doc["components"]["schemas"]["MetricValueList"]


def test_unknown_metric_is_404_in_upstream_wording(adapter_url: str) -> None:
    r = get(f"{adapter_url}{BASE}/v1beta2/namespaces/default/pods/*/no_such_metric")
    assert r.status_code == 404
    assert r.content == (
        b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        b'"message":"the server could not find the metric no_such_metric for pods",'
        b'"reason":"NotFound","code":404}\n'
    )
    r = get(f"{adapter_url}{BASE}/v1beta1/namespaces/default/services/web/llm_composite_load")
    assert r.status_code == 404
    assert r.json()["message"] == "the server could not find the metric llm_composite_load for services"


def test_unmatched_paths(adapter_url: str) -> None:
    # Under the registered prefix: a Status 404 with empty details (apiserver pkg/server/handler.go).
    for path in (
        "/v1beta1/blah",
        "/v1beta1/nodes/foo",
        "/v1beta1/namespaces/ns/pods/bar",
        "/v1beta1/namespaces/ns/pods//m",
    ):
        r = get(f"{adapter_url}{BASE}{path}")
        assert r.status_code == 404, path
        assert r.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "the server could not find the requested resource",
            "reason": "NotFound",
            "details": {},
            "code": 404,
        }
    # Elsewhere: Go's plain-text http.NotFound.
    r = get(f"{adapter_url}/nothing/here")
    assert (r.status_code, r.text) == (404, "404 page not found\n")


def test_wrong_method_is_405(adapter_url: str) -> None:
    r = httpx.post(f"{adapter_url}{BASE}/v1beta1/namespaces/default/pods/*/llm_composite_load")
    assert r.status_code == 405
    assert r.json()["reason"] == "MethodNotAllowed"


def test_protobuf_only_accept_is_406_and_mixed_gets_json(adapter_url: str) -> None:
    url = f"{adapter_url}{BASE}/v1beta2"
    assert get(url, headers={"Accept": "application/vnd.kubernetes.protobuf"}).status_code == 406
    r = get(url, headers={"Accept": "application/vnd.kubernetes.protobuf, */*"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"


def test_pretty_printing(adapter_url: str) -> None:
    r = get(f"{adapter_url}{BASE}/v1beta2?pretty=true")
    assert r.text.startswith('{\n  "kind": "APIResourceList"') and not r.text.endswith("\n")
    r = get(f"{adapter_url}{BASE}/v1beta2", headers={"User-Agent": "curl/8.0"})
    assert r.text.startswith('{\n  "kind"')


@pytest.mark.parametrize(
    "param,value",
    [
        ("labelSelector", "app in (a"),
        ("labelSelector", "=x"),
        ("labelSelector", "a b"),
        ("metricLabelSelector", "engine notin"),
        ("metricLabelSelector", "app.kubernetes.io/name=x"),
        ("metricLabelSelector", "engine>1"),
    ],
)
def test_malformed_selectors_are_400(adapter_url: str, param: str, value: str) -> None:
    r = get(f"{adapter_url}{BASE}/v1beta2/namespaces/default/pods/*/inference_queue_depth", params={param: value})
    assert r.status_code == 400, r.text
    doc = r.json()
    assert doc["reason"] == "BadRequest" and doc["code"] == 400 and param in doc["message"]


def test_backend_down_is_503_never_a_number() -> None:
    settings = Settings(prometheus_url=f"http://127.0.0.1:{free_port()}", pod_source="prometheus", query_timeout_s=2)
    with running_adapter(settings) as url:
        for path in (
            "/v1beta2/namespaces/default/pods/*/llm_composite_load",
            "/v1beta1/namespaces/default/pods/p/gpu_utilization_p90",
            "/v1beta2/namespaces/default/metrics/inference_queue_depth",
        ):
            r = get(f"{url}{BASE}{path}")
            assert r.status_code == 503, path
            doc = r.json()
            assert doc["reason"] == "ServiceUnavailable" and "unreachable" in doc["message"]
            assert "Traceback" not in r.text
        # Discovery never depends on the backend.
        assert get(f"{url}{BASE}/v1beta1").status_code == 200


def test_backend_garbage_is_503() -> None:
    def garbage(request: httpx.Request) -> httpx.Response:
        if b"kube_pod_labels" in request.content:
            return httpx.Response(
                200,
                json={
                    "status": "success",
                    "data": {
                        "resultType": "vector",
                        "result": [{"metric": {"namespace": "default", "pod": "p1"}, "value": [1, "1"]}],
                    },
                },
            )
        return httpx.Response(200, content=b"<html>not prometheus</html>")

    settings = Settings(prometheus_url="http://prometheus.invalid", pod_source="prometheus")
    with running_adapter(settings, transport=httpx.MockTransport(garbage)) as url:
        r = get(f"{url}{BASE}/v1beta2/namespaces/default/pods/*/gpu_utilization_p90")
        assert r.status_code == 503
        assert json.loads(r.text)["message"].startswith("backend answered HTTP 200 with a body that is not JSON")
