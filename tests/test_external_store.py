"""External metrics are answered from the value store: one backend query per key per refresh, whatever the
number of requests, and the same items a direct read of the backend gives.

In process and deterministic: the real provider, store and ``ExternalProvider`` over a fake Prometheus
(``tests/support/fake_prometheus.py``) that counts the queries it receives, the store on an injected monotonic
clock, a refresh run by the test (one pass of the store's loop). That the rendered PromQL means what it should
is proven against real backends by ``tests/api/test_external_metrics.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter

from adapter.catalog import load_catalog
from adapter.labels import EVERYTHING, parse_selector
from adapter.pods.prometheus import PrometheusPodSource
from adapter.provider.external import ExternalProvider, ExternalValue
from adapter.provider.prometheus import PrometheusProvider
from adapter.query.promql import Scope, render
from adapter.store import StoreConfig
from tests.support.fake_prometheus import FakePrometheus, Series

NS = "ext"
PODS = {f"llama-6f7d8c9b5-p{i}": "llama" for i in range(3)} | {f"mistral-7c6b5d4f3-p{i}": "mistral" for i in range(2)}
REFRESH_S = 15.0
REQUESTS = 200


def series(promql: str) -> list[Series]:
    """Every pod's value for a term's query, its model on the engine's series; no kube_pod_* answer."""
    if "kube_pod" in promql:
        return []
    out: list[Series] = []
    for i, (pod, model) in enumerate(PODS.items()):
        if "model_name" in promql and f'"{model}"' not in promql:
            continue  # the fake evaluates nothing: a model_name matcher is honoured by hand
        out.append(({"namespace": NS, "pod": pod, "model_name": model}, 1.0 + i))
    return out


def test_external_values_cost_one_query_per_key_per_refresh() -> None:
    catalog = dataclasses.replace(
        load_catalog(None), cache_ttl_seconds=0.0, store=StoreConfig(refresh_s=REFRESH_S, max_staleness_s=30.0)
    )
    fake = FakePrometheus()
    fake.fallback = series
    now = [1000.0]
    llama = parse_selector("model_name=llama")

    async def main() -> None:
        async with fake.http_client() as http:
            client = fake.client(http)
            pods = PrometheusPodSource(client, catalog, ttl_s=0.0)
            provider = PrometheusProvider(catalog, client, pods, store=catalog.store)
            store = provider.values.store
            assert store is not None
            store.monotonic = lambda: now[0]
            external = ExternalProvider(provider)

            async def poll(metric: str, selector: str) -> list[ExternalValue]:
                return await external.get(NS, metric, parse_selector(selector))

            queue = await poll("inference_queue_depth", "model_name=llama")
            composite = await poll("llm_composite_load", "model_name=mistral")
            first = Counter(fake.queries)
            # Every request after the first of its key is answered from memory: no backend query at all.
            answers = await asyncio.gather(
                *(poll("inference_queue_depth", "model_name=llama") for _ in range(REQUESTS)),
                *(poll("llm_composite_load", "model_name=mistral") for _ in range(REQUESTS)),
            )
            assert answers == [queue] * REQUESTS + [composite] * REQUESTS
            assert fake.queries == first
            mdef = catalog.metrics["inference_queue_depth"]
            assert first[render(mdef, catalog, Scope(NS), llama)] == 1
            # The composite's keys: each term under the selector (which pods), each term for every pod.
            terms = provider.served["llm_composite_load"].names
            assert set(store.namespace_keys()) == {NS} and len(store) == 1 + 2 * len(terms)
            assert sum(first.values()) == len(store)

            # The same items as a direct read of the backend.
            direct = await provider.read("inference_queue_depth", Scope(NS), llama)
            assert queue == [
                ExternalValue("inference_queue_depth", {"model_name": "llama"}, queue[0].ts, 1.0 + 2.0 + 3.0, None)
            ]
            assert queue[0].value == sum(pv.value for pv in direct.values.values())

            # One refresh: one more query per key, and the requests that follow again cost nothing.
            before = Counter(fake.queries)
            now[0] += REFRESH_S * 1.5
            await store._tick()
            assert store._running, "no key was due"
            await asyncio.gather(*store._running)  # the refreshes the pass started, done
            refreshed = Counter(fake.queries)
            assert refreshed - before == Counter(first.keys())
            for _ in range(REQUESTS):
                assert await poll("inference_queue_depth", "model_name=llama") == queue
            assert fake.queries == refreshed
            assert await external.get(NS, "inference_queue_depth", EVERYTHING) != queue  # another key: a load
            await pods.close()
            await provider.close()

    asyncio.run(main())
