"""Review lanes (auth/pool.py), one-in-flight calls (ttlcache.py) and /explain's attributes (auth/user.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from adapter.auth.pool import ReviewPool
from adapter.auth.user import UserInfo, explain_attributes
from adapter.errors import UpstreamError
from adapter.ttlcache import shared_call


class ManualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only when the test says (``advance``): a deadline (``asyncio.wait_for``)
    passes exactly then, never because the machine was slow."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def time(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def run_on_manual_clock(scenario: Callable[[ManualClockLoop], Coroutine[Any, Any, None]]) -> None:
    with asyncio.Runner(loop_factory=ManualClockLoop) as runner:
        loop = runner.get_loop()
        assert isinstance(loop, ManualClockLoop)
        runner.run(scenario(loop))


def test_queue_time_counts_against_the_deadline_and_a_withdrawn_call_never_runs() -> None:
    release = threading.Event()
    started = threading.Event()
    ran: list[str] = []

    def call(name: str) -> str:
        ran.append(name)
        started.set()
        release.wait(10)
        return name

    async def scenario(loop: ManualClockLoop) -> None:
        pool = ReviewPool("test", workers=1, timeout_s=0.3)
        first = asyncio.ensure_future(pool.run(call, "first"))
        assert await asyncio.to_thread(started.wait, 10)  # "first" occupies the only thread
        queued = asyncio.ensure_future(pool.run(call, "queued"))  # waits for a thread
        await asyncio.sleep(0)  # submitted, its deadline set
        assert pool.in_flight == 2 and not queued.done()
        loop.advance(0.3)  # both deadlines pass: "queued" still in the queue, "first" still running
        with pytest.raises(UpstreamError, match="not answered within"):
            await queued
        with pytest.raises(UpstreamError):
            await first  # the running one times out too
        release.set()
        assert await pool.run(call, "later") == "later"
        pool.close()

    run_on_manual_clock(scenario)
    assert ran == ["first", "later"]  # "queued" was withdrawn before a thread picked it up


def test_a_full_queue_refuses_at_once() -> None:
    release = threading.Event()

    async def scenario(loop: ManualClockLoop) -> None:
        pool = ReviewPool("test", workers=1, timeout_s=5, max_waiting=2)
        waiting = [asyncio.ensure_future(pool.run(release.wait, 5)) for _ in range(3)]
        await asyncio.sleep(0)  # each has entered the lane (the clock does not move: no deadline passes)
        assert pool.in_flight == 3
        with pytest.raises(UpstreamError, match="too many"):
            await pool.run(release.wait, 5)
        release.set()
        assert await asyncio.gather(*waiting) == [True, True, True]
        assert pool.in_flight == 0
        pool.close()

    run_on_manual_clock(scenario)


def test_shared_call_runs_once_for_concurrent_callers_and_shares_errors() -> None:
    calls = 0

    async def review() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return "user"

    async def failing() -> str:
        await asyncio.sleep(0.01)
        raise UpstreamError("down")

    async def scenario() -> None:
        in_flight: dict[str, asyncio.Future[str]] = {}
        assert await asyncio.gather(*(shared_call(in_flight, "k", review) for _ in range(10))) == ["user"] * 10
        assert calls == 1 and in_flight == {}
        assert await shared_call(in_flight, "k", review) == "user"  # not in flight any more: a new call
        assert calls == 2
        results = await asyncio.gather(
            *(shared_call(in_flight, "bad", failing) for _ in range(3)), return_exceptions=True
        )
        assert all(isinstance(r, UpstreamError) for r in results)

    asyncio.run(scenario())


def test_explain_attributes_are_those_of_the_equivalent_metrics_request() -> None:
    user = UserInfo("u")
    attrs = explain_attributes(user, b"namespace=team-a&metric=llm_composite_load&selector=app%3Dweb")
    assert attrs is not None
    assert (
        attrs.verb,
        attrs.namespace,
        attrs.group,
        attrs.version,
        attrs.resource,
        attrs.subresource,
        attrs.name,
        attrs.resource_request,
    ) == ("get", "team-a", "custom.metrics.k8s.io", "v1beta2", "pods", "llm_composite_load", "*", True)
    assert explain_attributes(user, b"metric=m&selector=a%3Db") is None
    assert explain_attributes(user, b"namespace=ns") is None
    # A repeated parameter: the route reads the last value, and so does the authorization.
    again = explain_attributes(user, b"namespace=mine&namespace=theirs&metric=m")
    assert again is not None and again.namespace == "theirs"
