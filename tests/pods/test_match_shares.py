"""The pod source's selector-match cache gives each namespace a fair share (``adapter/pods/matches.py``).

A namespace asking ever new selectors must not push another's matches out: those would be recomputed on every
poll of the victim's HPAs (milliseconds each in a big namespace), which is what clearing the whole cache at
its cap did.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time

import httpx
import pytest

from adapter.catalog import load_catalog
from adapter.labels import parse_selector
from adapter.pods.matches import BUDGET, MatchCache
from adapter.pods.prometheus import PrometheusPodSource
from adapter.query.client import PromClient
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build


def test_a_flood_within_its_share_evicts_only_its_own_entries() -> None:
    cache: MatchCache[str, int] = MatchCache(total=100, per_namespace=10)
    for i in range(5):
        cache.put("victim", f"v{i}", i)
    for i in range(1_000):
        cache.put("attacker", f"a{i}", i)
    assert cache.namespace_sizes() == {"victim": 5, "attacker": 10}
    assert [cache.get("victim", f"v{i}") for i in range(5)] == list(range(5))
    # The attacker keeps its ten most recent.
    assert cache.get("attacker", "a989") is None and cache.get("attacker", "a990") == 990
    assert cache.shares.get(BUDGET, "attacker") == 990 and cache.shares.get(BUDGET, "victim") == 0


def test_at_the_total_cap_the_biggest_namespace_gives_way() -> None:
    cache: MatchCache[str, int] = MatchCache(total=12, per_namespace=8)
    for ns in ("a", "b"):  # two attackers fill the total between them
        for i in range(8 if ns == "a" else 4):
            cache.put(ns, f"{ns}{i}", i)
    assert len(cache) == 12
    for i in range(3):  # a newcomer still gets room: the biggest ("a") gives way, oldest first
        cache.put("victim", f"v{i}", i)
    assert cache.namespace_sizes() == {"a": 5, "b": 4, "victim": 3}
    assert cache.get("a", "a0") is None and cache.get("a", "a3") == 3
    assert cache.get("b", "b0") == 0 and cache.shares.get(BUDGET, "victim") == 0
    # Once all hold about as many, a namespace's own oldest makes its room (least recently used: v0 was read).
    assert cache.get("victim", "v0") == 0
    cache.put("a", "a-new", 0)
    cache.put("victim", "v3", 3)
    assert len(cache) == 12 and cache.get("victim", "v0") == 0


def test_a_hit_refreshes_recency_and_replacing_keeps_the_size() -> None:
    cache: MatchCache[str, int] = MatchCache(total=10, per_namespace=2)
    cache.put("ns", "x", 1)
    cache.put("ns", "y", 2)
    assert cache.get("ns", "x") == 1  # y is now the oldest
    cache.put("ns", "x", 3)
    cache.put("ns", "z", 4)
    assert (cache.get("ns", "x"), cache.get("ns", "y"), cache.get("ns", "z"), len(cache)) == (3, None, 4, 2)
    with pytest.raises(ValueError):
        MatchCache(total=0, per_namespace=1)


def test_the_victims_matches_survive_an_attackers_selector_flood(backend: TestBackend, unique_ns: str) -> None:
    victim, attacker = f"{unique_ns}-victim", f"{unique_ns}-attacker"
    now = float(int(time.time()) - 30)
    for ns in (victim, attacker):
        pods = [
            PodSpec(f"web-6f7d8c9b5-p{i}", gpus=1, layout="honor", labels={"app": "web"}, deployment="web")
            for i in range(3)
        ]
        backend.load(build(ns, pods, now))
    web = parse_selector("app=web")
    catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=0.0)

    async def main() -> None:
        async with httpx.AsyncClient() as http:
            client = PromClient(backend.url, http=http, backend=backend.kind)  # type: ignore[arg-type]
            source = PrometheusPodSource(client, catalog, ttl_s=60.0, max_matched=50, max_matched_per_namespace=10)
            await source.start()
            try:
                want = await source.pods_for_selector(victim, web)
                assert want == [f"web-6f7d8c9b5-p{i}" for i in range(3)]
                kept = source.matched.get(victim, web)
                for i in range(200):  # a new selector per request, each matching every pod
                    sel = parse_selector(f"app=web,engine notin (x{i})")
                    assert await source.pods_for_selector(attacker, sel) == want
                # The victim's match is the very one computed before the flood: not recomputed.
                assert source.matched.get(victim, web) is kept
                assert await source.pods_for_selector(victim, web) == want
                assert source.matched.namespace_sizes() == {victim: 1, attacker: 10}
                assert source.matched.shares.get(BUDGET, attacker) == 190
            finally:
                await source.close()

    asyncio.run(main())
