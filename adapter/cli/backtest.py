"""``backtest``: how well would the forecast have done on your own load history?

Reads a load series from a CSV file or from Prometheus / VictoriaMetrics (``/api/v1/query_range``), puts it on
a regular grid, runs ``adapter.forecast.backtest.run_backtest`` and writes the figures (and the per-point
forecasts) as JSON, optionally with a PNG of forecast vs actual. Every user error (missing column, unreadable
file, too few points, unreachable server) is one line on stderr and exit code 2, never a traceback.

CSV conventions:

- ``--time-col``: a number of seconds (e.g. unix time or the shared trace's ``window_start_s``), or an
  ISO-8601 timestamp (no zone = UTC). ``--time-unit s|ms|min|h`` gives a numeric column another unit (the
  shared 1-minute trace's ``minute_index`` is ``--time-unit min``). With ``--index-step`` the column is a
  plain index (0, 1, 2, ...) spaced that far apart; without ``--time-col`` the row number is that index.
  A numeric column is never guessed: without a unit, one whose name says another unit (``minute``,
  ``hour``, ``index``, ``ms``...) or that counts 0, 1, 2... below unix-time values is refused with an error
  naming the options, instead of being read as seconds (59 s of a 59-minute trace).
- ``--value-col``: the load; an empty cell is missing data. ``--count`` says the column counts events per
  row (e.g. ``requests`` per 10-minute window): it is divided by the rows' spacing to become a rate per
  second before resampling.
- ``--gap-col``: rows where it is 1/true are collection gaps (missing data, not zero load).
- ``--step`` (default: the data's own spacing): rows are averaged per step bin; a bin with no data or with a
  gap becomes a gap. A step finer than the data is refused.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from adapter.catalog import duration_seconds
from adapter.forecast.backtest import run_backtest
from adapter.forecast.base import ForecastError
from adapter.forecast.registry import AUTO, DEFAULT_MODEL, MODELS
from adapter.forecast.series import native_spacing, resample_mean
from adapter.query.backend import (
    BackendAccess,
    access_from_args,
    add_backend_arguments,
    check_access,
    flavour_params,
    redact_url,
    resolve_url,
    sync_http,
)

_TRUE = {"1", "true", "yes", "y", "t"}
# Prometheus refuses range queries of more than 11,000 points per series
# (prometheus/prometheus web/api/v1/api.go: "exceeded maximum resolution of 11,000 points per timeseries").
_MAX_POINTS = 11_000
_DEFAULT_PROMETHEUS_STEP_S = 300.0


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


def _parse_params(items: Sequence[str]) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise CliError(f"--param {item!r}: expected KEY=VALUE")
        try:
            params[key] = json.loads(raw)
        except json.JSONDecodeError:
            params[key] = raw
        if isinstance(params[key], list):
            params[key] = tuple(params[key])
    return params


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``backtest`` subcommand (``set_defaults(func=run)``)."""
    p = subparsers.add_parser(
        "backtest",
        help="score a forecast model on a load history (CSV or Prometheus) against persistence/seasonal-naive",
        description="How well would the load forecast have done on your own history? Scores a model (or auto) "
        "by a rolling-origin backtest against persistence and seasonal-naive and writes the figures as JSON.",
    )
    src = p.add_argument_group("source: a CSV file")
    src.add_argument("--trace", type=Path, help="CSV file with the load series")
    src.add_argument("--time-col", help="time column: unix seconds or ISO-8601 (or an index, with --index-step)")
    src.add_argument("--value-col", default="value", help="load column (default: value)")
    src.add_argument("--gap-col", help="column that is 1 in collection gaps")
    src.add_argument("--index-step", help="spacing of an index time column (or of the rows), e.g. 10m")
    src.add_argument("--time-unit", choices=sorted(TIME_UNITS), help="unit of a numeric --time-col (default s)")
    src.add_argument("--count", action="store_true", help="the value column counts events per row: make it a rate")
    add_backend_arguments(p, required_url=False, query_timeout_default=30.0)
    prom = p.add_argument_group("source: Prometheus / VictoriaMetrics (with --prometheus-url)")
    prom.add_argument("--query", help="PromQL returning one series, e.g. sum(rate(vllm:request_success_total[5m]))")
    prom.add_argument("--since", default="3d", help="how much history to pull (default 3d)")
    p.add_argument("--step", help="grid step, e.g. 5m (default: the CSV's spacing; 5m for Prometheus)")
    p.add_argument("--horizon", default="30m", help="forecast horizon, a whole number of steps (default 30m)")
    p.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"{', '.join(sorted(MODELS))} or auto (default {DEFAULT_MODEL})",
    )
    p.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="model parameter as JSON, e.g. quantile=0.55 (for auto: NAME={...} per candidate)",
    )
    p.add_argument("--train-fraction", type=float, default=0.5, help="share of the series used as history only")
    p.add_argument("--history", type=int, default=120, help="points each fit sees (default 120)")
    p.add_argument("--json", required=True, type=Path, help="write the figures here")
    p.add_argument("--plot", type=Path, help="also write a PNG of forecast vs actual over the test period")
    p.set_defaults(func=run)


