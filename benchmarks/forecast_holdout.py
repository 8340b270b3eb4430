"""The default forecast model, chosen on one week and held to persistence on data it was not chosen on.

Protocol (docs/forecasting.md "Why `ses_ar_margin`"): every candidate is backtested with
``adapter.forecast.backtest.run_backtest`` (the ``backtest`` command's engine: rolling origin, each fit sees only
the past, the first part of the series is history), 30 minutes ahead. The choice is made on **week 1** of the
shared ServeGen trace alone (days 1-6 scored, at its 10-minute step and held at 5-minute steps): among the
candidates with a lower WAPE *and* a lower under-forecast rate than persistence in both week-1 columns, the one
whose smallest improvement (relative to persistence's figure, over both metrics and both columns) is largest.
Nothing else is looked at to choose. The check: week 2 of the shared trace (days 7-13, with week 1 as history),
perturbed copies of the whole trace scored on week 2 (5-minute steps by linear interpolation, the 10-minute
series replayed twice as fast, 5 % and 15 % multiplicative noise, random level shifts, time reversed), and the
one-hour Azure LLM inference trace (code) per minute and per 30 and 15 seconds (3 and 6 minutes ahead: a one-hour
trace leaves no 30-minute test; first half history). Seeds fixed.

Usage: python benchmarks/forecast_holdout.py [--write-results]   (about five minutes on an idle core)
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import numpy as np
import results_page

from adapter.cli.series_input import load_csv
from adapter.forecast.backtest import run_backtest
from adapter.forecast.registry import DEFAULT_MODEL

TRACES = Path(__file__).resolve().parents[1] / "adapter" / "data" / "traces"
DAY = 144  # 10-minute windows per day
HORIZON_S = 1800.0

# Added after the checks had been seen (it targets the columns where the 55th percentile lost on under-forecast
# rate), so it takes no part in the choice and its check figures are not held-out evidence.
WIDENED = "`ses_ar_margin`, 55th, widened (`under_gap` 0.02)*"
# name -> (registry model, parameters). The quantile is where the earned margin starts (docs/forecasting.md).
CANDIDATES: dict[str, tuple[str, dict[str, Any]]] = {
    "`ses_ar_margin`, margin from the 60th percentile": ("ses_ar_margin", {"quantile": 0.6}),
    "`ses_ar_margin`, margin from the 55th percentile": ("ses_ar_margin", {"quantile": 0.55}),
    WIDENED: ("ses_ar_margin", {"quantile": 0.55, "under_gap": 0.02}),
    "`ses_ar_margin` without shrinkage or margin": ("ses_ar_margin", {"quantile": None}),
    "`ses`": ("ses", {}),
    "`ar_margin`": ("ar_margin", {}),
    "`ar`": ("ar", {}),
}


def _servegen() -> np.ndarray:
    s = load_csv(TRACES / "servegen_language_m_mid_10min.csv", time_col="window_start_s", value_col="rate_rps",
                 gap_col="gap")  # fmt: skip
    return np.asarray(s.values, dtype=np.float64)


def _azure(step_s: float) -> np.ndarray:
    """Requests/s of the Azure code trace on a ``step_s`` grid (from the per-minute or the per-second file)."""
    if step_s == 60.0:
        s = load_csv(TRACES / "azure_llm_2023_code_1min.csv", value_col="requests", index_step_s=60.0)
        return np.asarray(s.values, dtype=np.float64) / 60.0
    s = load_csv(TRACES / "azure_llm_2023_code_1s.csv", value_col="requests", index_step_s=1.0)
    v = np.asarray(s.values, dtype=np.float64)
    k = int(step_s)
    return v[: v.size // k * k].reshape(-1, k).sum(axis=1) / step_s


def _level_shifts(n: int, seed: int) -> np.ndarray:
    """A multiplicative level that jumps by a lognormal factor (sigma 0.2) every 6 to 36 hours."""
    rng = np.random.default_rng(seed)
    out, pos = np.ones(n), 0
    while pos < n:
        pos += int(rng.integers(36, 216))
        out[pos:] *= float(np.exp(rng.normal(0.0, 0.2)))
    return out


# label -> (series, step_s, horizon_steps, train_fraction)
Fold = tuple[np.ndarray, float, int, float]


def select_folds(v10: np.ndarray) -> dict[str, Fold]:
    week1 = v10[: 7 * DAY]
    return {
        "week 1, 10 min": (week1, 600.0, 3, 1 / 7),
        "week 1, 5 min": (np.repeat(week1, 2), 300.0, 6, 1 / 7),
    }


def check_folds(v10: np.ndarray) -> dict[str, Fold]:
    finite = np.where(np.isfinite(v10), v10, np.nan)
    interp = np.interp(np.arange(2 * v10.size) / 2.0, np.arange(v10.size), finite)
    return {
        "week 2, 10 min": (v10, 600.0, 3, 0.5),
        "week 2, 5 min": (np.repeat(v10, 2), 300.0, 6, 0.5),
        "5 min, interpolated": (interp, 300.0, 6, 0.5),
        "twice as fast": (v10, 300.0, 6, 0.5),
        "5 % noise": (v10 * (1 + 0.05 * np.random.default_rng(11).normal(size=v10.size)), 600.0, 3, 0.5),
        "15 % noise": (v10 * (1 + 0.15 * np.random.default_rng(12).normal(size=v10.size)), 600.0, 3, 0.5),
        "level shifts": (v10 * _level_shifts(v10.size, 13), 600.0, 3, 0.5),
        "reversed": (v10[::-1].copy(), 600.0, 3, 0.5),
        "Azure, 1 min, 3 min ahead": (_azure(60.0), 60.0, 3, 0.5),
        "Azure, 30 s, 3 min ahead": (_azure(30.0), 30.0, 6, 0.5),
        "Azure, 15 s, 3 min ahead": (_azure(15.0), 15.0, 12, 0.5),
    }


def _score(fold: Fold, model: str, params: dict[str, Any]) -> tuple[float, float, float, float]:
    """(WAPE, under-forecast rate, persistence's WAPE, persistence's under-forecast rate) on ``fold``."""
    values, step, h, frac = fold
    p = dict(params)
    if model in ("ses", "ses_ar_margin"):
        p["horizon_s"] = h * step  # tuned at the horizon scored, as the adapter serves it
    r = run_backtest(values, step * np.arange(values.size), step_s=step, horizon_steps=h, model=model,
                     train_fraction=frac, history_points=120, params=p)  # fmt: skip
    base = r["baselines"]["persistence"]
    return r["wape"], r["under_forecast_rate"], base["wape"], base["under_forecast_rate"]


def _cell(s: tuple[float, float, float, float]) -> str:
    w, u, bw, bu = s
    text = f"{100 * w:.2f} / {100 * u:.1f} %"
    return f"**{text}**" if w < bw and u < bu else text


def _table(title: str, folds: dict[str, Fold], scores: dict[str, dict[str, tuple[float, ...]]]) -> None:
    print(f"\n**{title}**: WAPE / under-forecast rate; bold: lower than persistence on both\n")
    print("| model | " + " | ".join(folds) + " |")
    print("|---|" + "---:|" * len(folds))
    first = next(iter(scores.values()))
    base = [f"{100 * first[f][2]:.2f} / {100 * first[f][3]:.1f} %" for f in folds]
    print("| persistence (baseline) | " + " | ".join(base) + " |")
    for name, row in scores.items():
        print(f"| {name} | " + " | ".join(_cell(row[f]) for f in folds) + " |")  # type: ignore[arg-type]


def worst_gain(row: dict[str, tuple[float, ...]]) -> float:
    """The smallest improvement over persistence, relative to persistence's figure, over both metrics and every
    fold of ``row`` (negative: it loses somewhere)."""
    return min(min((bw - w) / bw, (bu - u) / bu) for w, u, bw, bu in row.values())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results_page.add_arguments(parser)
    args = parser.parse_args(argv)
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    command = results_page.command_line(__file__, sys.argv[1:] if argv is None else argv)
    with results_page.recording("forecast_holdout", args.write_results, command, args.results_file):
        _report()
    return 0


def _report() -> None:
    v10 = _servegen()
    chosen_by: dict[str, dict[str, dict[str, tuple[float, ...]]]] = {}
    for stage, folds in (("select", select_folds(v10)), ("check", check_folds(v10))):
        scores: dict[str, dict[str, tuple[float, ...]]] = {}
        for name, (model, params) in CANDIDATES.items():
            t0 = time.perf_counter()
            scores[name] = {label: _score(fold, model, params) for label, fold in folds.items()}
            print(f"  {stage}: {name} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        chosen_by[stage] = scores
        _table("Chosen on" if stage == "select" else "Checked on", folds, scores)
    gains = {name: worst_gain(row) for name, row in chosen_by["select"].items() if name != WIDENED}
    choice = max(gains, key=lambda n: gains[n])
    wins = sum(w < bw and u < bu for w, u, bw, bu in chosen_by["check"][choice].values())
    verdict = (
        f"Chosen on week 1 (largest smallest relative gain, {100 * gains[choice]:+.1f} %): {choice}. "
        f"On the checks it beats persistence on both metrics in {wins} of {len(chosen_by['check'][choice])} columns. "
        f"The catalog's default model: `{DEFAULT_MODEL}`."
    )
    print("\n" + "\n".join(textwrap.wrap(verdict, width=116, break_on_hyphens=False)))
    print("\n* added after the checks had been seen: not a candidate of the choice, and its check figures are not")
    print("held-out evidence.")


if __name__ == "__main__":
    raise SystemExit(main())
