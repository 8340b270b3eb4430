"""What one forecast refit costs, per model, and how many workloads one core can refit per step.

Histories are real load: the vendored ServeGen trace (per-minute file, ``requests`` per minute turned into a
rate) resampled to the adapter's default 5-minute step; each sample is a window ending at a random point,
as long as the model asks for (``history_points(step, 120)``: 120 points = 10 h for level models, 3 days
for ``fourier_ar``, one day for ``seasonal_naive``). One fit + ``forecast(6)`` (30 min) is timed per window,
single-threaded, after a warm-up (statsmodels' cold import is not counted). ``auto`` is the whole
per-step selection (``select_model`` with its default candidates and origins) plus the winner's fit.

Usage: OPENBLAS_NUM_THREADS=1 python benchmarks/forecast_cost.py [--samples 300] [--seed 1] [--write-results]
(the variable keeps statsmodels' linear algebra on one core, as a per-core figure assumes)
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import results_page

from adapter.cli.series_input import load_csv
from adapter.forecast.base import ForecastError
from adapter.forecast.registry import DEFAULT_MODEL, MODELS, get_model
from adapter.forecast.select import DEFAULT_CANDIDATES, DEFAULT_SELECT_ORIGINS, select_model
from adapter.sim.trace import default_trace_1min_path

TRACE = default_trace_1min_path()
STEP_S = 300.0
HORIZON = 6
HISTORY = 120
STEP_BUDGET_S = 300.0  # one refit per workload per 5-minute step


def _series(path: Path) -> np.ndarray:
    s = load_csv(
        path,
        time_col="minute_index",
        value_col="requests",
        gap_col="gap",
        index_step_s=60.0,
        count=True,
        step_s=STEP_S,
    )
    return s.values


def _time_model(name: str, series: np.ndarray, ends: np.ndarray) -> tuple[list[float], int]:
    model = get_model(name)
    lookback = model.history_points(STEP_S, HISTORY)
    costs: list[float] = []
    failures = 0
    for end in ends:
        window = series[end - lookback + 1 : end + 1]
        t0 = time.perf_counter()
        try:
            model.fit(window, step_s=STEP_S, start_ts=(end - lookback + 1) * STEP_S).forecast(HORIZON)
        except ForecastError:
            failures += 1
        costs.append(time.perf_counter() - t0)
    return costs, failures


def _time_auto(series: np.ndarray, ends: np.ndarray) -> tuple[list[float], int]:
    lookback = max(get_model(c).history_points(STEP_S, HISTORY) for c in DEFAULT_CANDIDATES)
    need = lookback + DEFAULT_SELECT_ORIGINS + HORIZON
    costs: list[float] = []
    failures = 0
    for end in ends:
        window = series[end - need + 1 : end + 1]
        start_ts = (end - need + 1) * STEP_S
        t0 = time.perf_counter()
        try:
            chosen = select_model(window, step_s=STEP_S, start_ts=start_ts, horizon_steps=HORIZON)
            model = get_model(chosen.name)
            lb = model.history_points(STEP_S, HISTORY)
            model.fit(window[-lb:], step_s=STEP_S, start_ts=start_ts + (need - lb) * STEP_S).forecast(HORIZON)
        except ForecastError:
            failures += 1
        costs.append(time.perf_counter() - t0)
    return costs, failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=300, help="windows timed per model (default 300)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--trace", type=Path, default=TRACE)
    results_page.add_arguments(parser)
    args = parser.parse_args(argv)
    env = [f"{k}={os.environ[k]}" for k in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS") if k in os.environ]
    print("command: " + shlex.join([*env, Path(sys.executable).name, *sys.argv]))
    rerun = results_page.command_line(__file__, sys.argv[1:] if argv is None else argv)
    command = " ".join([*env, rerun])
    with results_page.recording("forecast_cost", args.write_results, command, args.results_file):
        _report(args)
    return 0


def _report(args: argparse.Namespace) -> None:
    """Time every model and print the table."""
    series = _series(args.trace)
    rng = np.random.default_rng(args.seed)
    # Room for the hungriest lookback (auto: fourier_ar's 3 days plus the selection origins).
    first = 3 * 288 + DEFAULT_SELECT_ORIGINS + HORIZON + 1
    ends = rng.integers(first, series.size, size=args.samples)
    get_model("arima").fit(series[:HISTORY], step_s=STEP_S, start_ts=0.0)  # warm-up: statsmodels import
    print(
        f"\n{series.size} points at {STEP_S / 60:g} min; {args.samples} random windows per model; "
        f"forecast {HORIZON} steps; one core, one thread\n"
    )
    print("| model | history points | median ms | p99 ms | mean ms | workloads / core / 5-min step | fit failures |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = [
        (name, *_time_model(name, series, ends), get_model(name).history_points(STEP_S, HISTORY)) for name in MODELS
    ]
    auto_costs, auto_fail = _time_auto(series, ends)
    rows.append(("auto", auto_costs, auto_fail, -1))
    for name, costs, failures, lookback in rows:
        ms = np.asarray(costs) * 1000.0
        per_step = STEP_BUDGET_S / (float(ms.mean()) / 1000.0)
        label = f"{name} (default)" if name == DEFAULT_MODEL else name
        hp = "per candidate" if lookback < 0 else str(lookback)
        print(
            f"| {label} | {hp} | {np.median(ms):.3f} | {np.percentile(ms, 99):.3f} | {ms.mean():.3f} | "
            f"{per_step:,.0f} | {failures} |"
        )


if __name__ == "__main__":
    raise SystemExit(main())
