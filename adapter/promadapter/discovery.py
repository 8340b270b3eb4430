"""Listing series for discovery over ``/api/v1/series``, and how often prometheus-adapter re-lists.

One request per distinct ``seriesQuery``: ``match[]=<seriesQuery>&start=<now - max age>``, as
prometheus-adapter's ``queryClient.Series`` sends it (``pkg/client/api.go``; no ``end``: up to now), through the
project's ``PromClient`` (its deadline, answer-size cap, concurrency bound and error translation). The answer is
checked like every other (``status``, VictoriaMetrics' ``isPartial``, ``warnings``: a partial list is never taken
for the whole one).

The re-list cadence is prometheus-adapter's: ``--metrics-relist-interval`` (default 10m in
``cmd/adapter/adapter.go`` ``main``; its Helm chart sets ``metricsRelistInterval: 1m``) and
``--metrics-max-age`` (how far back a listing looks; 0 means the relist interval, and it may not be shorter).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapter.errors import ConfigError, UpstreamError
from adapter.promadapter.registry import SeriesLabels
from adapter.query.results import NO_LIMITS, ParseLimits, PartialAnswer, TooManySeries, loads

if TYPE_CHECKING:
    from adapter.query.client import PromClient

RELIST_INTERVAL_FLAG = "--metrics-relist-interval"
MAX_AGE_FLAG = "--metrics-max-age"
DEFAULT_RELIST_INTERVAL_S = 600.0  # cmd/adapter/adapter.go: MetricsRelistInterval: 10 * time.Minute


@dataclass(frozen=True)
class RelistSettings:
    """How often discovery re-lists (``interval_s``) and how far back each listing looks (``max_age_s``, 0: the
    interval). ``ConfigError`` when the max age is shorter than the interval (upstream: "max age must not be
    less than relist interval")."""

    interval_s: float = DEFAULT_RELIST_INTERVAL_S
    max_age_s: float = 0.0

    def __post_init__(self) -> None:
        if self.interval_s <= 0:
            raise ConfigError(f"{RELIST_INTERVAL_FLAG} must be positive, not {self.interval_s:g}s")
        if self.max_age_s and self.max_age_s < self.interval_s:
            raise ConfigError(f"{MAX_AGE_FLAG} must not be less than {RELIST_INTERVAL_FLAG}")

    @property
    def lookback_s(self) -> float:
        """Seconds before now a listing starts at."""
        return self.max_age_s or self.interval_s


def flag_seconds(flag: str, text: str) -> float:
    """A duration flag (``10m``, ``90s``, ``0``) in seconds; ``ConfigError`` naming the flag otherwise."""
    from adapter.catalog import duration_seconds

    try:
        return duration_seconds(text, fractional=True) if text not in ("0", "0s") else 0.0
    except ValueError as exc:
        raise ConfigError(f"{flag}: {exc}") from None


def parse_series(body: bytes, status_code: int = 200, limits: ParseLimits = NO_LIMITS) -> list[SeriesLabels]:
    """The label sets of a ``/api/v1/series`` answer; ``UpstreamError`` for anything else, ``TooManySeries``
    past ``limits.max_series``."""
    try:
        doc = loads(body)
    except (ValueError, UnicodeDecodeError):
        raise UpstreamError(f"backend answered HTTP {status_code} with a body that is not JSON") from None
    if not isinstance(doc, dict) or doc.get("status") != "success":
        error = str(doc.get("error", "unknown error"))[:300] if isinstance(doc, dict) else "not an object"
        raise UpstreamError(f"backend refused the series listing: {error}")
    if doc.get("isPartial") is True or doc.get("warnings"):
        raise PartialAnswer("the backend's series listing is partial; not taken as complete", "isPartial/warnings")
    data = doc.get("data")
    if not isinstance(data, list) or not all(
        isinstance(item, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in item.items())
        for item in data
    ):
        raise UpstreamError("backend answer to /api/v1/series is not a list of label sets")
    if len(data) > limits.max_series:
        raise TooManySeries(limits.max_series)
    return data


async def list_series(client: PromClient, series_query: str, *, start: float) -> list[SeriesLabels]:
    """The series matching ``series_query`` seen since unix time ``start``."""
    return await client.series(series_query, start, parse_series)


async def list_all(
    client: PromClient, series_queries: Iterable[str], *, now: float, relist: RelistSettings
) -> dict[str, list[SeriesLabels]]:
    """Every distinct query listed concurrently (the client bounds concurrency); the first failure fails all,
    as upstream refuses a partial update."""
    queries = list(dict.fromkeys(series_queries))
    start = now - relist.lookback_s
    answers = await asyncio.gather(*(list_series(client, q, start=start) for q in queries))
    return dict(zip(queries, answers, strict=True))
