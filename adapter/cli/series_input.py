"""The load series the offline commands read: a CSV file or a Prometheus / VictoriaMetrics range query, put on a
regular grid (``Series``), plus the duration parsing and the one-line user error (``CliError``) they share.

``backtest``, ``calibrate`` and ``simulate`` read their histories and durations through here; the CSV
conventions (time units, index columns, counts, gaps, resampling) are ``backtest``'s module docstring's.
"""

from __future__ import annotations

import csv
import math
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from adapter.catalog import duration_seconds
from adapter.forecast.series import native_spacing, resample_mean
from adapter.query.backend import BackendAccess, flavour_params, redact_url, resolve_url, sync_http

_TRUE = {"1", "true", "yes", "y", "t"}
# Prometheus refuses range queries of more than 11,000 points per series
# (prometheus/prometheus web/api/v1/api.go: "exceeded maximum resolution of 11,000 points per timeseries").
_MAX_POINTS = 11_000


class CliError(Exception):
    """A user error: its message is printed as one line and the command exits with code 2."""


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a plain number of seconds or a duration (``catalog.duration_seconds``, decimals allowed)
    like ``30s``, ``5m``, ``1h30m``, ``1.5h``, ``3d``, ``1w``.

    Raises ``CliError`` for anything else or a non-positive duration.
    """
    s = text.strip()
    try:
        seconds = float(s)
    except ValueError:
        try:
            seconds = duration_seconds(s, fractional=True)
        except ValueError:
            raise CliError(f"bad duration {text!r}: use e.g. 30s, 5m, 1h, 3d") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise CliError(f"bad duration {text!r}: must be positive")
    return seconds


@dataclass(frozen=True)
class Series:
    """A load series on a regular grid (``values[i]`` at ``timestamps[i]``; NaN = gap) and where it came from."""

    timestamps: np.ndarray
    values: np.ndarray
    step_s: float
    source: dict[str, Any]


TIME_UNITS = {"s": 1.0, "ms": 0.001, "min": 60.0, "h": 3600.0}
# A name that says the numbers are not seconds (or are an index): never read it as seconds without a unit.
_NOT_SECONDS = re.compile(r"(^|[^a-z])(min|mins|minute|minutes|h|hr|hour|hours|ms|millis|idx|index)([^a-z]|$)")
_UNIX_1973 = 1e8  # numeric times at least this large are unix seconds, whatever their spacing


def _check_seconds(name: str, ts: np.ndarray) -> None:
    """Refuse a numeric time column read as seconds that looks like another unit or an index."""
    hint = f"give its unit with --time-unit {'|'.join(TIME_UNITS)} (e.g. --time-unit min), or --index-step for an index"
    if _NOT_SECONDS.search(name.lower().replace("-", "_")):
        raise CliError(f"time column {name!r} is numeric and its name does not say seconds: {hint}")
    steps = np.diff(np.unique(ts[np.isfinite(ts)]))
    if steps.size and float(np.min(ts)) < _UNIX_1973 and float(np.median(steps)) <= 1.0:
        raise CliError(f"time column {name!r} counts in steps of {float(np.median(steps)):g}: seconds? {hint}")


def _number(cell: str) -> float | None:
    try:
        return float(cell)
    except ValueError:
        return None


def _parse_time(cell: str, row: int) -> float:
    number = _number(cell)
    if number is not None:
        return number
    try:
        parsed = datetime.fromisoformat(cell.strip())
    except ValueError:
        raise CliError(f"row {row}: cannot read time {cell!r} (unix seconds or ISO-8601 expected)") from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _parse_value(cell: str, row: int, column: str) -> float:
    if cell.strip() == "":
        return math.nan
    try:
        return float(cell)
    except ValueError:
        raise CliError(f"row {row}: {column} = {cell!r} is not a number") from None


def load_csv(
    path: Path,
    *,
    value_col: str,
    time_col: str | None = None,
    gap_col: str | None = None,
    index_step_s: float | None = None,
    count: bool = False,
    step_s: float | None = None,
    time_unit: str | None = None,
) -> Series:
    """Read and resample a CSV load series (conventions in the module docstring). Raises ``CliError``."""
    if time_unit is not None and time_unit not in TIME_UNITS:
        raise CliError(f"--time-unit {time_unit!r}: use one of {', '.join(TIME_UNITS)}")
    if time_unit is not None and (time_col is None or index_step_s is not None):
        raise CliError("--time-unit applies to a numeric --time-col, not with --index-step or without one")
    numeric = True
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            columns = reader.fieldnames or []
            for col in (value_col, time_col, gap_col):
                if col is not None and col not in columns:
                    raise CliError(f"{path}: no column {col!r} (columns: {', '.join(columns) or 'none'})")
            times: list[float] = []
            vals: list[float] = []
            gaps: list[bool] = []
            for i, rec in enumerate(reader):
                row = i + 2  # 1-based, after the header line
                if time_col is None:
                    times.append(float(i))
                elif index_step_s is not None:
                    times.append(_parse_value(rec[time_col] or "", row, time_col))
                else:
                    cell = rec[time_col] or ""
                    value = _number(cell)
                    if value is None:
                        if time_unit is not None:
                            raise CliError(f"row {row}: --time-unit needs a numeric time, got {cell!r}")
                        numeric = False
                        value = _parse_time(cell, row)
                    times.append(value)
                vals.append(_parse_value(rec[value_col] or "", row, value_col))
                gaps.append(gap_col is not None and (rec[gap_col] or "").strip().lower() in _TRUE)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise CliError(f"cannot read {path}: {exc}") from None
    if time_col is None or index_step_s is not None:
        if index_step_s is None:
            raise CliError("without --time-col the rows are an index: give their spacing with --index-step")
        ts = np.asarray(times) * index_step_s
    else:
        ts = np.asarray(times)
        if time_unit is not None:
            ts = ts * TIME_UNITS[time_unit]
        elif numeric:
            _check_seconds(time_col, ts)
    if ts.size < 2:
        raise CliError(f"{path}: {ts.size} data rows; a backtest needs many more")
    if not np.all(np.isfinite(ts)):
        raise CliError(f"{path}: the time column has empty or non-finite cells")
    order = np.argsort(ts, kind="stable")
    ts = ts[order]
    values = np.asarray(vals)[order]
    gap = np.asarray(gaps)[order]
    spacing = native_spacing(ts)
    if count:
        values = values / spacing  # events per row -> events per second
    step = spacing if step_s is None else step_s
    try:
        grid, grid_values = resample_mean(ts, values, step, gap=gap)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    source = {
        "kind": "csv",
        "path": str(path),
        "time_col": time_col,
        "time_unit": time_unit or ("s" if time_col is not None and index_step_s is None else None),
        "index_step_s": index_step_s,
        "value_col": value_col,
        "gap_col": gap_col,
        "count": count,
        "native_spacing_s": spacing,
        "rows": int(ts.size),
    }
    return Series(timestamps=grid, values=grid_values, step_s=step, source=source)


def fetch_prometheus(
    url: str,
    query: str,
    *,
    since_s: float,
    step_s: float,
    end: float | None = None,
    client: httpx.Client | None = None,
    timeout_s: float = 30.0,
    backend: str = "prometheus",
    access: BackendAccess | None = None,
) -> Series:
    """One series from ``GET {url}/api/v1/query_range`` over ``[end - since, end]`` at ``step_s``.

    The grid is aligned to multiples of ``step_s``; evaluation steps with no sample are gaps. The query must
    return exactly one series (aggregate it, e.g. ``sum(rate(...))``). ``backend`` and ``access`` are the
    serve command's backend options (flavour parameters, TLS, credentials, headers); a partial answer is
    refused like the server refuses it. Raises ``CliError``.
    """
    end_ts = math.floor((time.time() if end is None else end) / step_s) * step_s
    start_ts = end_ts - math.floor(since_s / step_s) * step_s
    points = round((end_ts - start_ts) / step_s) + 1
    if points > _MAX_POINTS:
        raise CliError(f"--since/--step asks for {points} points; Prometheus answers at most {_MAX_POINTS}")
    params = {
        "query": query,
        "start": f"{start_ts:.3f}",
        "end": f"{end_ts:.3f}",
        "step": f"{step_s:g}",
        **flavour_params(backend),
    }
    access = access or BackendAccess()
    base = resolve_url(url, backend, access)
    endpoint = redact_url(base) + "/api/v1/query_range"
    own = client is None
    http = client if client is not None else sync_http(base, backend, access, timeout_s=timeout_s)
    try:
        response = http.get(base + "/api/v1/query_range", params=params)
        body = response.json()
    except httpx.HTTPError as exc:
        raise CliError(f"cannot query {endpoint}: {exc}") from None
    except ValueError:
        raise CliError(f"{endpoint} answered HTTP {response.status_code} with a body that is not JSON") from None
    finally:
        if own:
            http.close()
    if response.status_code != 200 or not isinstance(body, dict) or body.get("status") != "success":
        error = body.get("error", "") if isinstance(body, dict) else ""
        raise CliError(f"{endpoint} answered HTTP {response.status_code}: {error or response.text[:200]}")
    if body.get("isPartial") is True or body.get("warnings"):
        raise CliError(
            f"{endpoint} answered a partial result (isPartial / warnings: "
            f"{str(body.get('warnings', ''))[:200]}); not using it"
        )
    result = (body.get("data") or {}).get("result") or []
    if len(result) != 1:
        raise CliError(
            f"the query returned {len(result)} series; it must return exactly one (aggregate it, e.g. sum(...))"
        )
    grid = start_ts + step_s * np.arange(points)
    values = np.full(points, np.nan)
    for t, v in result[0].get("values", []):
        i = round((float(t) - start_ts) / step_s)
        if 0 <= i < points:
            values[i] = float(v)
    source = {"kind": "prometheus", "url": redact_url(url), "query": query, "since_s": since_s, "end_ts": end_ts}
    return Series(timestamps=grid, values=values, step_s=step_s, source=source)
