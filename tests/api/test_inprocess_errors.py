"""Every error Status the API layer answers, in-process: exact bodies, right codes, never a stack trace.

Bodies are metav1.Status as the apiserver writes them (k8s-metrics-protocol.md §1.8, §5): field order of
apimachinery ``types.go``; ``details: {}`` only where a generic apiserver sets it (no matching route, wrong
method). Outside the registered prefixes: Go's plain-text ``http.NotFound``. Runs without binaries.
"""

from __future__ import annotations

import logging

import httpx
import pytest

from adapter.errors import TooManyRequests, UpstreamError
from adapter.routes.limits import MAX_HEADER_BYTES, MAX_TARGET_BYTES
from tests.support.api_table import NS
from tests.support.provider_double import ProviderDouble

pytestmark = pytest.mark.anyio
BASE = "/apis/custom.metrics.k8s.io"


def status(code: int, reason: str, message: str, details: dict[str, object] | None = None) -> bytes:
    """The exact compact body, written out by hand in Go's field order."""
    body = (
        '{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",'
        f'"message":"{message}","reason":"{reason}"'
    )
    if details is not None:
        body += ',"details":{}'
    return (body + f',"code":{code}}}\n').encode()


def route_not_found() -> bytes:
    return status(404, "NotFound", "the server could not find the requested resource", details={})


@pytest.mark.parametrize(
    "path",
    [
        "/v1beta1/blah",  # too short
        "/v1beta1/nodes/foo",  # two segments
        f"/v1beta1/namespaces/{NS}/pods/bar",  # four segments, not .../metrics/...
        f"/v1beta1/namespaces/{NS}/pods//m",  # an empty segment
        f"/v1beta2/namespaces/{NS}/pods/p/m/extra",  # six segments
        f"/v1/namespaces/{NS}/pods/*/gpu_utilization_p90",  # a version we do not serve
        "/v1beta3",
    ],
)
async def test_no_matching_route_is_a_generic_404(
    client: httpx.AsyncClient, provider: ProviderDouble, path: str
) -> None:
    r = await client.get(BASE + path)
    assert (r.status_code, r.headers["content-type"]) == (404, "application/json")
    assert r.content == route_not_found()
    assert provider.calls == []


@pytest.mark.parametrize("path", ["/nothing/here", "/apis/other.group/v1", "/api/v1/pods"])
async def test_outside_the_prefix_is_gos_plain_404(client: httpx.AsyncClient, path: str) -> None:
    r = await client.get(path)
    assert (r.status_code, r.text) == (404, "404 page not found\n")
    assert r.headers["content-type"] == "text/plain; charset=utf-8"


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            f"/v1beta2/namespaces/{NS}/pods/*/no_such_metric",
            "the server could not find the metric no_such_metric for pods",
        ),
        (
            f"/v1beta1/namespaces/{NS}/services/web/llm_composite_load",
            "the server could not find the metric llm_composite_load for services",
        ),
        # Scope mismatches: pods only inside a namespace, namespaces only outside one.
        (
            "/v1beta1/pods/llama-0/llm_composite_load",
            "the server could not find the metric llm_composite_load for pods",
        ),
        (
            f"/v1beta1/namespaces/{NS}/namespaces/x/llm_composite_load",
            "the server could not find the metric llm_composite_load for namespaces",
        ),
        (
            "/v1beta1/namespaces/*/llm_composite_load",
            "the server could not find the metric llm_composite_load for namespaces: name the namespace",
        ),
        # The provider has no data for the object (custom-metrics-apiserver pkg/provider/errors.go wording).
        (
            f"/v1beta2/namespaces/{NS}/pods/llama-1/inference_latency_p99_seconds",
            "the server could not find the metric inference_latency_p99_seconds for pods llama-1",
        ),
        (
            f"/v1beta2/namespaces/{NS}/deployments.apps/nope/llm_composite_load",
            "the server could not find the metric llm_composite_load for deployments.apps nope",
        ),
    ],
)
async def test_unknown_metric_or_object_is_404_in_upstream_wording(
    client: httpx.AsyncClient, path: str, message: str
) -> None:
    r = await client.get(BASE + path)
    assert r.status_code == 404
    assert r.content == status(404, "NotFound", message)


async def test_no_data_with_a_metric_selector_names_it(client: httpx.AsyncClient) -> None:
    r = await client.get(
        f"{BASE}/v1beta2/namespaces/{NS}/pods/llama-1/inference_latency_p99_seconds",
        params={"metricLabelSelector": "engine=1"},
    )
    assert r.content == status(
        404,
        "NotFound",
        "the server could not find the metric inference_latency_p99_seconds for pods llama-1 with selector engine=1",
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [
        (
            "/v1beta2/namespaces/Bad_NS/pods/*/llm_composite_load",
            "invalid namespace name 'Bad_NS': must be a lowercase RFC 1123 label of at most 63 characters",
        ),
        (
            f"/v1beta2/namespaces/{NS}/pods/Pod!/llm_composite_load",
            "invalid object name 'Pod!': must be a lowercase RFC 1123 subdomain of at most 253 characters",
        ),
        (
            "/v1beta2/namespaces/a.b/metrics/llm_composite_load",  # a namespace is a label: no dots
            "invalid object name 'a.b': must be a lowercase RFC 1123 label of at most 63 characters",
        ),
        (
            f"/v1beta2/namespaces/{NS}/pods/{'p' * 254}/llm_composite_load",
            f"invalid object name '{'p' * 80}...': must be a lowercase RFC 1123 subdomain of at most 253 characters",
        ),
    ],
)
async def test_names_no_object_can_have_are_400(
    client: httpx.AsyncClient, provider: ProviderDouble, path: str, message: str
) -> None:
    r = await client.get(BASE + path)
    assert r.status_code == 400
    assert r.content == status(400, "BadRequest", message)
    assert provider.calls == []


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
async def test_wrong_method_on_the_api_is_405(client: httpx.AsyncClient, method: str) -> None:
    r = await client.request(method, f"{BASE}/v1beta1/namespaces/{NS}/pods/*/llm_composite_load")
    assert r.status_code == 405
    assert r.content == status(
        405, "MethodNotAllowed", "the server does not allow this method on the requested resource", details={}
    )


