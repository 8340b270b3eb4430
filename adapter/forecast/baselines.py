"""The two baselines every other model must beat: persistence and seasonal-naive (same time one season ago).

They are real models (the adapter can serve them), and the backtest scores every model against both on the
same points.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


@dataclass(frozen=True)
class _Constant:
    level: float

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        return checked(np.full(steps, self.level), steps)


@dataclass(frozen=True)
class Persistence:
    """Tomorrow looks like now: every step of the forecast is the last observed (finite) value."""

    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "persistence"

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> Fitted:
        """The last finite value; ``ForecastError`` per ``base.prepare``."""
        hist = prepare(values, step_s=step_s, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap)
        return _Constant(float(hist.values[-1]))

    def history_points(self, step_s: float, default: int) -> int:
        """Only the recent level matters: ``default``."""
        return default


@dataclass(frozen=True)
class _Seasonal:
    values: np.ndarray  # the caller's full history (trailing gap included), so indices line up with time
    period: int

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        n = self.values.size
        k = np.arange(1, steps + 1)
        # The latest index at the same phase of the season as step k: n-1+k minus whole seasons, <= n-1.
        idx = n - 1 - np.mod(-k, self.period)
        out = self.values[idx]
        if not np.all(np.isfinite(out)):
            missing = int(np.count_nonzero(~np.isfinite(out)))
            raise ForecastError("seasonal_gap", f"{missing} of the {steps} values one season ago are missing")
        return checked(out, steps)


@dataclass(frozen=True)
class SeasonalNaive:
    """Same time one season ago (default: yesterday). ``period_s`` is rounded to whole steps.

    Needs at least one full season of history (``ForecastError("insufficient_history")``); a forecast step
    whose value one season ago is missing raises ``ForecastError("seasonal_gap")`` from ``forecast``.
    """

    period_s: float = 86_400.0
    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "seasonal_naive"

    def _period(self, step_s: float) -> int:
        check_step(step_s)
        period = round(self.period_s / step_s)
        if period < 1:
            raise ValueError(f"period_s={self.period_s} is shorter than one step ({step_s} s)")
        return period

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> Fitted:
        """Remember the history; checks per ``base.prepare`` plus one full season."""
        period = self._period(step_s)
        hist = prepare(values, step_s=step_s, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap)
        full = np.concatenate([hist.values, np.full(hist.skip, np.nan)])
        if full.size < period:
            raise ForecastError("insufficient_history", f"{full.size} points, one season needs {period} at this step")
        return _Seasonal(values=full, period=period)

    def history_points(self, step_s: float, default: int) -> int:
        """At least one season of points."""
        return max(default, self._period(step_s))
