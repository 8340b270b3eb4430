"""Hostile input: fuzzed paths, query strings and headers get 4xx answers (a Status under our prefix),
never a 5xx, a stack trace or a hang; request data cannot change the structure of the PromQL we send."""

from __future__ import annotations

import socket
import urllib.parse

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapter.catalog import load_catalog
from adapter.labels import parse_selector
from adapter.query.promql import Scope, render
from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend
from tests.support.promql import split_literals

PREFIX = "/apis/custom.metrics.k8s.io/v1beta2"


@pytest.fixture(scope="module")
def url(prometheus: TestBackend):
    with running_adapter(Settings(prometheus_url=prometheus.url, pod_source="prometheus")) as u:
        yield u


def raw_request(url: str, request: bytes) -> tuple[int, bytes]:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
            if b"\r\n\r\n" in data:
                head, _, body = data.partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":")[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ]
                if length and len(body) >= length[0]:
                    break
    status = int(data.split(b" ", 2)[1])
    return status, data


segment = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(segment, min_size=0, max_size=7))
def test_fuzzed_paths_never_5xx(url: str, parts: list[str]) -> None:
    path = PREFIX + "/" + "/".join(urllib.parse.quote(p, safe="") for p in parts)
    r = httpx.get(url + path, timeout=30)
    assert r.status_code < 500, (path, r.text)
    if r.status_code >= 400 and r.headers["content-type"] == "application/json":
        assert r.json()["kind"] == "Status"
    assert b"Traceback" not in r.content


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(label=st.text(max_size=200), metric=st.text(max_size=200))
def test_fuzzed_query_strings_never_5xx(url: str, label: str, metric: str) -> None:
    r = httpx.get(
        f"{url}{PREFIX}/namespaces/default/pods/%2A/llm_composite_load",
        params={"labelSelector": label, "metricLabelSelector": metric},
        timeout=30,
    )
    assert r.status_code in (200, 400), (label, metric, r.text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=120))
def test_metric_label_selectors_cannot_change_query_structure(text: str) -> None:
    catalog = load_catalog(None)
    try:
        selector = parse_selector(text)
        hostile = render(catalog.metrics["inference_queue_depth"], catalog, Scope("ns", ("p",)), selector)
    except ValueError:
        return  # rejected (400) before any query exists
    except Exception as exc:  # BadRequest: a selector PromQL cannot express
        assert type(exc).__name__ == "BadRequest"
        return
    # Same selector shape with benign values: the skeleton outside string literals must be identical.
    benign = parse_selector(",".join(_benign(r) for r in selector.requirements)) if selector.requirements else selector
    base = render(catalog.metrics["inference_queue_depth"], catalog, Scope("ns", ("p",)), benign)
    assert split_literals(hostile)[0] == split_literals(base)[0]


def _benign(req) -> str:
    op = {"=": "=", "!=": "!=", "exists": "", "!": "!"}.get(req.operator)
    if req.operator in ("in", "notin"):
        return f"{req.key} {req.operator} ({','.join('v' for _ in req.values)})"
    if req.operator == "!":
        return f"!{req.key}"
    if req.operator == "exists":
        return req.key
    return f"{req.key}{op}v"


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET " + PREFIX.encode() + b"/namespaces/\xff\xfe/pods/*/m HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET " + PREFIX.encode() + b"/namespaces/%ff%fe/pods/%2A/m HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET " + PREFIX.encode() + b"/namespaces/d/pods/%2A/m?labelSelector=%ff%00%fe HTTP/1.1\r\nHost: x\r\n"
        b"Connection: close\r\n\r\n",
        b"GET "
        + PREFIX.encode()
        + b" HTTP/1.1\r\nHost: x\r\nX-Big: "
        + b"a" * 200_000
        + b"\r\nConnection: close\r\n\r\n",
        b"GET "
        + PREFIX.encode()
        + b"/namespaces/d/pods/%2A/m?labelSelector="
        + b"a%20in%20(" * 5000
        + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET /" + b"a/" * 20_000 + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"GET " + PREFIX.encode() + b"/namespaces/" + b"n" * 100_000 + b"/pods/%2A/m HTTP/1.1\r\nHost: x\r\n"
        b"Connection: close\r\n\r\n",
        b"BREW " + PREFIX.encode() + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",
    ],
    ids=[
        "raw-invalid-utf8-path",
        "escaped-invalid-utf8-path",
        "invalid-utf8-selector",
        "oversized-header",
        "deeply-nested-selector",
        "very-deep-path",
        "oversized-namespace",
        "unknown-method",
        "tls-to-plain-port",
    ],
)
def test_malformed_requests_get_4xx(url: str, request_bytes: bytes) -> None:
    status, data = raw_request(url, request_bytes)
    assert 400 <= status < 500, data[:300]
    assert b"Traceback" not in data
    # The adapter still serves afterwards.
    assert httpx.get(url + "/livez", timeout=10).text == "ok"
