"""The one TTL cache (adapter/ttlcache.py) behind the token, access-review and PromQL answer caches."""

from __future__ import annotations

import asyncio

import pytest

from adapter.ttlcache import TtlCache


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_answer_lives_its_ttl_from_when_its_load_started() -> None:
    clock, loads = Clock(), []

    async def load() -> str:
        loads.append(clock.now)
        clock.now += 2.0  # a slow load: its answer is already 2 s old when it arrives
        return f"answer{len(loads)}"

    async def body() -> None:
        cache: TtlCache[str, str] = TtlCache(lambda _: 10.0, clock=clock)
        assert await cache.get("k", load) == "answer1"
        clock.now = 109.9
        assert await cache.get("k", load) == "answer1" and cache.shared == 1
        clock.now = 110.0
        assert await cache.get("k", load) == "answer2"
        assert loads == [100.0, 110.0]

    asyncio.run(body())


def test_the_ttl_can_depend_on_the_answer_and_zero_keeps_nothing() -> None:
    clock, calls = Clock(), {"yes": 0, "no": 0}

    async def body() -> None:
        cache: TtlCache[str, bool] = TtlCache(lambda allowed: 5.0 if allowed else 0.0, clock=clock)
        for key, answer in (("yes", True), ("no", False)):
            for _ in range(3):

                async def load(key: str = key, answer: bool = answer) -> bool:
                    calls[key] += 1
                    return answer

                assert await cache.get(key, load) is answer
        assert calls == {"yes": 1, "no": 3} and len(cache) == 1

    asyncio.run(body())


def test_concurrent_asks_share_one_load_and_a_failure_is_not_cached() -> None:
    started = 0

    async def failing() -> str:
        nonlocal started
        started += 1
        await asyncio.sleep(0.01)
        raise RuntimeError("backend down")

    async def body() -> None:
        cache: TtlCache[str, str] = TtlCache(lambda _: 60.0)
        results = await asyncio.gather(*(cache.get("k", failing) for _ in range(5)), return_exceptions=True)
        assert started == 1 and all(isinstance(r, RuntimeError) for r in results) and cache.shared == 4
        with pytest.raises(RuntimeError):
            await cache.get("k", failing)
        assert started == 2 and len(cache) == 0

    asyncio.run(body())


def test_memory_stays_bounded_expired_entries_first() -> None:
    clock = Clock()

    async def body() -> None:
        cache: TtlCache[int, int] = TtlCache(lambda v: 1.0 if v < 2 else 100.0, max_entries=4, clock=clock)

        async def value(v: int) -> int:
            return v

        for v in range(4):
            await cache.get(v, lambda v=v: value(v))  # type: ignore[misc]
        clock.now += 5.0  # 0 and 1 expired, 2 and 3 still fresh
        await cache.get(4, lambda: value(4))
        assert len(cache) == 3  # the expired went, the fresh stayed
        await cache.get(5, lambda: value(5))
        await cache.get(6, lambda: value(6))  # full of fresh answers: everything goes
        assert len(cache) == 1

    asyncio.run(body())
