"""The boost factor and its degrade reasons."""

from __future__ import annotations

import numpy as np
import pytest

from adapter.forecast.boost import boost_factor, boosted


def test_boost_is_peak_over_current() -> None:
    assert boost_factor(100.0, np.array([110.0, 150.0, 120.0])) == (1.5, "ok")


def test_boost_is_clamped_between_one_and_max() -> None:
    assert boost_factor(100.0, np.array([80.0, 90.0])) == (1.0, "ok")  # falling load never lowers the metric
    assert boost_factor(100.0, np.array([1000.0])) == (3.0, "ok")
    assert boost_factor(100.0, np.array([1000.0]), max_boost=2.0) == (2.0, "ok")


@pytest.mark.parametrize(
    ("current", "forecast", "reason"),
    [
        (100.0, None, "no_forecast"),
        (100.0, np.array([]), "no_forecast"),
        (float("nan"), np.array([150.0]), "current_not_finite"),
        (0.0, np.array([150.0]), "current_not_positive"),
        (-3.0, np.array([150.0]), "current_not_positive"),
        (100.0, np.array([150.0, np.nan]), "non_finite"),
        (100.0, np.array([np.inf]), "non_finite"),
    ],
)
def test_every_doubt_degrades_to_exactly_one(current: float, forecast: np.ndarray | None, reason: str) -> None:
    assert boost_factor(current, forecast) == (1.0, reason)


def test_bad_max_boost_is_a_settings_error() -> None:
    with pytest.raises(ValueError):
        boost_factor(100.0, np.array([150.0]), max_boost=0.5)
    with pytest.raises(ValueError):
        boost_factor(100.0, np.array([150.0]), max_boost=float("inf"))


def test_boosted() -> None:
    assert boosted(40.0, 1.5) == 60.0
    assert boosted(40.0, 1.0) == 40.0
    assert boosted(40.0, 0.5) == 40.0  # never lowers
    assert boosted(40.0, float("nan")) == 40.0
