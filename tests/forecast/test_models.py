"""The models: known-truth series (ramp, daily cycle), gaps, degrade reasons, the registry."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from adapter.forecast.base import ForecastError, checked, prepare
from adapter.forecast.registry import MODELS, get_model
from tests.forecast.synthetic import DAY_S, daily_cycle, noisy_ramp, ramp_truth

STEP = 300.0
TEN_MIN = 600.0


def _forecast(
    name: str,
    values: np.ndarray,
    steps: int,
    *,
    step_s: float = STEP,
    start_ts: float = 0.0,
    **params: Any,
) -> np.ndarray:
    return get_model(name, **params).fit(values, step_s=step_s, start_ts=start_ts).forecast(steps)


# --- registry ---------------------------------------------------------------------------------------------


def test_registry_names_match_models() -> None:
    assert {"persistence", "seasonal_naive", "arima", "ar", "fourier_ar", "ses", "ar_margin", "ses_ar_margin"} <= set(
        MODELS
    )
    for name in MODELS:
        assert get_model(name).name == name


def test_registry_rejects_unknown_names_and_parameters() -> None:
    with pytest.raises(ValueError, match="known: .*persistence"):
        get_model("prophet")
    with pytest.raises(ValueError, match="selection"):
        get_model("auto")
    with pytest.raises(ValueError, match="bad parameters"):
        get_model("ar", order=3)
    with pytest.raises(ValueError, match="quantile"):
        get_model("ses", quantile=1.5)


def test_model_parameters_are_applied() -> None:
    assert get_model("arima", order=(2, 1, 0)).order == (2, 1, 0)  # type: ignore[attr-defined]
    assert get_model("ar", p=4).p == 4  # type: ignore[attr-defined]
    assert get_model("seasonal_naive", period_s=3600.0).history_points(STEP, 10) == 12


# --- a noisy ramp: the trend must be followed --------------------------------------------------------------


def test_persistence_repeats_the_last_value() -> None:
    values = noisy_ramp(120)
    np.testing.assert_array_equal(_forecast("persistence", values, 6), np.full(6, values[-1]))


@pytest.mark.parametrize(("name", "params"), [("ses", {}), ("ar", {"drift": True})])
def test_trend_following_models_track_a_ramp(name: str, params: dict[str, Any]) -> None:
    values = noisy_ramp(120, slope=2.0, noise=1.0)
    truth = ramp_truth(np.arange(120, 126))
    f = _forecast(name, values, 6, **params)
    # Within two steps' worth of the slope at every horizon; persistence is 12 behind at step 6.
    assert np.all(np.abs(f - truth) <= 4.0), (f, truth)
    assert abs(f[-1] - truth[-1]) < abs(values[-1] - truth[-1])


def test_ses_margin_offsets_the_smoothing_lag() -> None:
    """Without the margin a smoothed level trails a ramp; the in-sample error quantile moves it back up."""
    values = noisy_ramp(120)
    truth = ramp_truth(np.arange(120, 126))
    plain = _forecast("ses", values, 6, quantile=None)
    with_margin = _forecast("ses", values, 6)
    assert np.all(plain < truth)
    assert np.all(with_margin > plain)
    assert np.mean(np.abs(with_margin - truth)) < np.mean(np.abs(plain - truth))


def test_ses_margin_is_earned_only_where_smoothing_beats_persistence() -> None:
    """On a noisy level, smoothing beats persistence in-sample, so the upper-quantile margin stays; on a noiseless
    random walk persistence is already the best level (alpha 1) and nothing is gained: no margin is added."""
    rng = np.random.default_rng(5)
    noisy = 100.0 + rng.normal(0.0, 10.0, 120)
    earned = _forecast("ses", noisy, 3)
    spent = _forecast("ses", noisy, 3, earned=False)
    level = _forecast("ses", noisy, 3, quantile=None)
    assert np.all(earned > level) and np.allclose(earned, spent)
    walk = 100.0 * np.exp(np.cumsum(rng.normal(0.0, 0.05, 120)))
    assert np.allclose(_forecast("ses", walk, 3), walk[-1])  # persistence, no margin
    assert not np.allclose(_forecast("ses", walk, 3, earned=False), walk[-1])


# --- a daily cycle: the seasonal models must know the time of day -------------------------------------------


def _cycle_history(days: int = 4, end_offset_s: float = -1800.0) -> tuple[np.ndarray, np.ndarray]:
    """``days`` of a noisy daily sine at 10-min steps ending ``end_offset_s`` before midnight (steepest rise)."""
    end = days * DAY_S + end_offset_s
    times = np.arange(end - (days * 144 - 1) * TEN_MIN, end + 1, TEN_MIN)
    return times, daily_cycle(times, noise=10.0, seed=3)


def test_fourier_ar_follows_a_daily_cycle_and_beats_persistence() -> None:
    times, values = _cycle_history()
    future = times[-1] + TEN_MIN * np.arange(1, 4)
    truth = daily_cycle(future)
    f = _forecast("fourier_ar", values, 3, step_s=TEN_MIN, start_ts=float(times[0]))
    persistence_error = np.abs(values[-1] - truth)
    assert np.all(np.abs(f - truth) <= 30.0), (f, truth)  # 3 sd of the noise
    assert np.abs(f - truth)[-1] < persistence_error[-1]


def test_fourier_ar_places_the_forecast_on_the_fitted_cycle() -> None:
    """Fit and forecast use the same clock: moving ``start_ts`` by any amount moves both, so the forecast
    is unchanged (a bug that mixed window-relative and absolute time would shift it by the offset's phase)."""
    times, values = _cycle_history()
    right = _forecast("fourier_ar", values, 3, step_s=TEN_MIN, start_ts=float(times[0]))
    shifted = _forecast("fourier_ar", values, 3, step_s=TEN_MIN, start_ts=float(times[0]) + 6 * 3600)
    np.testing.assert_allclose(shifted, right, rtol=1e-9)


def test_seasonal_naive_is_the_value_one_day_earlier() -> None:
    times, values = _cycle_history()
    f = _forecast("seasonal_naive", values, 3, step_s=TEN_MIN, start_ts=float(times[0]))
    # 144 steps per day: step k ahead of the last index n-1 is index n-1+k-144.
    np.testing.assert_array_equal(f, values[-144:-141])


def test_seasonal_naive_index_arithmetic_with_a_short_period() -> None:
    values = np.arange(50, dtype=np.float64)
    f = _forecast("seasonal_naive", values, 13, period_s=10 * STEP)
    # Period 10 steps: steps 1..10 come from indices 40..49, steps 11..13 wrap to 40..42 again.
    np.testing.assert_array_equal(f, np.r_[np.arange(40, 50), np.arange(40, 43)])


# --- gaps: masked, never filled --------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["persistence", "ses", "ar", "fourier_ar", "arima", "ar_margin", "ses_ar_margin"])
def test_scattered_gaps_do_not_become_fake_load(name: str) -> None:
    rng = np.random.default_rng(7)
    values = 500.0 + rng.normal(0.0, 5.0, 4 * 144)
    values[rng.random(values.size) < 0.2] = np.nan  # a fifth of the points missing
    values[-1] = 505.0
    f = _forecast(name, values, 3, step_s=TEN_MIN)
    # Had a model read a gap as zero load (or interpolated it from zeros) this would be far below 500.
    assert np.all(np.isfinite(f))
    assert np.all(np.abs(f - 500.0) <= 15.0), f


@pytest.mark.parametrize("name", ["ses", "ar"])
def test_a_block_gap_inside_a_ramp(name: str) -> None:
    values = noisy_ramp(160)
    values[60:90] = np.nan
    truth = ramp_truth(np.arange(160, 163))
    params = {"drift": True} if name == "ar" else {}
    f = _forecast(name, values, 3, **params)
    assert np.all(np.abs(f - truth) <= 6.0), (f, truth)


@pytest.mark.parametrize(("name", "params"), [("ses", {}), ("ar", {"drift": True})])
def test_trailing_gap_keeps_forecast_aligned_with_the_end_of_the_input(name: str, params: dict[str, Any]) -> None:
    values = noisy_ramp(122)
    values[-2:] = np.nan  # two missed scrapes: the input still ends at index 121
    f = _forecast(name, values, 3, **params)
    truth = ramp_truth(np.arange(122, 125))  # forecast[0] is one step after index 121, not after 119
    assert np.all(np.abs(f - truth) <= 5.0), (f, truth)


def test_infinities_are_treated_as_gaps() -> None:
    values = np.full(60, 100.0)
    values[10] = np.inf
    values[20] = -np.inf
    np.testing.assert_array_equal(_forecast("ses", values, 2), [100.0, 100.0])


# --- degrade reasons ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MODELS))
def test_too_few_points_is_insufficient_history(name: str) -> None:
    values = np.full(200, np.nan)
    values[-29:] = 100.0  # 29 finite points: one short of the default minimum
    with pytest.raises(ForecastError) as info:
        get_model(name).fit(values, step_s=STEP, start_ts=0.0)
    assert info.value.reason == "insufficient_history"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_long_silence_at_the_end_is_stale_history(name: str) -> None:
    values = np.full(3 * 288, 100.0)
    values[-4:] = np.nan
    with pytest.raises(ForecastError) as info:
        get_model(name).fit(values, step_s=STEP, start_ts=0.0)
    assert info.value.reason == "stale_history"


def test_seasonal_models_need_whole_days() -> None:
    values = np.full(200, 100.0)  # 200 x 5 min < 1 day
    for name in ("seasonal_naive", "fourier_ar"):
        with pytest.raises(ForecastError) as info:
            get_model(name).fit(values, step_s=STEP, start_ts=0.0)
        assert info.value.reason == "insufficient_history"
    assert get_model("fourier_ar").history_points(STEP, 120) == 3 * 288


def test_seasonal_naive_refuses_a_missing_season_value() -> None:
    values = np.arange(50, dtype=np.float64)
    values[-2:] = np.nan
    fitted = get_model("seasonal_naive", period_s=10 * STEP).fit(values, step_s=STEP, start_ts=0.0)
    np.testing.assert_array_equal(fitted.forecast(3), [40.0, 41.0, 42.0])
    with pytest.raises(ForecastError) as info:
        fitted.forecast(9)  # step 9 is index 48 one season ago: missing
    assert info.value.reason == "seasonal_gap"


def test_explosive_ar_fit_is_refused() -> None:
    diffs = 1.5 ** np.arange(60)  # differences that grow geometrically: an AR(1) root of 1.5
    values = 100.0 + np.cumsum(diffs)
    with pytest.raises(ForecastError) as info:
        get_model("ar", p=1).fit(values, step_s=STEP, start_ts=0.0)
    assert info.value.reason == "fit_failed"


def test_arima_non_convergence_is_fit_failed() -> None:
    # Measured with statsmodels 0.15: on a constant series the likelihood optimiser reports non-convergence.
    with pytest.raises(ForecastError) as info:
        get_model("arima").fit(np.full(120, 100.0), step_s=STEP, start_ts=0.0)
    assert info.value.reason == "fit_failed"


def test_arima_and_least_squares_ar_agree() -> None:
    """The cheap lstsq AR(p) on differences gives nearly the exact-likelihood ARIMA(p,1,0) forecast."""
    rng = np.random.default_rng(11)
    d = np.zeros(400)
    for t in range(2, 400):
        d[t] = 0.5 * d[t - 1] - 0.2 * d[t - 2] + rng.normal(0.0, 10.0)
    values = 2000.0 + np.cumsum(d)
    exact = _forecast("arima", values, 6, order=(2, 1, 0))
    cheap = _forecast("ar", values, 6, p=2)
    np.testing.assert_allclose(cheap, exact, atol=3.0)


def test_non_finite_output_is_refused_and_negative_load_clipped() -> None:
    with pytest.raises(ForecastError) as info:
        checked(np.array([1.0, np.nan]), 2)
    assert info.value.reason == "non_finite"
    np.testing.assert_array_equal(checked(np.array([-5.0, 3.0]), 2), [0.0, 3.0])


def test_a_falling_load_is_never_forecast_below_zero() -> None:
    values = np.maximum(600.0 - 10.0 * np.arange(60), 1.0)
    values[-5:] = [50.0, 40.0, 30.0, 20.0, 10.0]
    f = _forecast("ar", values, 6, drift=True)
    assert np.all(f >= 0.0)


def test_bad_arguments_raise_value_error() -> None:
    fitted = get_model("persistence").fit(np.full(40, 1.0), step_s=STEP, start_ts=0.0)
    with pytest.raises(ValueError):
        fitted.forecast(0)
    with pytest.raises(ValueError):
        get_model("persistence").fit(np.full(40, 1.0), step_s=0.0, start_ts=0.0)
    with pytest.raises(ValueError):
        prepare(np.ones((4, 4)), step_s=STEP)
