"""Per-workload model selection (``auto``)."""

from __future__ import annotations

import numpy as np
import pytest

from adapter.forecast.base import ForecastError
from adapter.forecast.select import choose, score_candidates, select_model
from tests.forecast.synthetic import noisy_ramp

STEP = 300.0


def test_asymmetric_score_prefers_over_forecasting() -> None:
    actual = np.full((4, 3), 100.0)
    forecasts = {"low": np.full((4, 3), 90.0), "high": np.full((4, 3), 120.0)}
    # Plain WAPE would pick "low" (10 < 20); under-forecasting weighs 3x, so 30 > 20 and "high" wins.
    scores = score_candidates(actual, forecasts)
    assert scores == pytest.approx({"low": 0.3, "high": 0.2})
    assert choose(scores, ["low", "high"]) == "high"
    symmetric = score_candidates(actual, forecasts, under_weight=1.0)
    assert choose(symmetric, ["low", "high"]) == "low"


def test_choose_breaks_ties_and_nan_towards_the_first() -> None:
    assert choose({"a": 0.1, "b": 0.1}, ["a", "b"]) == "a"
    assert choose({"a": float("nan"), "b": 0.2}, ["a", "b"]) == "b"
    assert choose({"a": float("nan"), "b": float("nan")}, ["a", "b"]) == "a"


def test_on_a_ramp_persistence_loses() -> None:
    values = noisy_ramp(200, slope=3.0)
    sel = select_model(
        values,
        step_s=STEP,
        start_ts=0.0,
        horizon_steps=6,
        candidates=("persistence", "ses", "ar"),
        params={"ar": {"drift": True}},
        origins=24,
    )
    assert set(sel.scores) == {"persistence", "ses", "ar"}
    assert sel.name != "persistence"
    assert sel.scores[sel.name] == min(sel.scores.values())
    assert sel.origins == 24


def test_failing_candidates_are_scored_as_persistence() -> None:
    values = noisy_ramp(200)
    # 200 x 5 min is less than a day: fourier_ar can never fit, so it scores exactly like persistence.
    sel = select_model(
        values,
        step_s=STEP,
        start_ts=0.0,
        horizon_steps=6,
        candidates=("persistence", "fourier_ar"),
        origins=12,
    )
    assert sel.failures == {"persistence": 0, "fourier_ar": 12}
    assert sel.scores["fourier_ar"] == sel.scores["persistence"]
    assert sel.name == "persistence"


def test_too_little_data_is_insufficient_history() -> None:
    with pytest.raises(ForecastError) as info:
        select_model(np.full(5, np.nan), step_s=STEP, start_ts=0.0, horizon_steps=6)
    assert info.value.reason == "insufficient_history"
    with pytest.raises(ValueError):
        select_model(noisy_ramp(100), step_s=STEP, start_ts=0.0, horizon_steps=6, candidates=())
