"""Many HPAs asking for the same metric share one upstream query; stale answers are never served past the TTL.

The count of upstream queries is Prometheus' own `prometheus_http_requests_total{handler="/api/v1/query"}`.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import time

import httpx
import pytest

from adapter.settings import Settings, load_catalog
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend, start_backend
from tests.support.fleet_data import PodSpec, build


def query_count(backend: TestBackend) -> float:
    text = httpx.get(f"{backend.url}/metrics", timeout=10).text
    for line in text.splitlines():
        if line.startswith('prometheus_http_requests_total{code="200",handler="/api/v1/query"}'):
            return float(line.split()[-1])
    return 0.0


@pytest.mark.binary("prometheus")
def test_concurrent_identical_requests_share_one_query_and_the_ttl_expires() -> None:
    backend = start_backend("prometheus")  # our own: the count must not see other tests' queries
    try:
        now = float(int(time.time()) - 30)
        pods = [PodSpec(f"web-6f7d8c9b5-p{i}", gpus=8, layout="honor", labels={"app": "web"}) for i in range(20)]
        backend.load(build("co", pods, now))
        # The store off: this is about the client's own sharing and answer cache (tests/test_store.py: the store).
        catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=2.0, store=None)
        settings = Settings(prometheus_url=backend.url, pod_source="prometheus", catalog=catalog)
        path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/co/pods/%2A/llm_composite_load?labelSelector=app%3Dweb"
        with running_adapter(settings, clock=lambda: now) as url:
            before = query_count(backend)
            with concurrent.futures.ThreadPoolExecutor(50) as pool:
                answers = list(pool.map(lambda _: httpx.get(url + path, timeout=30), range(100)))
            assert all(r.status_code == 200 and len(r.json()["items"]) == 20 for r in answers)
            bodies = {r.content for r in answers}
            assert len(bodies) == 1
            used = query_count(backend) - before
            # 1 pod lookup + 3 composite terms, give or take a flight that started just as another ended.
            assert 4 <= used <= 8, used
            time.sleep(2.2)  # past the TTL: the next request must go upstream again
            before = query_count(backend)
            assert httpx.get(url + path, timeout=30).status_code == 200
            assert query_count(backend) - before == 3  # the 3 terms (pod membership has its own 10 s cache)
    finally:
        backend.close()
