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
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adapter.cli.series_input import TIME_UNITS, CliError, Series, fetch_prometheus, load_csv, parse_duration
from adapter.forecast.backtest import run_backtest
from adapter.forecast.base import ForecastError
from adapter.forecast.registry import AUTO, DEFAULT_MODEL, MODELS
from adapter.query.backend import access_from_args, add_backend_arguments, check_access

_DEFAULT_PROMETHEUS_STEP_S = 300.0


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
