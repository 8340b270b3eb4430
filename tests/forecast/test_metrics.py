"""Accuracy figures on small series computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adapter.forecast.metrics import (
    asymmetric_wape,
    bias,
    mape,
    peak_recall,
    summary,
    under_forecast_rate,
    wape,
)

ACTUAL = np.array([100.0, 200.0, np.nan, 400.0])
FORECAST = np.array([110.0, 150.0, 999.0, 400.0])  # the 999 sits on a missing actual: ignored


def test_wape_by_hand() -> None:
    assert wape(ACTUAL, FORECAST) == pytest.approx((10 + 50 + 0) / (100 + 200 + 400))


def test_mape_by_hand_skips_zero_actuals() -> None:
    assert mape(ACTUAL, FORECAST) == pytest.approx((0.10 + 0.25 + 0.0) / 3)
    assert mape(np.array([0.0, 50.0]), np.array([7.0, 60.0])) == pytest.approx(0.2)
    assert math.isnan(mape(np.array([0.0, 0.0]), np.array([1.0, 2.0])))


def test_bias_by_hand() -> None:
    # mean(f - a) = (10 - 50 + 0) / 3; mean(a) = 700 / 3
    assert bias(ACTUAL, FORECAST) == pytest.approx(-40 / 700)


def test_under_forecast_rate_by_hand() -> None:
    # 110 > 100 (over), 150 < 200 (under), 400 == 400 (not under)
    assert under_forecast_rate(ACTUAL, FORECAST) == pytest.approx(1 / 3)


def test_persistence_by_hand() -> None:
    y = np.array([10.0, 12.0, 11.0, 15.0, 14.0])
    actual, forecast = y[1:], y[:-1]  # one step ahead: each value forecast by the one before it
    assert wape(actual, forecast) == pytest.approx((2 + 1 + 4 + 1) / (12 + 11 + 15 + 14))
    assert under_forecast_rate(actual, forecast) == pytest.approx(2 / 4)  # 10<12, 11<15
    assert bias(actual, forecast) == pytest.approx(((10 - 12) + (12 - 11) + (11 - 15) + (15 - 14)) / 4 / 13)


def test_peak_recall_by_hand() -> None:
    actual = np.array([100.0] * 18 + [500.0, 600.0])
    # P90 with linear interpolation: position 0.9 * 19 = 17.1 between 100 and 500 -> 140; peaks: 500 and 600.
    forecast = np.array([100.0] * 18 + [460.0, 500.0])
    # 460 >= 0.9 * 500 = 450 (seen); 500 < 0.9 * 600 = 540 (missed)
    assert peak_recall(actual, forecast) == pytest.approx(0.5)
    assert peak_recall(actual, actual) == 1.0
    assert peak_recall(actual, forecast, tolerance=0.8) == 1.0  # 500 >= 480
    assert math.isnan(peak_recall(np.full(10, 5.0), np.full(10, 5.0)))  # a flat series has no peak


def test_asymmetric_wape_weighs_under_forecasting() -> None:
    actual = np.array([100.0, 100.0])
    under = np.array([90.0, 90.0])
    over = np.array([120.0, 120.0])
    assert asymmetric_wape(actual, under) == pytest.approx(3 * 20 / 200)
    assert asymmetric_wape(actual, over) == pytest.approx(40 / 200)
    assert asymmetric_wape(actual, under, under_weight=1.0) == pytest.approx(wape(actual, under))


def test_undefined_figures_are_nan() -> None:
    empty = np.array([np.nan, np.nan])
    for fn in (wape, mape, bias, under_forecast_rate, peak_recall):
        assert math.isnan(fn(empty, np.array([1.0, 2.0])))
    with pytest.raises(ValueError):
        wape(np.ones(3), np.ones(2))


def test_summary_has_the_five_figures() -> None:
    s = summary(ACTUAL, FORECAST, FORECAST)
    assert set(s) == {"wape", "mape", "bias", "under_forecast_rate", "peak_recall"}
    assert s["wape"] == wape(ACTUAL, FORECAST)
