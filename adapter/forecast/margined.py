"""Models that wear the earned margin (``margin.py``): ``ar_margin`` and ``ses_ar_margin``.

``ar_margin`` is ``ar`` plus the margin. ``ses_ar_margin`` is the plain mean of ``ses``'s level (no margin of
its own) and ``ar``'s forecast, plus the margin fitted to the mean's own in-sample errors. Why a mean: the two
err differently (a smoothed level lags a ramp that the differenced AR follows; the AR chases noise that the
level averages out), so their mean has lower error than either on the traces of
``benchmarks/forecast_accuracy.py``; an equal-weight mean is the combination that needs no fitted weights
(a forecast-combination staple: fitted weights rarely beat equal ones out of sample).

If one part of the mean cannot fit (``ForecastError``), the other is served alone, with its own margin.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from adapter.forecast.ar import AutoRegressive
from adapter.forecast.base import (
    DEFAULT_MAX_TRAILING_GAP,
    DEFAULT_MIN_POINTS,
    Fitted,
    ForecastError,
    check_steps,
    checked,
    prepare,
)
from adapter.forecast.margin import DEFAULT_QUANTILE, DEFAULT_Z, Replaying, WithMargin, check_margin_params
from adapter.forecast.ses import DEFAULT_ALPHAS, SimpleExpSmoothing


def wear_margin(
    base: Replaying,
    values: np.ndarray,
    *,
    step_s: float,
    quantile: float | None,
    z: float,
    min_points: int,
    max_trailing_gap: int,
    under_gap: float | None = None,
) -> Fitted:
    """``base`` (fitted on ``values`` with the same ``min_points``/``max_trailing_gap``) with its earned margin,
    or ``base`` itself when ``quantile`` is None."""
    if quantile is None:
        return base
    hist = prepare(values, step_s=step_s, min_points=min_points, max_trailing_gap=max_trailing_gap)
    return WithMargin(base=base, values=hist.values, skip=hist.skip, quantile=quantile, z=z, under_gap=under_gap)


class _MarginParams(Protocol):
    """What a margined model holds of the margin's parameters (read-only: the models are frozen)."""

    @property
    def quantile(self) -> float | None: ...

    @property
    def z(self) -> float: ...

    @property
    def under_gap(self) -> float | None: ...

    @property
    def min_points(self) -> int: ...

    @property
    def max_trailing_gap(self) -> int: ...


def _wear(model: _MarginParams, base: Replaying, values: np.ndarray, step_s: float) -> Fitted:
    """``base`` wearing the earned margin with ``model``'s margin and history parameters."""
    return wear_margin(
        base,
        values,
        step_s=step_s,
        quantile=model.quantile,
        z=model.z,
        min_points=model.min_points,
        max_trailing_gap=model.max_trailing_gap,
        under_gap=model.under_gap,
    )


@dataclass(frozen=True)
class _Mean:
    """The equal-weight mean of fitted models, forecasts and replays alike."""

    parts: tuple[Replaying, ...]

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        return checked(np.mean([p.forecast(steps) for p in self.parts], axis=0), steps)

    def in_sample(self, steps: int) -> np.ndarray:
        check_steps(steps)
        return np.asarray(np.mean([p.in_sample(steps) for p in self.parts], axis=0))


@dataclass(frozen=True)
class ArMargin:
    """``ar_margin``: ``ar`` (AR(``p``) on first differences) plus the earned margin (``quantile``, ``z``; see
    ``margin``; ``quantile=None`` is plain ``ar``)."""

    p: int = 2
    drift: bool = False
    quantile: float | None = DEFAULT_QUANTILE
    z: float = DEFAULT_Z
    under_gap: float | None = None
    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "ar_margin"

    def __post_init__(self) -> None:
        check_margin_params(self.quantile, self.z, self.under_gap)

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> Fitted:
        """``ar``'s fit, then the margin; ``ForecastError`` as ``ar``."""
        base = AutoRegressive(
            p=self.p, drift=self.drift, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap
        ).fit(values, step_s=step_s, start_ts=start_ts)
        return _wear(self, base, values, step_s)

    def history_points(self, step_s: float, default: int) -> int:
        """The recent past only: ``default``."""
        return default


# Where ``ses_ar_margin``'s margin starts: chosen on week 1 of the shared trace against 0.6 (the other margined
# models' start) and checked on week 2, perturbed copies and the Azure trace (benchmarks/forecast_holdout.py).
SES_AR_QUANTILE = 0.55


@dataclass(frozen=True)
class SesArMargin:
    """``ses_ar_margin``: the mean of ``ses``'s level (``alpha`` tuned ``horizon_s`` ahead, like ``ses``) and
    ``ar``'s forecast, plus the earned margin from ``quantile``, widened by ``under_gap`` (None: not widened; see
    the module docstring and ``margin``)."""

    horizon_s: float = 1800.0
    p: int = 2
    drift: bool = False
    quantile: float | None = SES_AR_QUANTILE
    z: float = DEFAULT_Z
    under_gap: float | None = None
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "ses_ar_margin"

    def __post_init__(self) -> None:
        check_margin_params(self.quantile, self.z, self.under_gap)
        # The parts validate their own parameters; build them once here so a bad one fails at construction.
        self._parts()

    def _parts(self) -> tuple[SimpleExpSmoothing, AutoRegressive]:
        ses = SimpleExpSmoothing(
            horizon_s=self.horizon_s,
            quantile=None,
            alphas=self.alphas,
            min_points=self.min_points,
            max_trailing_gap=self.max_trailing_gap,
        )
        ar = AutoRegressive(
            p=self.p, drift=self.drift, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap
        )
        return ses, ar

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> Fitted:
        """Fit both parts; the mean of those that fit, plus the margin. ``ForecastError`` (the first part's)
        only when neither fits."""
        fitted: list[Replaying] = []
        first_error: ForecastError | None = None
        for part in self._parts():
            try:
                fitted.append(part.fit(values, step_s=step_s, start_ts=start_ts))
            except ForecastError as exc:
                first_error = first_error or exc
        if not fitted:
            assert first_error is not None
            raise first_error
        base: Replaying = fitted[0] if len(fitted) == 1 else _Mean(tuple(fitted))
        return _wear(self, base, values, step_s)

    def history_points(self, step_s: float, default: int) -> int:
        """The recent past only: ``default``."""
        return default
