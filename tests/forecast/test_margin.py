"""The earned margin (``margin.py``) and the models that wear it (``ar_margin``, ``ses_ar_margin``).

The contract: the replay is what the fitted model would really have forecast; the served forecast's in-sample
error is never worse than persistence's; the model only departs from persistence and only adds a margin on
evidence; shape, finiteness, non-negativity and the degrade reasons are those of every model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from adapter.forecast.ar import AutoRegressive
from adapter.forecast.base import ForecastError, prepare
from adapter.forecast.margin import (
    MIN_ERROR_PAIRS,
    WithMargin,
    earned_margin,
    lead_errors,
    shrink_weight,
    under_floor,
)
from adapter.forecast.margined import ArMargin, SesArMargin
from adapter.forecast.registry import MODELS, get_model
from adapter.forecast.ses import SimpleExpSmoothing
from tests.forecast.synthetic import noisy_ramp, ramp_truth

STEP = 300.0
MARGIN_MODELS = ("ar_margin", "ses_ar_margin")


def _noisy_level(seed: int, n: int = 120) -> np.ndarray:
    """A flat level with 10 % noise: smoothing clearly beats persistence here."""
    return 100.0 + np.random.default_rng(seed).normal(0.0, 10.0, n)


def _walk(seed: int, n: int = 120) -> np.ndarray:
    """A random walk: persistence is the best forecast there is."""
    return 100.0 * np.exp(np.cumsum(np.random.default_rng(seed).normal(0.0, 0.03, n)))


def _wrapped(values: np.ndarray, *, quantile: float = 0.6) -> WithMargin:
    fitted = SesArMargin(quantile=quantile).fit(values, step_s=STEP, start_ts=0.0)
    assert isinstance(fitted, WithMargin)
    return fitted


# --- the replay --------------------------------------------------------------------------------------------


def test_ar_replay_is_what_the_fitted_coefficients_forecast_from_each_origin() -> None:
    values = noisy_ramp(150, noise=3.0)
    values[[40, 41, 90]] = np.nan
    fitted = AutoRegressive(p=3, drift=True).fit(values, step_s=STEP, start_ts=0.0)
    replay = fitted.in_sample(4)
    assert replay.shape == (150, 4)
    for i in (0, 1, 5, 39, 42, 43, 91, 120, 149):
        np.testing.assert_allclose(replay[i], fitted.model.forecast_from(values[: i + 1], 4), rtol=1e-12)
    assert np.all(np.isnan(replay[[40, 41, 90]]))  # no forecast is issued from a gap
    np.testing.assert_allclose(replay[-1], fitted.forecast(4), rtol=1e-12)  # the last origin is the forecast


def test_ses_replay_is_the_smoothed_level_at_each_origin() -> None:
    values = _noisy_level(1)
    values[[10, 11]] = np.nan
    fitted = SimpleExpSmoothing(quantile=None).fit(values, step_s=STEP, start_ts=0.0)
    replay = fitted.in_sample(3)
    assert np.all(np.isnan(replay[[10, 11]]))
    np.testing.assert_allclose(replay[-1], fitted.forecast(3))
    # Each row is flat (a level model) and equals the level after that observation.
    finite = np.isfinite(values)
    np.testing.assert_allclose(replay[finite], np.repeat(fitted.levels[:, None], 3, axis=1))


def test_lead_errors_pair_each_origin_with_the_values_that_followed() -> None:
    values = np.array([1.0, 2.0, np.nan, 4.0])
    paths = np.zeros((4, 2))
    errors = lead_errors(values, paths)
    expected = np.array([[2.0, np.nan], [np.nan, 4.0], [4.0, np.nan], [np.nan, np.nan]])
    np.testing.assert_array_equal(errors, expected)


# --- the rule ----------------------------------------------------------------------------------------------


def test_shrink_weight_is_one_minus_one_over_t_squared() -> None:
    persistence = np.full(100, 10.0)
    # gains alternate 1 and 3: mean 2, sample sd ~1.005, so t = 2 / (sd * sqrt(lead / n)).
    model = persistence - np.tile([1.0, 3.0], 50)
    gain = np.abs(persistence) - np.abs(model)
    se = float(np.std(gain, ddof=1)) * np.sqrt(4 / 100)
    assert shrink_weight(model, persistence, lead=4) == pytest.approx(1 - (se / 2.0) ** 2)
    assert shrink_weight(persistence, persistence, lead=1) == 0.0  # no gain: persistence
    assert shrink_weight(persistence + 1.0, persistence, lead=1) == 0.0  # a loss: persistence
    assert shrink_weight(0.5 * persistence, persistence, lead=1) == 1.0  # the same gain at every origin: certain
    assert shrink_weight(model[:5], persistence[:5], lead=1) == 1.0  # too few pairs to judge: the model as is
    # Noise: gains of +21 and -19 (mean 1, t = 0.25 over 100 origins overlapping 4 steps) are no evidence.
    noisy = persistence * 10.0 - np.tile([21.0, -19.0], 50)
    assert shrink_weight(noisy, persistence * 10.0, lead=4) == 0.0


def test_the_margin_is_paid_only_from_a_significant_gain() -> None:
    rng = np.random.default_rng(3)
    persistence = rng.normal(0.0, 10.0, 200)
    better = 0.5 * persistence  # half the error at every origin: a clear gain
    margin = earned_margin(better, persistence, lead=1, quantile=0.6)
    assert margin == pytest.approx(float(np.quantile(better, 0.6))) and margin > 0
    # The same errors as persistence: nothing gained, nothing to spend.
    assert earned_margin(persistence, persistence, lead=1, quantile=0.6) == 0.0
    # A history that drifted upwards makes an upper quantile *lower* the in-sample error; that is a drift
    # fitted to the past, not a gain over persistence, and buys no margin.
    drift = persistence + 5.0
    assert float(np.mean(np.abs(drift - np.quantile(drift, 0.6)))) < float(np.mean(np.abs(drift)))
    assert earned_margin(drift, drift, lead=1, quantile=0.6) == 0.0
    # Too few pairs: no margin.
    assert earned_margin(better[: MIN_ERROR_PAIRS - 1], persistence[: MIN_ERROR_PAIRS - 1], lead=1, quantile=0.6) == 0


def test_a_small_gain_buys_a_lower_quantile_than_a_large_one() -> None:
    rng = np.random.default_rng(4)
    persistence = rng.normal(0.0, 10.0, 400)
    large = earned_margin(0.5 * persistence, persistence, lead=1, quantile=0.6)
    small = earned_margin(0.98 * persistence, persistence, lead=1, quantile=0.6)
    assert large == pytest.approx(float(np.quantile(0.5 * persistence, 0.6)))
    assert 0 < small < float(np.quantile(0.98 * persistence, 0.6))


def test_the_widened_margin_under_forecasts_the_history_gap_less_often_than_persistence() -> None:
    rng = np.random.default_rng(6)
    persistence = rng.normal(3.0, 10.0, 400)  # a load that drifts up: persistence under-forecasts ~62 %
    model = 0.9 * persistence
    u = float(np.mean(persistence > 0))
    assert u > 0.55
    floor = under_floor(model, persistence, gap=0.02)
    assert float(np.mean(model > floor)) == pytest.approx(u - 0.02, abs=1.5 / model.size)
    assert floor == pytest.approx(float(np.quantile(model, 1 - u + 0.02)))
    # Already under-forecasting less often than persistence by the gap at no margin: nothing to add (never < 0).
    assert under_floor(persistence - 20.0, persistence, gap=0.02) == 0.0
    assert under_floor(model[: MIN_ERROR_PAIRS - 1], persistence[: MIN_ERROR_PAIRS - 1], gap=0.02) == 0.0


def test_under_gap_only_ever_raises_the_margin() -> None:
    values = noisy_ramp(150, noise=8.0)
    plain = SesArMargin().fit(values, step_s=STEP, start_ts=0.0)
    widened = SesArMargin(under_gap=0.02).fit(values, step_s=STEP, start_ts=0.0)
    assert isinstance(plain, WithMargin) and isinstance(widened, WithMargin)
    a, b = plain.plan(6), widened.plan(6)
    np.testing.assert_allclose(a.weight, b.weight)
    assert np.all(b.margin >= a.margin) and np.any(b.margin > a.margin)
    with pytest.raises(ValueError, match="under_gap"):
        SesArMargin(under_gap=0.5)


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("kind", ["level", "walk", "ramp"])
def test_served_forecast_is_never_worse_in_sample_than_persistence(kind: str, seed: int) -> None:
    """Replay what the wrapper serves (weights and margins applied to the model's in-sample paths) and check
    the promise: at every step ahead its in-sample mean absolute error is no worse than persistence's."""
    values = {"level": _noisy_level, "walk": _walk, "ramp": lambda s: noisy_ramp(120, noise=4.0, seed=s)}[kind](seed)
    fitted = _wrapped(values)
    steps = 6
    plan = fitted.plan(steps)
    assert np.all((plan.weight >= 0) & (plan.weight <= 1)) and np.all(plan.margin >= 0)
    paths = fitted.base.in_sample(steps)
    last = np.repeat(values[:, None], steps, axis=1)
    served = last + plan.weight * (paths - last) + plan.margin
    served_err, persistence_err = lead_errors(values, served), lead_errors(values, last)
    for k in range(steps):
        ok = np.isfinite(served_err[:, k])
        assert np.mean(np.abs(served_err[ok, k])) <= np.mean(np.abs(persistence_err[ok, k])) + 1e-9


def test_on_a_noisy_level_the_model_is_trusted_and_earns_a_margin() -> None:
    values = _noisy_level(5)
    fitted = _wrapped(values)
    plan = fitted.plan(6)
    assert np.all(plan.weight > 0.5) and np.all(plan.margin > 0)
    plain = SesArMargin(quantile=None).fit(values, step_s=STEP, start_ts=0.0).forecast(6)
    f = fitted.forecast(6)
    np.testing.assert_allclose(f, values[-1] + plan.weight * (plain - values[-1]) + plan.margin)
    assert np.all(f > values[-1] + plan.weight * (plain - values[-1]))  # the margin lifts the point forecast


def test_on_random_walks_the_forecast_stays_close_to_persistence() -> None:
    """Where persistence is optimal the in-sample 'gain' is chance: the served forecast departs from the last
    value far less than the unshrunk mean of ses and ar does (summed over seeds, so no seed is picked)."""
    shrunk, plain = 0.0, 0.0
    for seed in range(20):
        walk = _walk(100 + seed)
        shrunk += float(np.abs(SesArMargin().fit(walk, step_s=STEP, start_ts=0.0).forecast(6) - walk[-1]).sum())
        plain += float(
            np.abs(SesArMargin(quantile=None).fit(walk, step_s=STEP, start_ts=0.0).forecast(6) - walk[-1]).sum()
        )
    assert shrunk < 0.5 * plain


# --- the models: contract, gaps, degrade --------------------------------------------------------------------


@pytest.mark.parametrize("name", MARGIN_MODELS)
@pytest.mark.parametrize("seed", range(5))
def test_margin_models_return_finite_non_negative_forecasts(name: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    # A load collapsing towards zero (a differenced model extrapolates below it) with scattered gaps.
    values = np.maximum(300.0 - 2.5 * np.arange(120) + rng.normal(0.0, 5.0, 120), 0.0)
    values[rng.random(120) < 0.1] = np.nan
    values[-1] = 1.0
    for steps in (1, 6, 12):
        f = get_model(name).fit(values, step_s=STEP, start_ts=0.0).forecast(steps)
        assert f.shape == (steps,) and np.all(np.isfinite(f)) and np.all(f >= 0.0)


@pytest.mark.parametrize("name", MARGIN_MODELS)
def test_margin_models_forecast_from_the_end_of_the_input_across_a_trailing_gap(name: str) -> None:
    values = noisy_ramp(122)
    values[-2:] = np.nan  # the input still ends at index 121
    fitted = get_model(name, drift=True).fit(values, step_s=STEP, start_ts=0.0)
    f = fitted.forecast(3)
    truth = ramp_truth(np.arange(122, 125))
    assert np.all(np.abs(f - truth) <= 5.0), (f, truth)
    assert isinstance(fitted, WithMargin) and fitted.skip == 2
    # The margins for the caller's steps 1..3 are those of leads 3..5 after the last observation.
    no_skip = WithMargin(base=fitted.base, values=fitted.values, skip=0, quantile=fitted.quantile)
    np.testing.assert_allclose(fitted.plan(3).margin, no_skip.plan(5).margin[2:])


@pytest.mark.parametrize("name", MARGIN_MODELS)
def test_margin_models_degrade_on_short_all_nan_and_stale_histories(name: str) -> None:
    model = get_model(name)
    for values, reason in (
        (np.full(29, 100.0), "insufficient_history"),
        (np.full(200, np.nan), "insufficient_history"),
        (np.r_[np.full(100, 100.0), np.full(4, np.nan)], "stale_history"),
    ):
        with pytest.raises(ForecastError) as info:
            model.fit(values, step_s=STEP, start_ts=0.0)
        assert info.value.reason == reason


def test_ses_ar_margin_serves_the_part_that_fits_when_the_other_cannot() -> None:
    diffs = 1.5 ** np.arange(60)  # an explosive AR(1): ``ar`` refuses it (fit_failed), ``ses`` does not
    values = 100.0 + np.cumsum(diffs)
    with pytest.raises(ForecastError, match="fit_failed"):
        get_model("ar_margin", p=1).fit(values, step_s=STEP, start_ts=0.0)
    fitted = get_model("ses_ar_margin", p=1).fit(values, step_s=STEP, start_ts=0.0)
    ses = SimpleExpSmoothing(quantile=None).fit(values, step_s=STEP, start_ts=0.0)
    hist = prepare(values, step_s=STEP)
    assert isinstance(fitted, WithMargin)
    alone = WithMargin(base=ses, values=hist.values, skip=hist.skip, quantile=fitted.quantile)
    np.testing.assert_allclose(fitted.forecast(6), alone.forecast(6))


def test_quantile_none_is_the_plain_model() -> None:
    values = _noisy_level(2)
    np.testing.assert_allclose(
        get_model("ar_margin", quantile=None).fit(values, step_s=STEP, start_ts=0.0).forecast(6),
        get_model("ar").fit(values, step_s=STEP, start_ts=0.0).forecast(6),
    )


# --- registry and catalog -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "cls"), [("ar_margin", ArMargin), ("ses_ar_margin", SesArMargin)])
def test_registry_builds_the_margin_models(name: str, cls: type) -> None:
    assert MODELS[name] is cls
    model: Any = get_model(name, p=3, z=1.0)
    assert isinstance(model, cls) and model.name == name and model.p == 3 and model.z == 1.0
    with pytest.raises(ValueError, match="quantile"):
        get_model(name, quantile=0.4)  # a margin below the median is not an upper-quantile margin
    with pytest.raises(ValueError, match="z must be"):
        get_model(name, z=-1.0)
    with pytest.raises(ValueError, match="bad parameters"):
        get_model(name, order=3)


def test_ses_ar_margin_rejects_bad_part_parameters_at_construction() -> None:
    with pytest.raises(ValueError, match="alphas"):
        get_model("ses_ar_margin", alphas=(0.0,))
