"""A composite read from the store is fused for the whole namespace off the request path, from its terms' newest
stored values, even when a term refreshes while the fusion runs.

In process and deterministic: the real provider and store over a fake Prometheus
(``tests/support/fake_prometheus.py``), the store on an injected monotonic clock, and the interleaving set by
the test: the background fusion a poll starts is held in its worker thread while a term refreshes. A fusion
kept with that term's old value could serve no poll (each would then fuse its own pods again, on the request
path), so it must be redone from the newest values.
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


def test_a_term_refreshing_during_a_fusion_leaves_a_fusion_of_the_newest_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
            values = provider.values
            store = values.store
            assert store is not None
            store.monotonic = lambda: now[0]
            served = provider.served[COMPOSITE]
            keys = [(NS, n, EVERYTHING) for n in served.names]
            fkey = (NS, COMPOSITE, EVERYTHING)

            def stored() -> list[object]:
                return [store.peek(k).value for k in keys]  # type: ignore[union-attr]

            def fused_from_stored() -> bool:
                fused = values._fused.get(fkey)
                return fused is not None and all(s is f for s, f in zip(fused.sources, stored(), strict=True))

            def want() -> dict[str, float]:
                per_term = {n: v.values for n, v in zip(served.names, stored(), strict=True)}  # type: ignore[attr-defined]
                return {p: cv.value for p, cv in fuse(served.terms, per_term).items()}

            async def poll() -> dict[str, float]:
                answer = await provider.get_metric_by_selector(NS, parse_selector("app=web"), info, EVERYTHING)
                return {s.obj.name: s.value for s in answer}  # type: ignore[union-attr]

            first = await poll()  # loads every term, fuses its own pods and starts the namespace's fusion
            assert first == want() and set(first) == set(PODS)
            await settled(fused_from_stored, "the first fusion")
            reading = await values.read(served, Scope(NS, tuple(PODS)), EVERYTHING)
            assert reading.quantities is values._fused[fkey].quantities  # the poll served the fused values

            # Every term refreshes with new values: the next poll fuses its own pods and starts a fusion, which
            # the test holds in its worker thread while one term refreshes again.
            generation[0] = 2.0
            now[0] += REFRESH_S * 1.5  # every key is due (at most 1.5 refreshes after its load), none expired
            old = stored()
            await store._tick()
            await settled(lambda: all(a is not b for a, b in zip(stored(), old, strict=True)), "every term refreshed")
            held = HeldThreads(asyncio.to_thread, calls=1)
            monkeypatch.setattr(asyncio, "to_thread", held)
            second = await poll()
            assert second == want() != first
            await settled(lambda: len(held.waiting) == 1, "the background fusion reaching its thread")
            before = stored()
            generation[0] = 3.0
            store.refresh_soon(keys[0], ["a-pod-asked-for"])  # the first term refreshes at the next tick
            await store._tick()
            await settled(lambda: stored()[0] is not before[0], "the first term refreshed again")
            held.waiting[0].set()  # the fusion of the second values is done: no longer what the store holds
            await settled(fused_from_stored, "a fusion of the newest values")
            third = await poll()
            assert third == want() != second
            reading = await values.read(served, Scope(NS, tuple(PODS)), EVERYTHING)
            assert reading.quantities is values._fused[fkey].quantities
            await pods.close()
            await provider.close()

    asyncio.run(main())
