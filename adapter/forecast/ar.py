"""AR(p) on first differences by least squares: an ARIMA(p,1,0) without the optimiser, ~1000x cheaper.

The exact-likelihood ARIMA in ``arima.py`` and this conditional least-squares fit give nearly the same
forecasts on a few hundred points; this one costs a ``numpy.linalg.lstsq`` on a (n x p) matrix, so it can be
refit for hundreds of workloads every step.

Gaps: a difference touching a missing point is unknown, so every regression row that needs one is dropped
(masking, not filling). When forecasting, an unknown recent difference contributes nothing (it is taken as
"no change"); the level the forecast starts from is always a real observation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from adapter.forecast.base import (
    DEFAULT_MAX_TRAILING_GAP,
    DEFAULT_MIN_POINTS,
    ForecastError,
    check_steps,
    checked,
    prepare,
)


@dataclass(frozen=True)
class DiffAR:
    """Coefficients of an AR(p) model of the first differences: ``d[t] = c + sum(phi[i] * d[t-1-i])``."""

    phi: np.ndarray
    intercept: float

    def forecast_from(self, values: np.ndarray, steps: int) -> np.ndarray:
        """Forecast ``steps`` levels after ``values`` (which must end with a finite point)."""
        p = self.phi.size
        d = np.diff(values)
        recent = d[::-1][:p] if d.size else np.zeros(0)
        lags = np.zeros(p)
        lags[: recent.size] = np.nan_to_num(recent, nan=0.0)
        level = float(values[-1])
        out = np.empty(steps)
        for k in range(steps):
            step = self.intercept + float(self.phi @ lags)
            level += step
            out[k] = level
            lags = np.roll(lags, 1)
            if p:
                lags[0] = step
        return out

    def in_sample(self, values: np.ndarray, steps: int) -> np.ndarray:
        """``forecast_from(values[: i + 1], steps)`` for every ``i`` at once: shape ``(len(values), steps)``,
        NaN rows where ``values[i]`` is a gap. Same arithmetic, vectorised over origins (the margin's replay)."""
        p = self.phi.size
        n = values.size
        d = np.concatenate([np.zeros(p), np.nan_to_num(np.diff(values), nan=0.0)])
        # lags[i, j] = the difference j + 1 steps before origin i (0 before the history starts, as forecast_from).
        lags = sliding_window_view(d, p)[:n, ::-1].copy() if p else np.zeros((n, 0))
        level = values.astype(np.float64, copy=True)
        out = np.empty((n, steps))
        for k in range(steps):
            step = self.intercept + lags @ self.phi
            level = level + step
            out[:, k] = level
            if p:
                lags = np.roll(lags, 1, axis=1)
                lags[:, 0] = step
        return out


def fit_diff_ar(values: np.ndarray, p: int, *, drift: bool) -> DiffAR:
    """Least-squares AR(p) on the first differences of ``values`` (NaN-aware).

    Raises ``ForecastError("insufficient_history")`` when fewer than ``max(10, 3 (p + 1))`` complete rows
    remain, and ``ForecastError("fit_failed")`` for a failed or explosive fit (companion matrix with an
    eigenvalue of modulus > 1: its forecast would grow geometrically).
    """
    if p < 0:
        raise ValueError(f"p must be >= 0, got {p}")
    d = np.diff(values)
    if d.size <= p:
        raise ForecastError("insufficient_history", f"{d.size} differences for an AR({p})")
    target = d[p:]
    lagged = sliding_window_view(d[:-1], p)[:, ::-1] if p else np.zeros((target.size, 0))
    columns = [np.ones((target.size, 1))] if drift else []
    design = np.hstack([*columns, lagged]) if columns or p else np.zeros((target.size, 0))
    keep = np.isfinite(target) & np.all(np.isfinite(design), axis=1)
    needed = max(10, 3 * (p + 1))
    if int(keep.sum()) < needed:
        raise ForecastError("insufficient_history", f"{int(keep.sum())} complete rows, {needed} needed")
    if design.shape[1] == 0:
        return DiffAR(phi=np.zeros(0), intercept=0.0)
    try:
        coef, *_ = np.linalg.lstsq(design[keep], target[keep], rcond=None)
    except np.linalg.LinAlgError as exc:
        raise ForecastError("fit_failed", f"least squares failed: {exc}") from exc
    if not np.all(np.isfinite(coef)):
        raise ForecastError("fit_failed", "non-finite AR coefficients")
    intercept = float(coef[0]) if drift else 0.0
    phi = np.asarray(coef[1:] if drift else coef, dtype=np.float64)
    if p:
        companion = np.zeros((p, p))
        companion[0] = phi
        companion[1:, :-1] = np.eye(p - 1)
        # A root on the unit circle is allowed (it continues a ramp: a trend in the load); beyond it the
        # forecast grows geometrically. The slack absorbs rounding on an exact unit root.
        if float(np.max(np.abs(np.linalg.eigvals(companion)))) > 1.0 + 1e-6:
            raise ForecastError("fit_failed", "explosive AR fit (root on or outside the unit circle)")
    return DiffAR(phi=phi, intercept=intercept)


@dataclass(frozen=True)
class _FittedAR:
    values: np.ndarray
    model: DiffAR
    skip: int

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        path = self.model.forecast_from(self.values, steps + self.skip)
        return checked(path[self.skip :], steps)

    def in_sample(self, steps: int) -> np.ndarray:
        """The forecasts these coefficients would have issued at each point of the history (``margin``)."""
        check_steps(steps)
        # Clipped at zero like ``forecast`` (``base.checked``), so the replay is what would have been served.
        return np.asarray(np.maximum(self.model.in_sample(self.values, steps), 0.0))


@dataclass(frozen=True)
class AutoRegressive:
    """``ar``: AR(``p``) on first differences by least squares, with an optional drift term (see module)."""

    p: int = 2
    drift: bool = False
    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "ar"

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> _FittedAR:
        """Least squares on the differences; ``ForecastError`` per ``base.prepare`` and ``fit_diff_ar``."""
        hist = prepare(values, step_s=step_s, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap)
        model = fit_diff_ar(hist.values, self.p, drift=self.drift)
        return _FittedAR(values=hist.values, model=model, skip=hist.skip)

    def history_points(self, step_s: float, default: int) -> int:
        """The recent past only: ``default``."""
        return default
