"""The per-answer bounds (``adapter/query/bounds.py``, ``results.ParseLimits``) and the readiness rule
(``adapter/query/reachability.py``), on real answer bytes and an injected clock."""

from __future__ import annotations

import json
import time

import pytest

from adapter.query.bounds import AnswerBudget, SeriesCounter
from adapter.query.reachability import Reachability
from adapter.query.results import ParseDeadline, ParseLimits, TooManySeries, parse_matrix, parse_vector


def vector(n: int, **extra: str) -> bytes:
    items = [{"metric": {"pod": f"p{i}", **extra}, "value": [1.0, str(i)]} for i in range(n)]
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": items}}).encode()


def counted(body: bytes, chunk: int, limit: int = 10**9) -> int:
    counter = SeriesCounter(limit)
    for i in range(0, len(body), chunk):
        counter.feed(body[i : i + chunk])
    return counter.count


@pytest.mark.parametrize("chunk", [1, 7, 64, 4096, 10**7])
def test_series_are_counted_exactly_across_chunk_boundaries(chunk: int) -> None:
    # Label values that look like the opener, and a label named "metric": none forge a series.
    body = vector(300, metric="x", trap='"metric":{', other='\\"metric\\":{')
    assert counted(body, chunk) == 300
    spaced = json.dumps(json.loads(body), indent=1).encode()  # whitespace around ':' is JSON too
    assert counted(spaced, chunk) == 300


def test_series_counter_stops_at_the_first_series_over() -> None:
    body = vector(101)
    with pytest.raises(TooManySeries):
        counted(body, 512, limit=100)
    assert counted(vector(100), 512, limit=100) == 100


def test_parse_counts_exactly_and_stops_at_the_deadline() -> None:
    big = vector(30_000)  # over 256 KiB: decoded item by item
    assert len(parse_vector(big, 200, ParseLimits(max_series=30_000))) == 30_000
    with pytest.raises(TooManySeries):
        parse_vector(big, 200, ParseLimits(max_series=29_999))
    with pytest.raises(TooManySeries):
        parse_vector(vector(11), 200, ParseLimits(max_series=10))  # small: one json.loads, then counted
    with pytest.raises(ParseDeadline):
        parse_vector(big, 200, ParseLimits(deadline=time.monotonic() - 1))
    matrix = {"status": "success", "data": {"resultType": "matrix", "result": [{"metric": {}, "values": []}] * 3}}
    with pytest.raises(TooManySeries):
        parse_matrix(json.dumps(matrix).encode(), 200, ParseLimits(max_series=2))


def test_answer_budget_refuses_rather_than_overcommits() -> None:
    budget = AnswerBudget(100)
    assert budget.take(60) and not budget.take(41) and budget.used == 60
    budget.give(60)
    assert budget.take(100) and budget.used == 100


def test_readiness_rule() -> None:
    now = [1000.0]
    r = Reachability(unready_after_s=30.0, probe_interval_s=5.0, clock=lambda: now[0])
    assert r.ready()[0] and r.probe_due()  # nothing known yet: ready, and a probe is due
    r.answered()
    assert not r.probe_due()
    now[0] += 5.0
    assert r.probe_due()
    r.failed()
    now[0] += 29.0
    r.failed()
    assert r.ready()[0]  # 29 s of failures: still ready
    now[0] += 1.0
    ready, why = r.ready()
    assert not ready and "30s" in why  # 30 s without an answer: unready
    r.answered()
    assert r.ready() == (True, "ok")  # the first answer: ready again
    r.failed()
    now[0] += 29.9
    assert r.ready()[0]  # a new failure streak starts from zero: no flapping faster than 30 s