def _load(args: argparse.Namespace) -> Series:
    step = parse_duration(args.step) if args.step else None
    if args.trace is not None and args.prometheus_url:
        raise CliError("give either --trace or --prometheus-url, not both")
    if args.trace is not None:
        index_step = parse_duration(args.index_step) if args.index_step else None
        return load_csv(
            args.trace,
            value_col=args.value_col,
            time_col=args.time_col,
            gap_col=args.gap_col,
            index_step_s=index_step,
            count=args.count,
            step_s=step,
            time_unit=args.time_unit,
        )
    if args.prometheus_url:
        if not args.query:
            raise CliError("--prometheus-url needs --query")
        access = access_from_args(args)
        return fetch_prometheus(
            check_access(args.prometheus_url, args.backend, access),
            args.query,
            since_s=parse_duration(args.since),
            step_s=step or _DEFAULT_PROMETHEUS_STEP_S,
            timeout_s=args.query_timeout,
            backend=args.backend,
            access=access,
        )
    raise CliError("no data: give --trace FILE.csv or --prometheus-url URL --query PROMQL")


def _horizon_steps(horizon_s: float, step_s: float) -> int:
    steps = horizon_s / step_s
    if steps < 1 - 1e-9 or abs(steps - round(steps)) > 1e-6:
        raise CliError(f"--horizon {horizon_s:g} s is not a whole number (>= 1) of steps of {step_s:g} s")
    return round(steps)


def _with_progress(work: Callable[[Callable[[int, int], None]], dict[str, Any]]) -> dict[str, Any]:
    """Run ``work(progress)`` under a rich progress bar on stderr (a no-op bar when stderr is not a TTY)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(stderr=True)
    with Progress(
        TextColumn("backtest"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        disable=not console.is_terminal,
    ) as bar:
        task = bar.add_task("backtest", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        return work(progress)


def write_plot(result: dict[str, Any], path: Path) -> None:
    """PNG of actual vs the model's and persistence's forecasts over the test period (matplotlib, Agg)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pts = result["points"]
    ts = np.asarray(pts["timestamp"], dtype=np.float64)
    step_s = float(result["step_s"])
    # Back onto the full grid, NaN where a point was skipped, so lines break at gaps instead of bridging them.
    slot = np.rint((ts - ts[0]) / step_s).astype(np.int64) if ts.size else np.zeros(0, dtype=np.int64)
    size = int(slot[-1]) + 1 if slot.size else 0
    hours = np.arange(size) * step_s / 3600.0

    def on_grid(key: str) -> np.ndarray:
        full = np.full(size, np.nan)
        full[slot] = np.asarray(pts[key], dtype=np.float64)
        return full

    fig, ax = plt.subplots(figsize=(12, 4.5))
    ax.plot(hours, on_grid("actual"), color="black", linewidth=1.0, label="actual")
    ax.plot(hours, on_grid("persistence"), color="grey", linewidth=0.8, linestyle="--", label="persistence")
    ax.plot(hours, on_grid("forecast"), color="tab:blue", linewidth=1.0, label=f"{result['model']} forecast")

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.1f}%"

    ax.set_title(
        f"{result['model']}: WAPE {pct(result['wape'])} "
        f"(persistence {pct(result['baselines']['persistence']['wape'])}),"
        f" horizon {result['horizon_s'] / 60:g} min"
    )
    ax.set_xlabel("hours since the start of the test period")
    ax.set_ylabel("load")
    ax.legend(loc="upper left")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


def run(args: argparse.Namespace) -> int:
    """Run the backtest command: 0 on success, 2 (one line on stderr) on any user error."""
    try:
        series = _load(args)
        horizon_steps = _horizon_steps(parse_duration(args.horizon), series.step_s)
        if args.model != AUTO and args.model not in MODELS:
            raise CliError(f"unknown --model {args.model!r}; known: {', '.join(sorted(MODELS))}, auto")
        params = _parse_params(args.param)
        finite = int(np.count_nonzero(np.isfinite(series.values)))
        if finite < 2 * horizon_steps + 30:
            raise CliError(f"only {finite} usable points after resampling; a backtest needs many more")

        def work(progress: Callable[[int, int], None]) -> dict[str, Any]:
            return run_backtest(
                series.values,
                series.timestamps,
                step_s=series.step_s,
                horizon_steps=horizon_steps,
                model=args.model,
                train_fraction=args.train_fraction,
                history_points=args.history,
                progress=progress,
                params=params,
                include_points=True,
            )

        result = _with_progress(work)
        result["source"] = series.source
        if result["points_tested"] == 0:
            raise CliError("no test point had data: nothing to score")
        try:
            args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            if args.plot is not None:
                write_plot(result, args.plot)
        except OSError as exc:
            raise CliError(f"cannot write output: {exc}") from None
    except (CliError, ValueError, ForecastError) as exc:
        print(f"backtest: error: {exc}", file=sys.stderr)
        return 2
    _print_summary(result)
    return 0


def _print_summary(result: dict[str, Any]) -> None:
    def fmt(x: float | None) -> str:
        return "  n/a" if x is None else f"{100 * x:5.1f}%"

    rows = [(result["model"], result)] + [(f"{b} (baseline)", v) for b, v in result["baselines"].items()]
    print(
        f"{result['points_tested']} points tested ({result['points_skipped']} skipped), "
        f"horizon {result['horizon_s'] / 60:g} min, step {result['step_s'] / 60:g} min"
    )
    print(f"{'model':28s} {'WAPE':>6s} {'under':>6s} {'peaks':>6s}")
    for name, r in rows:
        print(f"{name:28s} {fmt(r['wape'])} {fmt(r['under_forecast_rate'])} {fmt(r['peak_recall'])}")
