"""The full garbage-collection passes run on the adapter's schedule, never on CPython's (``adapter/heap.py``).

Structural only (no timing): while a schedule holds the collector, CPython's generation-2 threshold is out of
reach, the start-up objects are frozen, the schedule's own passes are full ones; the last stop restores
everything. The pauses themselves are measured by ``benchmarks/load.py --controller-only``.
"""

from __future__ import annotations

import asyncio
import gc

import httpx
import pytest

from adapter import heap
from adapter.heap import FullCollections
from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend


def test_a_schedule_takes_the_full_passes_over_and_gives_them_back() -> None:
    before = gc.get_threshold()
    calls: list[int] = []

    def collect(generation: int) -> int:
        calls.append(generation)
        return 3

    async def main() -> None:
        first, second = FullCollections(every_s=3600, collect=collect), FullCollections(every_s=3600, collect=collect)
        first.start()
        first.start()  # idempotent
        assert heap.taken_over() and gc.get_threshold() == (before[0], before[1], heap._NEVER)
        assert gc.get_freeze_count() > 0  # what was alive at start-up is out of the collector's reach
        second.start()
        for _ in range(5):
            await asyncio.sleep(0)
        # One start-up pass (the first holder's), then each schedule's first pass: all full ones.
        assert calls == [2, 2, 2] and (first.passes, first.collected) == (1, 3)
        await first.stop()
        assert heap.taken_over() and gc.get_threshold()[2] == heap._NEVER  # the second still holds it
        await second.stop()
        await second.stop()  # idempotent

    asyncio.run(main())
    assert not heap.taken_over() and gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_an_interval_must_be_positive() -> None:
    with pytest.raises(ValueError):
        FullCollections(every_s=0)


def test_a_serving_adapter_holds_the_collector_while_it_runs(prometheus: TestBackend) -> None:
    before = gc.get_threshold()
    with running_adapter(Settings(prometheus_url=prometheus.url, pod_source="prometheus")) as url:
        assert httpx.get(url + "/livez", timeout=30).status_code == 200
        assert heap.taken_over() and gc.get_threshold()[2] == heap._NEVER
    assert not heap.taken_over() and gc.get_threshold() == before
