"""The explicit route table (routes/custom_metrics.py) in-process: each upstream route shape of
custom-metrics-apiserver's ``cmhandlers.go`` per served version, the catch-all for the rest of the prefix, and
request metrics labelled from the route that matched. Runs without binaries.
"""

from __future__ import annotations

import httpx
import pytest
from starlette.routing import Match

from adapter.app import create_app
from adapter.routes import custom_metrics
from adapter.routes.observability import classify
from adapter.settings import Settings
from tests.support.api_table import NS
from tests.support.provider_double import ProviderDouble, in_process

BASE = "/apis/custom.metrics.k8s.io"
MATCHED = [
    (f"{BASE}/v1beta1", ("discovery", "v1beta1", None, None)),
    (f"{BASE}/v1beta2/", ("discovery", "v1beta2", None, None)),
    (f"{BASE}/v1beta2/namespaces/{NS}/pods/*/m", ("selector", "v1beta2", "m", "pods")),
    (f"{BASE}/v1beta1/namespaces/{NS}/deployments.apps/web/m", ("object", "v1beta1", "m", "deployments.apps")),
    (f"{BASE}/v1beta1/namespaces/{NS}/metrics/m", ("namespace_metric", "v1beta1", "m", "namespaces")),
    (f"{BASE}/v1beta2/namespaces/{NS}/m", ("root_object", "v1beta2", "m", "namespaces")),
    (f"{BASE}/v1beta2/nodes/n1/m", ("root_object", "v1beta2", "m", "nodes")),
]
UNMATCHED = [
    f"{BASE}/v9/namespaces/{NS}/pods/*/m",
    f"{BASE}/v1beta1/a/b/c/d/e/f",
    f"{BASE}/v1beta1/pods//m",
    "/apis",
    BASE,
    "/livez",
    "/nothing",
]


def matched_scope(path: str, settings: Settings, provider: ProviderDouble) -> dict[str, object]:
    """The scope after routing, as the router leaves it for the middleware around it."""
    app = create_app(settings, provider=provider)
    scope: dict[str, object] = {"type": "http", "method": "GET", "path": path, "root_path": ""}
    for route in app.router.routes:
        match, child = route.matches(scope)
        if match is Match.FULL:
            return {**scope, **child}
    return scope


@pytest.mark.parametrize(("path", "want"), MATCHED)
def test_each_upstream_shape_has_its_route(
    path: str, want: tuple[str, str, str | None, str | None], settings: Settings, provider: ProviderDouble
) -> None:
    scope = matched_scope(path, settings, provider)
    assert custom_metrics.labels(scope) == want
    assert classify(path) == want  # the path-based fallback agrees wherever a route matched


@pytest.mark.parametrize("path", UNMATCHED)
def test_only_the_explicit_routes_have_route_labels(path: str, settings: Settings, provider: ProviderDouble) -> None:
    assert custom_metrics.labels(matched_scope(path, settings, provider)) is None


@pytest.mark.anyio
async def test_request_metrics_are_labelled_by_the_matched_route(settings: Settings, provider: ProviderDouble) -> None:
    app = create_app(settings, provider=provider)
    async with in_process(app) as client:
        for path in (
            f"{BASE}/v1beta2/namespaces/{NS}/pods/*/gpu_utilization_p90",
            f"{BASE}/v1beta2/namespaces/{NS}/pods/*/gpu_utilization_p90",
            f"{BASE}/v1beta1/namespaces/{NS}/pods/llama-0/no_such_metric",
            f"{BASE}/v1beta1/namespaces/{NS}/metrics/inference_queue_depth",
            f"{BASE}/v1beta1/a/b/c/d/e/f",
        ):
            await client.get(path)
    requests = app.state.observability.requests
    counts = {
        (s.labels["route"], s.labels["version"], s.labels["code"]): s.value
        for metric in requests.collect()
        for s in metric.samples
        if s.name.endswith("_total")
    }
    assert counts == {
        ("selector", "v1beta2", "200"): 2.0,
        ("object", "v1beta1", "404"): 1.0,
        ("namespace_metric", "v1beta1", "200"): 1.0,
        ("api_other", "v1beta1", "404"): 1.0,
    }


@pytest.mark.anyio
@pytest.mark.parametrize("method", ["HEAD", "OPTIONS"])
async def test_only_get_is_served(client: httpx.AsyncClient, method: str) -> None:
    r = await client.request(method, f"{BASE}/v1beta2/namespaces/{NS}/pods/*/gpu_utilization_p90")
    assert r.status_code == 405


@pytest.mark.anyio
async def test_discovery_with_and_without_a_trailing_slash(client: httpx.AsyncClient) -> None:
    plain, slashed = await client.get(f"{BASE}/v1beta1"), await client.get(f"{BASE}/v1beta1/")
    assert plain.status_code == slashed.status_code == 200
    assert plain.content == slashed.content
