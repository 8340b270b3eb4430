"""Both API versions' wire format in-process: every route shape, the object each value describes, Quantity
rendering, timestamps, windows and the echoed metric selector.

Field names and order are kubernetes/metrics ``pkg/apis/custom_metrics/{v1beta1,v1beta2}/types.go`` as Go
encodes them (k8s-metrics-protocol.md §1.5-1.7). The values are the provider double's; the rendering is the
server's. Runs without binaries.
"""

from __future__ import annotations

import httpx
import pytest

from adapter.labels import EVERYTHING
from adapter.provider.base import MetricInfo, ObjectRef, pod_ref
from tests.support.api_table import NS
from tests.support.provider_double import ProviderDouble

pytestmark = pytest.mark.anyio
BASE = "/apis/custom.metrics.k8s.io"
STAMP = "2023-11-14T22:13:20Z"


async def test_v1beta1_pod_list_exact_bytes(client: httpx.AsyncClient) -> None:
    r = await client.get(
        f"{BASE}/v1beta1/namespaces/{NS}/pods/*/gpu_utilization_p90", params={"labelSelector": "app=llama"}
    )
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    # 0.5005 rounds half up to 501m (what the HPA reads as MilliValue), 38.8 is 38800m; no window for a gauge.
    assert r.content == (
        b'{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta1","metadata":{},"items":['
        b'{"describedObject":{"kind":"Pod","namespace":"llm","name":"llama-0","apiVersion":"/v1"},'
        b'"metricName":"gpu_utilization_p90","timestamp":"2023-11-14T22:13:20Z","value":"501m","selector":null},'
        b'{"describedObject":{"kind":"Pod","namespace":"llm","name":"llama-1","apiVersion":"/v1"},'
        b'"metricName":"gpu_utilization_p90","timestamp":"2023-11-14T22:13:20Z","value":"38800m","selector":null}'
        b"]}\n"
    )


async def test_v1beta2_pod_list_exact_bytes(client: httpx.AsyncClient) -> None:
    r = await client.get(
        f"{BASE}/v1beta2/namespaces/{NS}/pods/*/gpu_utilization_p90", params={"labelSelector": "app=llama"}
    )
    assert r.status_code == 200
    assert r.content == (
        b'{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta2","metadata":{},"items":['
        b'{"describedObject":{"kind":"Pod","namespace":"llm","name":"llama-0","apiVersion":"/v1"},'
        b'"metric":{"name":"gpu_utilization_p90","selector":null},"timestamp":"2023-11-14T22:13:20Z",'
        b'"value":"501m"},'
        b'{"describedObject":{"kind":"Pod","namespace":"llm","name":"llama-1","apiVersion":"/v1"},'
        b'"metric":{"name":"gpu_utilization_p90","selector":null},"timestamp":"2023-11-14T22:13:20Z",'
        b'"value":"38800m"}'
        b"]}\n"
    )


@pytest.mark.parametrize(
    ("version", "window_key", "item_keys"),
    [
        ("v1beta1", "window", ["describedObject", "metricName", "timestamp", "window", "value", "selector"]),
        ("v1beta2", "windowSeconds", ["describedObject", "metric", "timestamp", "windowSeconds", "value"]),
    ],
)
async def test_window_is_rendered_for_windowed_metrics(
    client: httpx.AsyncClient, version: str, window_key: str, item_keys: list[str]
) -> None:
    r = await client.get(f"{BASE}/{version}/namespaces/{NS}/pods/*/inference_latency_p99_seconds")
    (item,) = r.json()["items"]  # only llama-0 has latency data: a pod without data is omitted, never 0
    assert list(item) == item_keys
    assert (item["describedObject"]["name"], item[window_key], item["value"]) == ("llama-0", 120, "250m")


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_percent_encoded_star_is_the_literal_star(client: httpx.AsyncClient, version: str) -> None:
    # kubectl sends * as %2A (test-infrastructure.md); both must list.
    plain = await client.get(f"{BASE}/{version}/namespaces/{NS}/pods/*/llm_composite_load")
    encoded = await client.get(f"{BASE}/{version}/namespaces/{NS}/pods/%2A/llm_composite_load")
    assert plain.status_code == encoded.status_code == 200
    assert plain.content == encoded.content
    assert [(i["describedObject"]["name"], i["value"]) for i in plain.json()["items"]] == [
        ("llama-0", "1235m"),
        ("llama-1", "0"),
    ]


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_single_pod(client: httpx.AsyncClient, provider: ProviderDouble, version: str) -> None:
    r = await client.get(f"{BASE}/{version}/namespaces/{NS}/pods/llama-0/inference_queue_depth")
    assert r.status_code == 200
    doc = r.json()
    assert doc["apiVersion"] == f"custom.metrics.k8s.io/{version}"
    (item,) = doc["items"]
    assert item["describedObject"] == {"kind": "Pod", "namespace": NS, "name": "llama-0", "apiVersion": "/v1"}
    assert (item["timestamp"], item["value"]) == (STAMP, "3")
    assert provider.calls == [
        (
            "by_name",
            (pod_ref("llama-0", NS), MetricInfo("pods", "inference_queue_depth", True), EVERYTHING),
        )
    ]