@pytest.mark.parametrize("path", ["/apis", "/livez", BASE])
async def test_wrong_method_elsewhere_is_gos_plain_404(client: httpx.AsyncClient, path: str) -> None:
    r = await client.post(path)
    assert (r.status_code, r.text) == (404, "404 page not found\n")


@pytest.mark.parametrize("accept", ["application/vnd.kubernetes.protobuf", "text/html", "application/yaml"])
async def test_nothing_we_speak_is_406(client: httpx.AsyncClient, accept: str) -> None:
    r = await client.get(f"{BASE}/v1beta2/namespaces/{NS}/pods/*/llm_composite_load", headers={"Accept": accept})
    assert r.status_code == 406
    assert r.content == status(406, "NotAcceptable", "only the following media types are accepted: application/json")


async def test_oversized_headers_and_targets_are_431(client: httpx.AsyncClient, provider: ProviderDouble) -> None:
    r = await client.get(f"{BASE}/v1beta2", headers={"X-Padding": "x" * MAX_HEADER_BYTES})
    assert r.status_code == 431
    assert r.content == status(431, "RequestHeaderFieldsTooLarge", "request headers too large")
    r = await client.get(
        f"{BASE}/v1beta2/namespaces/{NS}/pods/*/llm_composite_load",
        params={"labelSelector": "a=" + "b" * MAX_TARGET_BYTES},
    )
    assert r.status_code == 431
    assert r.content == status(431, "RequestHeaderFieldsTooLarge", "request target too large")
    assert provider.calls == []


@pytest.mark.parametrize(
    "path",
    [
        f"/v1beta2/namespaces/{NS}/pods/*/llm_composite_load",
        f"/v1beta1/namespaces/{NS}/pods/llama-0/gpu_utilization_p90",
        f"/v1beta2/namespaces/{NS}/metrics/inference_queue_depth",
    ],
)
async def test_sick_backend_is_503_never_a_number(
    client: httpx.AsyncClient, provider: ProviderDouble, path: str
) -> None:
    provider.error = UpstreamError("backend unreachable: connection refused")
    r = await client.get(BASE + path)
    assert r.status_code == 503
    assert r.content == status(503, "ServiceUnavailable", "backend unreachable: connection refused")
    # Discovery does not depend on the backend.
    assert (await client.get(f"{BASE}/v1beta1")).status_code == 200


@pytest.mark.parametrize(("retry", "header"), [(None, "1"), (15, "15"), (0, "1")])
@pytest.mark.parametrize(
    "path",
    [
        f"/v1beta2/namespaces/{NS}/pods/*/llm_composite_load",
        f"/v1beta1/namespaces/{NS}/pods/llama-0/gpu_utilization_p90",
        f"/v1beta2/namespaces/{NS}/metrics/inference_queue_depth",
    ],
)
async def test_every_429_carries_retry_after(
    client: httpx.AsyncClient, provider: ProviderDouble, path: str, retry: int | None, header: str
) -> None:
    provider.error = (
        TooManyRequests("over its share") if retry is None else TooManyRequests("over", retry_after_s=retry)
    )
    r = await client.get(BASE + path)
    assert r.status_code == 429 and r.headers["retry-after"] == header
    doc = r.json()
    assert (doc["reason"], doc["code"], doc["details"]) == ("TooManyRequests", 429, {"retryAfterSeconds": int(header)})
    # Only 429s carry it.
    provider.error = UpstreamError("backend unreachable")
    assert "retry-after" not in (await client.get(BASE + path)).headers


async def test_a_bug_is_500_without_a_stack_trace(
    client: httpx.AsyncClient, provider: ProviderDouble, caplog: pytest.LogCaptureFixture
) -> None:
    provider.error = ZeroDivisionError("the secret internals")
    with caplog.at_level(logging.ERROR, logger="adapter.routes"):
        r = await client.get(f"{BASE}/v1beta2/namespaces/{NS}/pods/*/llm_composite_load")
    assert r.status_code == 500
    assert r.content == status(500, "InternalError", "an internal error occurred; see the adapter's log")
    # The stack goes to the log, not to the client.
    assert [rec.exc_info[0] for rec in caplog.records if rec.exc_info] == [ZeroDivisionError]


# /explain answers Status errors like the API. The provider double has no explain seam (explain.ExplainSource),
# so the server says it cannot explain: 501 with no reason (apimachinery has none for 501).
async def test_explain_without_an_explaining_provider_is_a_501_status(client: httpx.AsyncClient) -> None:
    r = await client.get("/explain", params={"namespace": NS, "metric": "gpu_utilization_p90", "selector": "a=b"})
    assert (r.status_code, r.headers["content-type"]) == (501, "application/json")
    assert r.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "explain needs a provider that can explain its values (the Prometheus-backed one)",
        "code": 501,
    }
