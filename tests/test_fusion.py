"""A composite fused at refresh is what a poll serves, even when its terms refresh at once.

In process and deterministic: the real provider and store over a fake Prometheus
(``tests/support/fake_prometheus.py``), the store on an injected monotonic clock, and the interleaving set by
the test: every term's refresh starts together and their answers are let go one by one. A fusion made while
another term's refresh is under way must not stay with that term's old value, or no poll can use the fused
values (each then fuses its own pods again, on the request path).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from adapter.aggregate import fuse
from adapter.catalog import load_catalog
from adapter.labels import EVERYTHING, parse_selector
from adapter.pods.prometheus import PrometheusPodSource
from adapter.provider.base import MetricInfo
from adapter.provider.prometheus import PrometheusProvider
from adapter.query.promql import Scope, namespace_series
from adapter.store import StoreConfig
from tests.support.fake_prometheus import FakePrometheus, Series

NS = "fu"
PODS = [f"web-6f7d8c9b5-p{i}" for i in range(4)]
COMPOSITE = "llm_composite_load"
REFRESH_S = 15.0


async def settled(done: Callable[[], bool], what: str) -> None:
    """Wait for ``done()`` (a refresh reduces and fuses in a worker thread); a bound only against a hang."""
    for _ in range(3000):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"{what} never happened")


class HeldThreads:
    """``asyncio.to_thread`` whose next ``calls`` calls, their work done, wait for the test's ``waiting[i].set()``."""

    def __init__(self, to_thread: Callable[..., Awaitable[Any]], calls: int) -> None:
        self._to_thread = to_thread
        self._left = calls
        self.waiting: list[asyncio.Event] = []

    async def __call__(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        result = await self._to_thread(func, *args, **kwargs)
        if self._left > 0:
            self._left -= 1
            done = asyncio.Event()
            self.waiting.append(done)
            await done.wait()
        return result


def test_terms_refreshing_at_once_leave_a_fusion_of_the_newest_values(monkeypatch: pytest.MonkeyPatch) -> None:
    catalog = dataclasses.replace(
        load_catalog(None), cache_ttl_seconds=0.0, store=StoreConfig(refresh_s=REFRESH_S, max_staleness_s=30.0)
    )
    fake = FakePrometheus()
    generation = [1.0]

    def series(promql: str) -> list[Series]:
        """Every pod's value for a term's query; no pod is terminating or finished (the kube_pod_* queries)."""
        if "kube_pod" in promql:
            return []
        return [({"namespace": NS, "pod": p}, generation[0] * (1 + i)) for i, p in enumerate(PODS)]

    fake.fallback = series
    fake.answer(
        namespace_series("kube_pod_labels", catalog, NS),
        [({"namespace": NS, "pod": p, "label_app": "web"}, 1.0) for p in PODS],
    )
    now = [1000.0]
    info = MetricInfo("pods", COMPOSITE, True)

    async def main() -> None:
        async with fake.http_client() as http:
            client = fake.client(http)
            pods = PrometheusPodSource(client, catalog, ttl_s=0.0)
            provider = PrometheusProvider(catalog, client, pods, store=catalog.store)
            store = provider.store
            assert store is not None
            store.monotonic = lambda: now[0]
            names = provider.served[COMPOSITE].names
            keys = [(NS, n, EVERYTHING) for n in names]

            async def poll() -> dict[str, float]:
                answer = await provider.get_metric_by_selector(NS, parse_selector("app=web"), info, EVERYTHING)
                return {s.obj.name: s.value for s in answer}  # type: ignore[union-attr]

            first = await poll()  # loads every term; the composite is now fused at each term's refresh
            assert set(first) == set(PODS)
            old = [store.peek(k).value for k in keys]  # type: ignore[union-attr]

            generation[0] = 2.0  # the backend's values move on
            # Every term's refresh gets its answer and reduces it; none of them is done (stored) until the
            # test lets it go, one by one: the refreshes overlap for certain, in an order the test sets.
            held = HeldThreads(asyncio.to_thread, calls=len(keys))
            monkeypatch.setattr(asyncio, "to_thread", held)
            now[0] += REFRESH_S * 1.5  # every key is due (at most 1.5 refreshes after its load), none expired
            await store._tick()  # one pass of the refresh loop: every term's refresh starts at once
            await settled(lambda: len(held.waiting) == len(keys), "every refresh reducing its answer")

            def refreshed() -> int:
                return sum(store.peek(k).value is not b for k, b in zip(keys, old, strict=True))  # type: ignore[union-attr]

            for i, done in enumerate(held.waiting):
                done.set()
                await settled(lambda i=i: refreshed() == i + 1, f"refresh {i + 1} stored")

            fresh = [store.peek(k).value for k in keys]  # type: ignore[union-attr]
            fused = provider._fused[(NS, COMPOSITE, EVERYTHING)]
            assert fused is not None, "no refresh fused the composite"
            assert all(s is f for s, f in zip(fused.sources, fresh, strict=True)), (
                "the fusion kept a term's old value: polls cannot use it"
            )
            reading = await provider.current(COMPOSITE, Scope(NS, tuple(PODS)), EVERYTHING)
            assert reading.quantities is fused.quantities  # the poll served the fused values
            want = fuse(catalog.composites[COMPOSITE].terms, {n: f.values for n, f in zip(names, fresh, strict=True)})
            assert await poll() == {p: cv.value for p, cv in want.items()} != first
            await pods.close()
            await provider.close()

    asyncio.run(main())
