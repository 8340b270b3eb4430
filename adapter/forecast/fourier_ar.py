"""``fourier_ar``: a daily cycle (K Fourier harmonics of the period) plus an integrated AR on what is left.

``load(t) = c + sum_k a_k cos(2 pi k t / P) + b_k sin(2 pi k t / P) + r(t)``. The harmonics are fitted by
least squares over the last ``periods`` seasons (default 3 days), on absolute unix time so that the phase
means the same time of day whatever the window. The residual ``r`` carries the level: it is forecast with
the least-squares AR(p) on first differences from ``ar.py``, so level shifts are followed at once and the
cycle only adds how the load usually moves between now and the horizon.

Gaps are masked in both regressions (rows with a missing point are dropped). The finite data must span at
least ``min_periods`` seasons, or the cycle is not identified (``ForecastError("insufficient_history")``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from adapter.forecast.ar import DiffAR, fit_diff_ar
from adapter.forecast.base import (
    DEFAULT_MAX_TRAILING_GAP,
    DEFAULT_MIN_POINTS,
    Fitted,
    ForecastError,
    check_step,
    check_steps,
    checked,
    prepare,
)


def fourier_design(times: np.ndarray, period_s: float, harmonics: int) -> np.ndarray:
    """Regressors ``[cos(2 pi k t/P), sin(2 pi k t/P)]`` for k = 1..harmonics: shape ``(len(times), 2K)``."""
    phase = 2.0 * np.pi * np.mod(times, period_s) / period_s
    k = np.arange(1, harmonics + 1)
    angles = phase[:, None] * k[None, :]
    return np.hstack([np.cos(angles), np.sin(angles)])


@dataclass(frozen=True)
class _FittedFourierAR:
    cycle: np.ndarray  # Fourier coefficients (without the constant, which the residual level carries)
    residual: np.ndarray
    ar: DiffAR
    end_ts: float  # unix time of the last point of the (trimmed) history
    step_s: float
    period_s: float
    harmonics: int
    skip: int

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        total = steps + self.skip
        times = self.end_ts + self.step_s * np.arange(1, total + 1)
        seasonal = fourier_design(times, self.period_s, self.harmonics) @ self.cycle
        path = seasonal + self.ar.forecast_from(self.residual, total)
        return checked(path[self.skip :], steps)


@dataclass(frozen=True)
class FourierAR:
    """Fourier daily cycle + AR(``p``) on residual differences, all by least squares (see module)."""

    harmonics: int = 3
    period_s: float = 86_400.0
    periods: float = 3.0
    min_periods: float = 1.0
    p: int = 2
    drift: bool = False
    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "fourier_ar"

    def __post_init__(self) -> None:
        if self.harmonics < 1:
            raise ValueError(f"harmonics must be >= 1, got {self.harmonics}")
        if not self.period_s > 0 or not self.periods > 0 or self.min_periods < 0:
            raise ValueError("period_s and periods must be positive, min_periods >= 0")

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> Fitted:
        """Least squares for the cycle, then ``fit_diff_ar`` on the residual."""
        check_step(step_s)
        hist = prepare(values, step_s=step_s, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap)
        v = hist.values
        finite = np.isfinite(v)
        idx = np.flatnonzero(finite)
        span_s = (int(idx[-1]) - int(idx[0]) + 1) * step_s
        if span_s < self.min_periods * self.period_s:
            raise ForecastError(
                "insufficient_history",
                f"data spans {span_s / 3600:.1f} h; the cycle needs {self.min_periods * self.period_s / 3600:.1f} h",
            )
        n_coef = 1 + 2 * self.harmonics
        if idx.size < 4 * n_coef:
            raise ForecastError("insufficient_history", f"{idx.size} finite points for {n_coef} coefficients")
        times = start_ts + step_s * np.arange(v.size)
        design = np.hstack([np.ones((v.size, 1)), fourier_design(times, self.period_s, self.harmonics)])
        try:
            coef, *_ = np.linalg.lstsq(design[finite], v[finite], rcond=None)
        except np.linalg.LinAlgError as exc:
            raise ForecastError("fit_failed", f"least squares failed: {exc}") from exc
        if not np.all(np.isfinite(coef)):
            raise ForecastError("fit_failed", "non-finite Fourier coefficients")
        cycle = coef[1:]
        residual = v - design[:, 1:] @ cycle  # NaN stays NaN: gaps remain gaps
        ar = fit_diff_ar(residual, self.p, drift=self.drift)
        return _FittedFourierAR(
            cycle=cycle,
            residual=residual,
            ar=ar,
            end_ts=float(times[-1]),
            step_s=step_s,
            period_s=self.period_s,
            harmonics=self.harmonics,
            skip=hist.skip,
        )

    def history_points(self, step_s: float, default: int) -> int:
        """``periods`` seasons of points (at least ``default``)."""
        check_step(step_s)
        return max(default, math.ceil(self.periods * self.period_s / step_s))
