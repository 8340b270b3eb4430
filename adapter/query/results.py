"""Parsing of Prometheus HTTP API answers (pure). Anything unexpected is an UpstreamError.

A partial answer is never parsed as a complete one: VictoriaMetrics' ``isPartial: true`` and any ``warnings``
(Prometheus: a failed remote-read or other secondary store; Thanos: an unreachable StoreAPI with partial responses
allowed) raise ``PartialAnswer``. Big answers (over ``_BIG_ANSWER`` bytes) are decoded item by item, so a caller
that parses them in a worker thread (``PromClient`` does) lets the event loop run between items: one
``json.loads`` of the whole body would hold the GIL for its entire run (seconds for tens of MB).
"""

from __future__ import annotations

import contextlib
import gc
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from adapter.errors import UpstreamError
from adapter.samples import Sample


@dataclass(frozen=True, slots=True)
class RangeSeries:
    labels: dict[str, str]
    ts: tuple[float, ...]
    values: tuple[float, ...]


def _float(raw: Any) -> float:
    # Prometheus sends values as strings: "1.5", "NaN", "+Inf", "-Inf".
    if not isinstance(raw, str):
        raise ValueError(f"value is not a string: {raw!r}")
    return float(raw)


class BackendAnswerError(UpstreamError):
    """The backend answered, but not with data we may serve. ``log_detail`` (the backend's own words, which may
    name internal addresses) is for the adapter's log only; the message is what the client sees."""

    def __init__(self, message: str, log_detail: str) -> None:
        super().__init__(message)
        self.log_detail = log_detail


class PartialAnswer(BackendAnswerError):
    """The backend said its answer is incomplete."""


class TooManySeries(UpstreamError):
    """The answer holds more series than the bound (``--backend-max-answer-series``)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the backend's answer has more than {limit} series")
        self.limit = limit


class ParseDeadline(UpstreamError):
    """The query's deadline passed while its answer was being parsed: parsing stopped there."""

    def __init__(self) -> None:
        super().__init__("the backend's answer could not be parsed within the query deadline")


@dataclass(frozen=True, slots=True)
class ParseLimits:
    """What parsing one answer may take: until ``deadline`` (``time.monotonic()``), and ``max_series`` series."""

    deadline: float = float("inf")
    max_series: int = 2**62


NO_LIMITS = ParseLimits()
T = TypeVar("T")
# A parser of one answer: (body, HTTP status, limits) -> what it holds.
Parser = Callable[[bytes, int, ParseLimits], T]
# Items decoded between two looks at the clock (a look costs ~50 ns; an item a few microseconds).
_CHECK_EVERY = 256


_BIG_ANSWER = 256 * 1024
_WS = re.compile(r"[ \t\n\r]*")
# Where the bulk of an answer sits: the top object, its data object, and data.result (vector or matrix items).
_SPLIT = {(): "{", ("data",): "{", ("data", "result"): "["}
_DECODER = json.JSONDecoder()


def _skip(text: str, pos: int) -> int:
    return _WS.match(text, pos).end()  # type: ignore[union-attr]  # the pattern matches the empty string


def _decode(text: str, pos: int, path: tuple[str, ...], limits: ParseLimits = NO_LIMITS) -> tuple[Any, int]:
    """The JSON value at ``pos`` (no leading whitespace) and the position after it; containers on ``_SPLIT``
    paths are walked here, one member or item per ``raw_decode`` call, within ``limits`` (``data.result``
    items beyond ``max_series`` raise ``TooManySeries``, the deadline ``ParseDeadline``)."""
    opener = _SPLIT.get(path)
    if opener is None or text[pos : pos + 1] != opener:
        return _DECODER.raw_decode(text, pos)
    closer = "}" if opener == "{" else "]"
    obj: dict[str, Any] = {}
    items: list[Any] = []
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == closer:
        return (obj if opener == "{" else items), pos + 1
    while True:
        if opener == "{":
            key, pos = _DECODER.raw_decode(text, pos)
            if not isinstance(key, str):
                raise ValueError("object key is not a string")
            pos = _skip(text, pos)
            if text[pos : pos + 1] != ":":
                raise ValueError("expected ':'")
            obj[key], pos = _decode(text, _skip(text, pos + 1), (*path, key), limits)
        else:
            item, pos = _DECODER.raw_decode(text, pos)
            items.append(item)
            if len(items) % _CHECK_EVERY == 0:
                _check(len(items), limits)
        pos = _skip(text, pos)
        sep = text[pos : pos + 1]
        if sep == closer:
            return (obj if opener == "{" else items), pos + 1
        if sep != ",":
            raise ValueError(f"expected ',' or {closer!r} at {pos}")
        pos = _skip(text, pos + 1)


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextlib.contextmanager
def _gc_paused(big: bool) -> Iterator[None]:
    """No cyclic garbage collection while a big answer is parsed (re-entrant across threads).

    A parsed JSON document holds no reference cycles, so the collector finds nothing in it, yet its passes over
    the hundreds of thousands of fresh objects hold the GIL and stall the event loop: parsing 200,000 series took
    ~3x longer with it, and stalled the loop ~2x longer (benchmarks/big_answer.py).
    """
    global _gc_pausers, _gc_was_enabled
    if not big:
        yield
        return
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


