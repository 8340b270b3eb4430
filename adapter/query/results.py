"""Parsing of Prometheus HTTP API answers (pure). Anything unexpected is an UpstreamError."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from adapter.errors import InternalError, UpstreamError
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


def _data(body: bytes, status_code: int) -> dict[str, Any]:
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        raise UpstreamError(f"backend answered HTTP {status_code} with a body that is not JSON") from None
    if not isinstance(doc, dict):
        raise UpstreamError("backend answered JSON that is not an object")
    if doc.get("status") != "success":
        error = str(doc.get("error", "unknown error"))[:300]
        etype = str(doc.get("errorType", ""))
        # bad_data means the query we built is wrong: a catalog problem, not a client or backend one.
        if etype == "bad_data" or status_code == 400:
            raise InternalError(f"the backend rejected a catalog query: {error}")
        raise UpstreamError(f"backend query failed ({etype or status_code}): {error}")
    data = doc.get("data")
    if not isinstance(data, dict):
        raise UpstreamError("backend answer has no data object")
    return data


def parse_vector(body: bytes, status_code: int = 200) -> list[Sample]:
    """Samples of an instant query answer (resultType vector; a scalar becomes one unlabelled sample)."""
    data = _data(body, status_code)
    rtype, result = data.get("resultType"), data.get("result")
    try:
        if rtype == "scalar":
            return [Sample({}, float(result[0]), _float(result[1]))]  # type: ignore[index]
        if rtype != "vector" or not isinstance(result, list):
            raise ValueError(f"resultType {rtype!r}")
        out = []
        for item in result:
            labels, point = item["metric"], item["value"]
            if not isinstance(labels, dict):
                raise ValueError("metric is not an object")
            out.append(Sample(labels, float(point[0]), _float(point[1])))
        return out
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UpstreamError(f"backend answer is malformed: {exc}") from None


def parse_matrix(body: bytes, status_code: int = 200) -> list[RangeSeries]:
    """Series of a range query answer (resultType matrix)."""
    data = _data(body, status_code)
    result = data.get("result")
    try:
        if data.get("resultType") != "matrix" or not isinstance(result, list):
            raise ValueError(f"resultType {data.get('resultType')!r}")
        out = []
        for item in result:
            points = item["values"]
            out.append(RangeSeries(dict(item["metric"]), tuple(float(p[0]) for p in points),
                                   tuple(_float(p[1]) for p in points)))
        return out
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise UpstreamError(f"backend answer is malformed: {exc}") from None
