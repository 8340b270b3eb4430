"""Discovery in-process: /apis, the group, both versions' APIResourceList, OpenAPI, health and version.

Expected documents are the upstream shapes quoted in k8s-metrics-protocol.md §1.4 (APIGroupList, APIGroup,
APIResourceList as custom-metrics-apiserver's ``resource_lister.go`` builds them). Runs without binaries.
"""

from __future__ import annotations

import httpx
import pytest

from adapter.app import create_app
from adapter.settings import Settings
from tests.support.api_table import METRICS
from tests.support.provider_double import PodSourceDouble, ProviderDouble, in_process

pytestmark = pytest.mark.anyio
BASE = "/apis/custom.metrics.k8s.io"
GROUP_DOC = {
    "kind": "APIGroup",
    "apiVersion": "v1",
    "name": "custom.metrics.k8s.io",
    "versions": [
        {"groupVersion": "custom.metrics.k8s.io/v1beta2", "version": "v1beta2"},
        {"groupVersion": "custom.metrics.k8s.io/v1beta1", "version": "v1beta1"},
    ],
    "preferredVersion": {"groupVersion": "custom.metrics.k8s.io/v1beta2", "version": "v1beta2"},
}


EXTERNAL_VERSION = {"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}
EXTERNAL_GROUP_DOC = {
    "kind": "APIGroup",
    "apiVersion": "v1",
    "name": "external.metrics.k8s.io",
    "versions": [EXTERNAL_VERSION],
    "preferredVersion": EXTERNAL_VERSION,
}


async def test_apis_lists_both_groups(client: httpx.AsyncClient) -> None:
    r = await client.get("/apis")
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
    assert r.json() == {"kind": "APIGroupList", "apiVersion": "v1", "groups": [GROUP_DOC, EXTERNAL_GROUP_DOC]}


async def test_group_prefers_v1beta2(client: httpx.AsyncClient) -> None:
    r = await client.get(BASE)
    assert r.status_code == 200
    assert r.json() == GROUP_DOC
    assert list(r.json()) == list(GROUP_DOC)  # Go's field order


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
async def test_resource_list_is_the_providers_metrics(client: httpx.AsyncClient, version: str) -> None:
    r = await client.get(f"{BASE}/{version}")
    assert r.status_code == 200
    doc = r.json()
    assert list(doc) == ["kind", "apiVersion", "groupVersion", "resources"]
    assert (doc["kind"], doc["apiVersion"], doc["groupVersion"]) == (
        "APIResourceList",
        "v1",
        f"custom.metrics.k8s.io/{version}",
    )
    # One entry per (resource, metric) the provider lists, in its order, scoped like the resource.
    want = [
        {
            "name": f"{resource}/{metric}",
            "singularName": "",
            "namespaced": namespaced,
            "kind": "MetricValueList",
            "verbs": ["get"],
        }
        for metric in METRICS
        for resource, namespaced in (("pods", True), ("deployments.apps", True), ("namespaces", False))
    ]
    assert doc["resources"] == want
    # Go's encoder: compact, one trailing newline.
    assert r.content.endswith(b"]}\n") and b": " not in r.content and b", " not in r.content


async def test_discovery_never_asks_for_data(client: httpx.AsyncClient, provider: ProviderDouble) -> None:
    provider.error = RuntimeError("a data call during discovery")
    for path in ("/apis", BASE, f"{BASE}/v1beta1", f"{BASE}/v1beta2"):
        assert (await client.get(path)).status_code == 200, path
    assert provider.calls == []


async def test_openapi_v3_is_derived_from_the_served_metrics(client: httpx.AsyncClient) -> None:
    discovery = (await client.get("/openapi/v3")).json()
    assert set(discovery["paths"]) == {"apis/custom.metrics.k8s.io/v1beta1", "apis/custom.metrics.k8s.io/v1beta2"}
    for entry in discovery["paths"].values():
        r = await client.get(entry["serverRelativeURL"])
        assert r.status_code == 200
        doc = r.json()
        assert doc["openapi"] == "3.0.0" and set(doc["components"]["schemas"]) >= {"MetricValueList", "Status"}
        enums = [
            p["schema"]["enum"]
            for op in doc["paths"].values()
            for p in op["get"]["parameters"]
            if p["name"] == "metric"
        ]
        assert enums and all(sorted(e) == sorted(METRICS) for e in enums)


async def test_openapi_v2_and_unknown_group_versions_are_status_404(client: httpx.AsyncClient) -> None:
    for path in ("/openapi/v2", "/openapi/v3/apis/custom.metrics.k8s.io/v1"):
        r = await client.get(path)
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


async def test_health_and_version(client: httpx.AsyncClient) -> None:
    for path in ("/livez", "/healthz", "/readyz"):
        r = await client.get(path)
        assert (r.status_code, r.text) == (200, "ok"), path
    version = (await client.get("/version")).json()
    # The kubectl dispatcher picks its kubectl by this minor version (test-infrastructure.md).
    assert (version["major"], version["minor"]) == ("1", "32")
    assert version["gitVersion"].startswith("v1.32.0+llm-hpa-adapter.")


@pytest.mark.parametrize("synced", [False, True])
async def test_readyz_waits_for_the_pod_source(provider: ProviderDouble, settings: Settings, synced: bool) -> None:
    app = create_app(settings, provider=provider, pod_source=PodSourceDouble(synced=synced))
    async with in_process(app) as client:
        r = await client.get("/readyz")
        assert (r.status_code, r.text) == ((200, "ok") if synced else (503, "pod source not synced yet\n"))
        assert (await client.get("/livez")).status_code == 200  # liveness never depends on it


async def test_pretty_printing_like_the_apiserver(client: httpx.AsyncClient) -> None:
    # apiserver negotiate.go: ?pretty=true, or a curl / wget / browser User-Agent; indented, no newline.
    for kwargs in ({"params": {"pretty": "true"}}, {"headers": {"User-Agent": "curl/8.0"}}):
        r = await client.get(f"{BASE}/v1beta2", **kwargs)  # type: ignore[arg-type]
        assert r.text.startswith('{\n  "kind": "APIResourceList"') and not r.text.endswith("\n")
    r = await client.get(f"{BASE}/v1beta2", params={"pretty": "false"}, headers={"User-Agent": "curl/8.0"})
    assert r.text.startswith('{"kind":"APIResourceList"')


async def test_the_hpa_accept_header_gets_json(client: httpx.AsyncClient) -> None:
    # client-go asks for protobuf first; we answer JSON, which it accepts through */* (rest/request.go).
    r = await client.get(f"{BASE}/v1beta2", headers={"Accept": "application/vnd.kubernetes.protobuf, */*"})
    assert r.status_code == 200 and r.headers["content-type"] == "application/json"