def _check(series: int, limits: ParseLimits) -> None:
    if series > limits.max_series:
        raise TooManySeries(limits.max_series)
    if time.monotonic() > limits.deadline:
        raise ParseDeadline


def loads(body: bytes, limits: ParseLimits = NO_LIMITS) -> Any:
    """``json.loads(body)``; bodies over ``_BIG_ANSWER`` bytes are walked member by member (see module doc),
    stopping at ``limits``."""
    if len(body) < _BIG_ANSWER:
        return json.loads(body)
    text = body.decode("utf-8")
    value, end = _decode(text, _skip(text, 0), (), limits)
    if _skip(text, end) != len(text):
        raise ValueError("extra data after the JSON document")
    return value


def _data(body: bytes, status_code: int, limits: ParseLimits) -> dict[str, Any]:
    try:
        doc = loads(body, limits)
    except (ValueError, UnicodeDecodeError):
        raise UpstreamError(f"backend answered HTTP {status_code} with a body that is not JSON") from None
    if not isinstance(doc, dict):
        raise UpstreamError("backend answered JSON that is not an object")
    if doc.get("status") != "success":
        error = str(doc.get("error", "unknown error"))[:300]
        etype = str(doc.get("errorType", ""))
        # bad_data / 400: the backend (or a gateway in front of it) refused the query. Its words may name
        # addresses, tenants or the query's text, so they go to the log only; the client gets a fixed 503.
        if etype == "bad_data" or status_code == 400:
            raise BackendAnswerError("the backend refused the query (see the adapter's log)", f"{etype}: {error}")
        raise BackendAnswerError(f"backend query failed ({etype or status_code})", error)
    if doc.get("isPartial") is True:
        # vmselect with a vmstorage node down (when deny_partial_response is not honoured).
        raise PartialAnswer("the backend's answer is partial (isPartial); not served as complete", "isPartial=true")
    warnings = doc.get("warnings")
    if warnings:
        # Prometheus / Thanos: the answer lacks what an unreachable store holds. (``infos`` are informational.)
        detail = "; ".join(str(w) for w in warnings[:5]) if isinstance(warnings, list) else str(warnings)
        raise PartialAnswer(
            "the backend's answer is partial (it carries warnings); not served as complete", detail[:500]
        )
    data = doc.get("data")
    if not isinstance(data, dict):
        raise UpstreamError("backend answer has no data object")
    return data


def parse_vector(body: bytes, status_code: int = 200, limits: ParseLimits = NO_LIMITS) -> list[Sample]:
    """Samples of an instant query answer (resultType vector; a scalar becomes one unlabelled sample)."""
    with _gc_paused(len(body) >= _BIG_ANSWER):
        return _vector(body, status_code, limits)


def _vector(body: bytes, status_code: int, limits: ParseLimits) -> list[Sample]:
    data = _data(body, status_code, limits)
    rtype, result = data.get("resultType"), data.get("result")
    try:
        if rtype == "scalar":
            return [Sample({}, float(result[0]), _float(result[1]))]  # type: ignore[index]
        if rtype != "vector" or not isinstance(result, list):
            raise ValueError(f"resultType {rtype!r}")
        _check(len(result), limits)
        out = []
        for item in result:
            labels, point = item["metric"], item["value"]
            if not isinstance(labels, dict):
                raise ValueError("metric is not an object")
            out.append(Sample(labels, float(point[0]), _float(point[1])))
        return out
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UpstreamError(f"backend answer is malformed: {exc}") from None


def parse_matrix(body: bytes, status_code: int = 200, limits: ParseLimits = NO_LIMITS) -> list[RangeSeries]:
    """Series of a range query answer (resultType matrix)."""
    with _gc_paused(len(body) >= _BIG_ANSWER):
        return _matrix(body, status_code, limits)


def _matrix(body: bytes, status_code: int, limits: ParseLimits) -> list[RangeSeries]:
    data = _data(body, status_code, limits)
    result = data.get("result")
    try:
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise ValueError(f"resultType {data.get('resultType')!r}")
        _check(len(result), limits)
        out = []
        for item in result:
            points = item["values"]
            out.append(
                RangeSeries(
                    dict(item["metric"]), tuple(float(p[0]) for p in points), tuple(_float(p[1]) for p in points)
                )
            )
        return out
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UpstreamError(f"backend answer is malformed: {exc}") from None
