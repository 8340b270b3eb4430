"""Many HPAs asking for the same metric share one upstream query; stale answers are never served past the TTL.

In process: the real provider and ``PromClient`` over a fake Prometheus (``tests/support/fake_prometheus.py``)
that counts the queries it receives and holds their answers until the burst has joined them, with the
client's answer cache on an injected clock. So the count is exact and no machine is too slow for it. (That
a burst for a new key costs a real backend one query, counted by the backend itself: ``tests/test_store.py``.)
"""

from __future__ import annotations

import asyncio
import dataclasses

from adapter.catalog import load_catalog
from adapter.errors import UpstreamError
from adapter.labels import EVERYTHING, parse_selector
from adapter.pods.prometheus import PrometheusPodSource
from adapter.provider.base import MetricInfo
from adapter.provider.prometheus import PrometheusProvider
from adapter.query.promql import PromQL, namespace_series
from tests.support.fake_prometheus import FakePrometheus, Series

NS = "co"
PODS = [f"web-6f7d8c9b5-p{i}" for i in range(20)]
TTL_S = 2.0
TERMS = ("DCGM_FI_DEV_GPU_UTIL", "vllm:num_requests_waiting", "vllm:inter_token_latency_seconds")


def series(promql: str) -> list[Series]:
    """Every pod's value for a term query (target-layout labels), none for anything else."""
    return [({"namespace": NS, "pod": p}, 1.0 + i) for i, p in enumerate(PODS)] if is_term(promql) else []


def is_term(promql: str) -> bool:
    return any(t in promql for t in TERMS)


def test_concurrent_identical_requests_share_one_query_and_the_ttl_expires() -> None:
    catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=TTL_S, store=None)
    fake = FakePrometheus()
    fake.fallback = series
    labels = namespace_series("kube_pod_labels", catalog, NS)
    fake.answer(labels, [({"namespace": NS, "pod": p, "label_app": "web"}, 1.0) for p in PODS])
    now = [1000.0]
    info = MetricInfo("pods", "llm_composite_load", True)

    async def main() -> None:
        async with fake.http_client() as http:
            # The store off: this is about the client's own sharing and answer cache (tests/test_store.py: the store).
            client = fake.client(http, cache_ttl_s=TTL_S, clock=lambda: now[0])
            pods = PrometheusPodSource(client, catalog, ttl_s=10.0)
            provider = PrometheusProvider(catalog, client, pods)

            async def poll() -> list[str]:
                answer = await provider.get_metric_by_selector(NS, parse_selector("app=web"), info, EVERYTHING)
                return [f"{s.obj.name}={s.value}" for s in answer]  # type: ignore[union-attr]

            gate = fake.hold(is_term)
            burst = [asyncio.ensure_future(poll()) for _ in range(100)]
            held = await gate.reached(3)  # every term's query is at the backend, its answer held
            for _ in range(20):  # let every poll of the burst reach the client
                await asyncio.sleep(0)
            gate.release()
            answers = await asyncio.gather(*burst)
            assert len(answers[0]) == 20 and all(a == answers[0] for a in answers)
            assert {q: fake.queries[q] for q in held} == dict.fromkeys(held, 1), "the burst shared one query per term"
            assert fake.total == 3 + 2  # and one pod lookup (its labels, and which pods are going)

            now[0] += TTL_S - 0.1  # within the TTL: the cached answers serve
            assert await poll() == answers[0]
            assert fake.total == 5

            now[0] += 0.2  # past the TTL: the next request must go upstream again, for the 3 terms only
            assert await poll() == answers[0]  # (pod membership has its own 10 s cache)
            assert {q: fake.queries[q] for q in held} == dict.fromkeys(held, 2)
            assert fake.total == 8
            await pods.close()

    asyncio.run(main())


def test_a_failed_answer_is_shared_by_the_callers_in_flight_but_never_cached() -> None:
    fake = FakePrometheus()
    query = PromQL('sum by (namespace, pod) (vllm:num_requests_waiting{namespace="co"})')
    fake.answer(query, series(query))
    fake.fail(query, 503)

    async def main() -> None:
        async with fake.http_client() as http:
            client = fake.client(http, cache_ttl_s=TTL_S, clock=lambda: 1000.0)  # the clock never moves
            gate = fake.hold(query)
            burst = [asyncio.ensure_future(client.query(query, 1000.0)) for _ in range(10)]
            await gate.reached(1)
            gate.release()
            outcomes = await asyncio.gather(*burst, return_exceptions=True)
            assert all(isinstance(o, UpstreamError) and o.code == 503 for o in outcomes), outcomes
            assert fake.queries[query] == 1  # the ten shared the one failing query
            fake.heal(query)
            # Within the TTL, yet asked again: the failure was not kept.
            assert [s.value for s in await client.query(query, 1000.0)] == [v for _, v in series(query)]
            assert fake.queries[query] == 2

    asyncio.run(main())
