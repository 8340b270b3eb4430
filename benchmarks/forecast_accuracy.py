"""Forecast accuracy of every model on the vendored 14-day ServeGen LLM trace, against persistence and seasonal-naive.

The trace's native 10-minute step is kept; the first half is history only, the second half (days 7-13) is
the test period; the horizon is 3 steps = 30 min (the time a new LLM pod needs, with margin); each fit sees
``--history`` points (default 120 = 20 h at this step; seasonal models take their own days). Every row comes
from ``adapter.forecast.backtest.run_backtest`` (the ``backtest`` command's engine), so all models are
scored on exactly the same points. Prints a markdown table.

Usage: python benchmarks/forecast_accuracy.py [--history 120] [--train-fraction 0.5] [--skip-arima]
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from adapter.cli.backtest import load_csv
from adapter.forecast.backtest import run_backtest
from adapter.forecast.metrics import mape, under_forecast_rate, wape
from adapter.forecast.registry import AUTO, DEFAULT_MODEL, MODELS
from adapter.sim.trace import default_trace_path

TRACE = default_trace_path()
HORIZON_STEPS = 3

# Model variants worth a row besides each model's defaults: the margin of ``ses`` switched off / at the median.
VARIANTS: list[tuple[str, dict[str, Any]]] = [
    ("ses", {"quantile": None}),
    ("ses", {"quantile": 0.5}),
    ("ar", {"drift": True}),
]


# The trace README: windows next to collection gaps are often partial (down to ~1 req/s); treat values below
# ~20 % of the median as suspect. They dominate MAPE, so the second table leaves those test points out.
SUSPECT_FRACTION = 0.2


def _pct(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{100 * x:.{digits}f} %"


def _signed(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:+.1f} %"


def _row(label: str, r: dict[str, Any], extra: str = "") -> str:
    return (
        f"| {label} | {_pct(r['wape'], 2)} | {_pct(r['mape'])} | {_signed(r['bias'])} | "
        f"{_pct(r['under_forecast_rate'])} | {_pct(r['peak_recall'])} | {extra} |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--history", type=int, default=120)
    parser.add_argument("--train-fraction", type=float, default=0.5)
    parser.add_argument("--skip-arima", action="store_true", help="leave out ARIMA (about a minute of fits)")
    args = parser.parse_args(argv)
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    print(
        "same engine, one model from the CLI: python -m adapter backtest --trace "
        f"{args.trace} --time-col window_start_s --value-col rate_rps --gap-col gap --horizon 30m "
        f"--history {args.history} --train-fraction {args.train_fraction} --model {DEFAULT_MODEL} --json out.json"
    )
    series = load_csv(args.trace, time_col="window_start_s", value_col="rate_rps", gap_col="gap")
    runs: list[tuple[str, dict[str, Any]]] = [
        (m, {}) for m in MODELS if not (args.skip_arima and m == "arima")
    ]
    runs += VARIANTS + [(AUTO, {})]
    results: list[tuple[str, dict[str, Any], float]] = []
    for name, params in runs:
        t0 = time.perf_counter()
        r = run_backtest(
            series.values,
            series.timestamps,
            step_s=series.step_s,
            horizon_steps=HORIZON_STEPS,
            model=name,
            params=params,
            train_fraction=args.train_fraction,
            history_points=args.history,
            include_points=True,
        )
        results.append((name, r, time.perf_counter() - t0))
        print(f"  ran {name} {params or ''} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    first = results[0][1]
    print(
        f"\n{first['points_tested']} test points ({first['points_skipped']} skipped: {first['skipped']}), "
        f"step {series.step_s / 60:g} min, horizon {first['horizon_s'] / 60:g} min, history {args.history} "
        f"points, train fraction {args.train_fraction}\n"
    )
    print("| model | WAPE | MAPE | bias | under-forecast rate | peak recall | notes |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for name, r, seconds in results:
        params = r["params"]
        label = name + (" " + ", ".join(f"{k}={v}" for k, v in params.items()) if params else "")
        if name == DEFAULT_MODEL and not params:
            label += " (default)"
        notes = []
        if r["fallbacks"]:
            notes.append("fallbacks " + ", ".join(f"{k} {v}" for k, v in sorted(r["fallbacks"].items())))
        if name == AUTO:
            notes.append("chosen " + ", ".join(f"{k} {v}" for k, v in sorted(r["selected"].items())))
        notes.append(f"{seconds:.1f} s")
        print(_row(label, r, "; ".join(notes)))
    for b, r in first["baselines"].items():
        fb = ", ".join(f"{k} {v}" for k, v in sorted(r["fallbacks"].items()))
        print(_row(f"baseline: {b}", r, f"fallbacks {fb}" if fb else ""))
    actual = np.asarray(first["points"]["actual"])
    keep = actual >= SUSPECT_FRACTION * np.nanmedian(series.values)
    print(
        f"\nWithout the {int((~keep).sum())} suspect test points (actual < {SUSPECT_FRACTION:.0%} of the median: "
        "partial windows at collection gaps):\n"
    )
    print("| model | WAPE | MAPE | under-forecast rate |")
    print("|---|---:|---:|---:|")
    table = [
        (name + (" " + str(r["params"]) if r["params"] else ""), r["points"]["forecast"])
        for name, r, _ in results
    ]
    table += [(f"baseline: {b}", first["points"][b]) for b in first["baselines"]]
    for label, forecast in table:
        a, f = actual[keep], np.asarray(forecast)[keep]
        print(f"| {label} | {_pct(wape(a, f), 2)} | {_pct(mape(a, f))} | {_pct(under_forecast_rate(a, f))} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
