"""The boost factor and its degrade reasons."""

from __future__ import annotations

import numpy as np
import pytest

from adapter.forecast.boost import DEFAULT_MAX_BOOST, MIN_RISE_PAIRS, boost_factor, rise_quantile


def test_boost_is_peak_over_current() -> None:
    assert boost_factor(100.0, np.array([110.0, 150.0, 120.0]), max_boost=3.0) == (1.5, "ok")


def test_boost_is_clamped_between_one_and_max() -> None:
    assert boost_factor(100.0, np.array([80.0, 90.0])) == (1.0, "ok")  # falling load never lowers the metric
    assert boost_factor(100.0, np.array([1000.0])) == (DEFAULT_MAX_BOOST, "ok")
    assert boost_factor(100.0, np.array([1000.0]), max_boost=2.0) == (2.0, "ok")
    assert boost_factor(100.0, np.array([1000.0]), max_boost=3.0) == (3.0, "ok")


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


def test_rise_quantile_is_the_quantile_of_the_peak_ahead_over_now() -> None:
    # Rises to the peak of the next 2 points: 100 -> max(100, 150) = +50 %, 100 -> max(150, 100) = +50 %,
    # 150 -> max(100, 100) = 0 (a fall is no rise), then flat: 0.
    history = np.array([100.0, 100.0, 150.0, 100.0, *([100.0] * 12)])
    rises = [0.5, 0.5, 0.0] + [0.0] * 11
    assert rise_quantile(history, 2, 1.0) == pytest.approx(0.5)
    assert rise_quantile(history, 2, 0.75) == pytest.approx(max(float(np.quantile(rises, 0.75)), 0.0))
    assert rise_quantile(history, 2, 0.5) == 0.0
    # A one-step lead sees only the 100 -> 150 step.
    assert rise_quantile(history, 1, 1.0) == pytest.approx(0.5)


def test_rise_quantile_skips_gaps_and_non_positive_origins_and_needs_enough_pairs() -> None:
    history = np.array([100.0, 200.0] * 8)  # +100 % from every 100, -50 % from every 200
    assert rise_quantile(history, 1, 1.0) == pytest.approx(1.0)
    gappy = history.copy()
    gappy[1::2] = np.nan  # every rise window holds a gap: nothing left
    assert rise_quantile(gappy, 1, 1.0) is None
    longer = np.array([100.0, 200.0] * 12)
    zeros = np.where(longer == 100.0, 0.0, longer)  # no load at the origin: a ratio means nothing
    assert rise_quantile(zeros, 1, 1.0) == 0.0  # only the falls from 200 remain, floored at 0
    assert rise_quantile(history[: MIN_RISE_PAIRS + 1], 1, 1.0) is not None
    assert rise_quantile(history[:MIN_RISE_PAIRS], 1, 1.0) is None
    with pytest.raises(ValueError):
        rise_quantile(history, 0, 0.5)
    with pytest.raises(ValueError):
        rise_quantile(history, 1, 1.5)


def test_rise_is_a_floor_under_an_ok_boost_only() -> None:
    assert boost_factor(100.0, np.array([110.0]), 3.0, rise=0.3) == (pytest.approx(1.3), "ok")
    assert boost_factor(100.0, np.array([150.0]), 3.0, rise=0.3) == (1.5, "ok")  # the forecast peak is higher
    assert boost_factor(100.0, np.array([110.0]), 3.0, rise=5.0) == (3.0, "ok")  # still clamped at max_boost
    assert boost_factor(100.0, np.array([110.0]), rise=5.0) == (DEFAULT_MAX_BOOST, "ok")  # the default bound
    assert boost_factor(100.0, None, rise=0.3) == (1.0, "no_forecast")  # a doubt still degrades to exactly 1
    assert boost_factor(100.0, np.array([110.0]), rise=float("nan")) == (pytest.approx(1.1), "ok")
