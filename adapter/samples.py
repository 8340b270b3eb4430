"""One sample of one series: the value type shared by the query layer (which parses it) and the pure
numerics in ``aggregate.py`` (which reduce it). It lives below both so neither imports the other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant-vector answer: its labels, the evaluation timestamp and the value."""

    labels: dict[str, str]
    ts: float
    value: float
