"""Backend faults against real servers: the adapter answers the right Status or omits the pod, never a
made-up value, never crashes or leaks tasks, and recovers by itself when the backend returns."""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import math
import time

import httpx
import pytest

from adapter.catalog import load_catalog
from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import Series, TestBackend
from tests.support.fault_proxy import FaultProxy
from tests.support.fleet_data import PodSpec, build, expected
from tests.support.procs import kill, pause, resume

NS = "faults"
PODS = [
    PodSpec(f"web-6f7d8c9b5-p{i}", gpus=2, layout="honor", labels={"app": "web"}, deployment="web") for i in range(3)
]
PATH = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{NS}/pods/%2A/gpu_utilization_p90?labelSelector=app%3Dweb"


def loaded(backend: TestBackend) -> float:
    now = float(int(time.time()) - 30)
    backend.load(build(NS, PODS, now))
    return now


def get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=30)


def assert_real_values(r: httpx.Response) -> None:
    assert r.status_code == 200, r.text
    got = {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}
    assert got and all(
        math.isclose(got[p.name], expected(p, "gpu_utilization_p90"), abs_tol=0.0006) for p in PODS if p.name in got
    )


def assert_503(r: httpx.Response, words: str) -> None:
    assert r.status_code == 503, r.text
    doc = r.json()
    assert doc["kind"] == "Status" and doc["reason"] == "ServiceUnavailable" and words in doc["message"]


def task_count(url: str) -> int:
    """Tasks alive in the adapter's event loop."""
    loop = APPS[url].state.loop

    async def count() -> int:
        return len(asyncio.all_tasks())

    return asyncio.run_coroutine_threadsafe(count(), loop).result(10)


def adapter(backend_url: str, kind: str, now: float, timeout: float = 2.0, cache_ttl: float = 0.0):
    """The adapter under test; the answer cache is off unless asked for, and the value store is off, so every
    request hits the backend (tests/test_store.py covers faults behind the store)."""
    catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=cache_ttl, store=None)
    settings = Settings(
        prometheus_url=backend_url, backend=kind, pod_source="prometheus", query_timeout_s=timeout, catalog=catalog
    )
    return running_adapter(settings, clock=lambda: now)


def test_stopped_then_restarted_backend(own_backend: TestBackend) -> None:
    now = loaded(own_backend)
    with adapter(own_backend.url, own_backend.kind, now) as url:
        assert_real_values(get(url + PATH))
        before = task_count(url)
        own_backend.process.stop()
        for _ in range(3):
            assert_503(get(url + PATH), "unreachable")
        own_backend.process.start()
        deadline = time.monotonic() + 30
        while (r := get(url + PATH)).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert_real_values(r)
        assert task_count(url) <= before


def test_killed_mid_request(own_backend: TestBackend) -> None:
    now = loaded(own_backend)
    with adapter(own_backend.url, own_backend.kind, now, timeout=20) as url:
        assert_real_values(get(url + PATH))
        pause(own_backend.process)  # the request below reaches a frozen backend ...
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pending = pool.submit(get, url + PATH)
            time.sleep(1.0)
            kill(own_backend.process)  # ... which then dies under it
            assert_503(pending.result(), "")
        own_backend.process.start()
        deadline = time.monotonic() + 30
        while (r := get(url + PATH)).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert r.status_code == 200


def test_slow_beyond_the_timeout(own_backend: TestBackend) -> None:
    now = loaded(own_backend)
    with adapter(own_backend.url, own_backend.kind, now, timeout=1.0) as url:
        assert_real_values(get(url + PATH))
        pause(own_backend.process)
        try:
            assert_503(get(url + PATH), "did not answer")
        finally:
            resume(own_backend.process)
        deadline = time.monotonic() + 30
        while (r := get(url + PATH)).status_code != 200 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert_real_values(r)


@pytest.mark.parametrize(
    "mode,words",
    [
        ("http500", "HTTP 500"),
        ("http503", "HTTP 503"),
        ("garbage", "not JSON"),
        ("truncated", "not JSON"),
        ("wrong_shape", "malformed"),
    ],
)
def test_bad_answers_are_503_and_recovery(backend: TestBackend, mode: str, words: str) -> None:
    now = loaded(backend)
    with FaultProxy(backend.url) as proxy, adapter(proxy.url, backend.kind, now) as url:
        assert_real_values(get(url + PATH))
        proxy.mode = mode
        assert_503(get(url + PATH), words)
        proxy.mode = "pass"
        time.sleep(0.1)
        assert_real_values(get(url + PATH))


def test_nan_inf_and_partial_data_omit_pods(backend: TestBackend, unique_ns: str) -> None:
    now = float(int(time.time()) - 30)
    pods = [PodSpec(f"web-6f7d8c9b5-q{i}", gpus=2, layout="honor", labels={"app": "web"}) for i in range(4)]
    series = build(unique_ns, pods, now)
    # q0: every GPU NaN (Prometheus) ; q1: +Inf on every GPU ; q2: no GPU series at all (partial data)
    broken = {"web-6f7d8c9b5-q0": math.nan, "web-6f7d8c9b5-q1": math.inf}
    out = []
    for s in series:
        pod = s.labels.get("pod")
        if s.labels["__name__"] == "DCGM_FI_DEV_GPU_UTIL" and pod in broken:
            out.append(Series(s.labels, [(t, broken[pod]) for t, _ in s.samples]))
        elif s.labels["__name__"] == "DCGM_FI_DEV_GPU_UTIL" and pod == "web-6f7d8c9b5-q2":
            continue
        else:
            out.append(s)
    backend.load(out)
    settings = Settings(prometheus_url=backend.url, backend=backend.kind, pod_source="prometheus")
    with running_adapter(settings, clock=lambda: now) as url:
        r = get(
            f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}/pods/*/gpu_utilization_p90"
            "?labelSelector=app%3Dweb"
        )
        assert r.status_code == 200
        names = [i["describedObject"]["name"] for i in r.json()["items"]]
        assert names == ["web-6f7d8c9b5-q3"], names  # NaN, Inf and missing pods are omitted, never 0
        r = get(
            f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}/pods/web-6f7d8c9b5-q1/gpu_utilization_p90"
        )
        assert r.status_code == 404