@pytest.mark.parametrize("resource", ["deployments.apps", "deployment.apps", "deployments", "deployment"])
async def test_deployment_in_every_spelling(client: httpx.AsyncClient, provider: ProviderDouble, resource: str) -> None:
    r = await client.get(f"{BASE}/v1beta2/namespaces/{NS}/{resource}/llama/gpu_utilization_p90")
    assert r.status_code == 200, r.text
    (item,) = r.json()["items"]
    assert item["describedObject"] == {"kind": "Deployment", "namespace": NS, "name": "llama", "apiVersion": "apps/v1"}
    assert item["value"] == "19650m"  # the double's mean of 0.5005 and 38.8
    # Every spelling reaches the provider as the canonical group-resource (upstream: a RESTMapper).
    ((kind, (obj, info, _)),) = provider.calls
    assert (kind, obj.kind, info.resource) == ("by_name", "Deployment", "deployments.apps")


@pytest.mark.parametrize(
    "path",
    [
        f"namespaces/{NS}/metrics/inference_queue_depth",  # the namespace's own metric
        f"namespaces/{NS}/inference_queue_depth",  # root-scoped: namespaces/{name}/{metric}
    ],
)
async def test_namespace_object_has_no_namespace_field(
    client: httpx.AsyncClient, provider: ProviderDouble, path: str
) -> None:
    r = await client.get(f"{BASE}/v1beta1/{path}")
    assert r.status_code == 200, r.text
    (item,) = r.json()["items"]
    assert list(item["describedObject"]) == ["kind", "name", "apiVersion"]
    assert item["describedObject"] == {"kind": "Namespace", "name": NS, "apiVersion": "/v1"}
    assert item["value"] == "1500m"  # mean of 3 and 0
    ((_, (obj, info, _)),) = provider.calls
    assert (obj, info) == (
        ObjectRef("Namespace", "/v1", NS, None),
        MetricInfo("namespaces", "inference_queue_depth", False),
    )


@pytest.mark.parametrize(
    ("selector", "want"),
    [
        ("tier=serve", {"matchLabels": {"tier": "serve"}}),
        (
            "tier in (serve,canary),!gpu",
            {
                "matchExpressions": [
                    {"key": "gpu", "operator": "DoesNotExist"},
                    {"key": "tier", "operator": "In", "values": ["canary", "serve"]},
                ]
            },
        ),
    ],
)
async def test_metric_label_selector_is_echoed(
    client: httpx.AsyncClient, selector: str, want: dict[str, object]
) -> None:
    # The request's metricLabelSelector comes back as a metav1.LabelSelector: in the item (v1beta1) or in
    # the item's metric (v1beta2).
    r1 = await client.get(
        f"{BASE}/v1beta1/namespaces/{NS}/pods/llama-0/gpu_utilization_p90", params={"metricLabelSelector": selector}
    )
    r2 = await client.get(
        f"{BASE}/v1beta2/namespaces/{NS}/pods/llama-0/gpu_utilization_p90", params={"metricLabelSelector": selector}
    )
    assert r1.json()["items"][0]["selector"] == want
    assert r2.json()["items"][0]["metric"] == {"name": "gpu_utilization_p90", "selector": want}


async def test_empty_selection_is_an_empty_list(client: httpx.AsyncClient) -> None:
    r = await client.get(
        f"{BASE}/v1beta2/namespaces/{NS}/pods/*/llm_composite_load", params={"labelSelector": "app=nothing-has-this"}
    )
    assert r.status_code == 200
    assert r.content == (
        b'{"kind":"MetricValueList","apiVersion":"custom.metrics.k8s.io/v1beta2","metadata":{},"items":[]}\n'
    )
