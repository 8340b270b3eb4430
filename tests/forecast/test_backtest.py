"""The rolling-origin backtest: output contract, baselines on the same points, figures checked independently."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adapter.forecast.backtest import run_backtest
from adapter.forecast.metrics import wape
from tests.forecast.synthetic import DAY_S, daily_cycle

STEP = 600.0
FIGURES = {"wape", "mape", "bias", "under_forecast_rate", "peak_recall"}


def _series(n: int = 200, seed: int = 5) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ts = 1_700_000_000.0 + STEP * np.arange(n)
    values = 1000.0 + np.cumsum(rng.normal(0.0, 20.0, n))
    return ts, values


def test_output_keys_and_baselines() -> None:
    ts, values = _series()
    r = run_backtest(values, ts, step_s=STEP, horizon_steps=3, model="ses")
    for key in (
        "model",
        "step_s",
        "horizon_s",
        "points_tested",
        "points_skipped",
        "fallbacks",
        "baselines",
        *FIGURES,
    ):
        assert key in r
    assert r["model"] == "ses"
    assert r["horizon_s"] == 1800.0
    assert set(r["baselines"]) == {"persistence", "seasonal_naive"}
    for b in r["baselines"].values():
        assert FIGURES <= set(b)
    assert r["points_tested"] == 100 and r["points_skipped"] == 0


def test_persistence_figures_match_an_independent_computation() -> None:
    ts, values = _series()
    h = 3
    r = run_backtest(values, ts, step_s=STEP, horizon_steps=h, model="persistence", train_fraction=0.5)
    targets = np.arange(100, 200)
    assert r["wape"] == pytest.approx(wape(values[targets], values[targets - h]))
    # The model under test and the persistence baseline are scored on the same points: identical figures.
    for key in FIGURES:
        assert r[key] == r["baselines"]["persistence"][key]


def test_seasonal_naive_baseline_uses_the_value_one_season_before_the_target() -> None:
    ts, values = _series()
    r = run_backtest(values, ts, step_s=STEP, horizon_steps=3, model="persistence", seasonal_period_s=5 * STEP)
    targets = np.arange(100, 200)
    assert r["baselines"]["seasonal_naive"]["wape"] == pytest.approx(wape(values[targets], values[targets - 5]))


def test_missing_targets_are_skipped_and_counted() -> None:
    ts, values = _series()
    values[150:155] = np.nan
    r = run_backtest(values, ts, step_s=STEP, horizon_steps=3, model="ar", include_points=True)
    assert r["points_skipped"] == 5 and r["skipped"] == {"nan_target": 5}
    assert r["points_tested"] == 95
    assert len(r["points"]["actual"]) == 95
    assert all(math.isfinite(x) for x in r["points"]["forecast"])
    # Targets 156 and 157 are forecast from origins 153 and 154, whose histories end in 4 and 5 missing points
    # (more than the 3 tolerated): those two fall back to persistence. Target 155 (3 missing) is forecast.
    assert r["fallbacks"] == {"stale_history": 2}


def test_fourier_ar_beats_persistence_on_a_strong_daily_cycle() -> None:
    ts = STEP * np.arange(8 * 144)
    values = daily_cycle(ts, noise=15.0, seed=2)
    r = run_backtest(values, ts, step_s=STEP, horizon_steps=3, model="fourier_ar")
    assert r["fallbacks"] == {}
    assert r["wape"] < r["baselines"]["persistence"]["wape"]
    assert r["baselines"]["seasonal_naive"]["wape"] < r["baselines"]["persistence"]["wape"]
    assert ts[-1] / DAY_S < 8


def test_auto_reports_its_choices_and_progress() -> None:
    ts, values = _series(160)
    calls: list[tuple[int, int]] = []
    r = run_backtest(
        values,
        ts,
        step_s=STEP,
        horizon_steps=3,
        model="auto",
        candidates=("persistence", "ses"),
        select_origins=12,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert r["candidates"] == ["persistence", "ses"]
    assert sum(r["selected"].values()) == r["points_tested"] == 80
    assert set(r["selected"]) <= {"persistence", "ses"}
    assert calls[-1] == (80, 80)
    assert [d for d, _ in calls] == list(range(1, 81))


def test_json_has_no_nan() -> None:
    ts = STEP * np.arange(100)
    values = np.full(100, 50.0)  # flat: no peak, so peak_recall is undefined -> null
    r = run_backtest(values, ts, step_s=STEP, horizon_steps=2, model="persistence")
    assert r["peak_recall"] is None
    assert r["wape"] == 0.0


def test_bad_input_is_rejected() -> None:
    ts, values = _series()
    with pytest.raises(ValueError, match="regular grid"):
        run_backtest(values, ts * 1.5, step_s=STEP, horizon_steps=3)
    with pytest.raises(ValueError, match="unknown forecast model"):
        run_backtest(values, ts, step_s=STEP, horizon_steps=3, model="nope")
    with pytest.raises(ValueError, match="train_fraction"):
        run_backtest(values, ts, step_s=STEP, horizon_steps=3, train_fraction=1.0)
    with pytest.raises(ValueError, match="no test point"):
        run_backtest(values[:3], ts[:3], step_s=STEP, horizon_steps=3)
