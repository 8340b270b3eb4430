"""Simple exponential smoothing of the level, tuned for the autoscaler's horizon, with a safety margin.

Why this model exists: at a 30-minute horizon the recent level dominates LLM request load (the daily cycle
moves it little in half an hour), and a single 5- or 10-minute window is noisy. Persistence copies that
noise into the forecast; an exponentially weighted level averages it out. The smoothing weight ``alpha`` is
chosen per fit, from a small grid, by the in-sample absolute error ``horizon_s`` ahead (``alpha = 1`` is
persistence, so the grid always contains the baseline).

The optional margin: the forecast ``k`` steps ahead is the level plus the ``quantile`` of the in-sample
errors of the same model ``k`` steps ahead (a split-conformal-style quantile). ``quantile = 0.5`` gives a
median-unbiased forecast; above 0.5 it leans towards over-forecasting, because for an autoscaler an
under-forecast (pods arrive after the peak) costs more than an over-forecast (a pod too many for a while).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from adapter.forecast.base import (
    DEFAULT_MAX_TRAILING_GAP,
    DEFAULT_MIN_POINTS,
    ForecastError,
    check_step,
    check_steps,
    checked,
    prepare,
)

DEFAULT_ALPHAS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
# Below this many in-sample error pairs a quantile is noise: the margin is then left out (plain level).
_MIN_ERROR_PAIRS = 10


def smoothed_levels(x: np.ndarray, alphas: np.ndarray) -> np.ndarray:
    """Exponentially smoothed levels of the finite sequence ``x`` for each alpha: shape ``(len(x), len(alphas))``.

    Row ``i`` is the level after seeing ``x[0..i]``; the level starts at ``x[0]``.
    """
    levels = np.empty((x.size, alphas.size))
    level = np.full(alphas.size, x[0])
    levels[0] = level
    for i in range(1, x.size):
        level = level + alphas * (x[i] - level)
        levels[i] = level
    return levels


def _pairs(positions: np.ndarray, lag: int) -> tuple[np.ndarray, np.ndarray]:
    """For each finite point, the compressed index of the last finite point at least ``lag`` steps earlier.

    Returns ``(targets, origins)`` as indices into the compressed (finite-only) sequence.
    """
    origins = np.searchsorted(positions, positions - lag, side="right") - 1
    ok = origins >= 0
    return np.flatnonzero(ok), origins[ok]


@dataclass(frozen=True)
class _FittedSES:
    x: np.ndarray  # finite observations, oldest first
    positions: np.ndarray  # their indices on the time grid
    levels: np.ndarray  # smoothed level after each observation (chosen alpha)
    skip: int  # trailing gap points cut by ``prepare``
    quantile: float | None
    alpha: float
    earned: bool = False

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        level = float(self.levels[-1])
        out = np.full(steps, level)
        if self.quantile is not None:
            for k in range(steps):
                targets, origins = _pairs(self.positions, k + 1 + self.skip)
                if targets.size >= _MIN_ERROR_PAIRS:
                    errors = self.x[targets] - self.levels[origins]
                    out[k] += self._margin(errors, self.x[targets] - self.x[origins])
        return checked(out, steps)

    def in_sample(self, steps: int) -> np.ndarray:
        """The plain level (no margin) at each point of the history, repeated ``steps`` ahead: ``(n, steps)`` on
        the history's grid, NaN rows at gaps (the replay ``margin.WithMargin`` needs)."""
        check_steps(steps)
        out = np.full((int(self.positions[-1]) + 1, steps), np.nan)
        out[self.positions] = self.levels[:, None]
        return out

    def _margin(self, errors: np.ndarray, persistence_errors: np.ndarray) -> float:
        """The ``quantile`` of the in-sample errors; when ``earned``, the highest quantile from ``quantile``
        down to just above the median (steps of 0.05) whose in-sample absolute error is still no worse than
        persistence's, so the margin spends only what the smoothing gained; none when nothing was gained."""
        assert self.quantile is not None
        if not self.earned or self.quantile <= 0.5:
            return float(np.quantile(errors, self.quantile))
        budget = float(np.mean(np.abs(persistence_errors)))
        q = self.quantile
        while q > 0.5 + 1e-9:
            margin = float(np.quantile(errors, q))
            if float(np.mean(np.abs(errors - margin))) <= budget:
                return margin
            q -= 0.05
        return 0.0


@dataclass(frozen=True)
class SimpleExpSmoothing:
    """Exponentially smoothed level; ``alpha`` picked per fit from ``alphas`` by the error ``horizon_s`` ahead.

    ``quantile`` (``None`` or in (0, 1)) adds the in-sample error quantile as a margin (module docstring);
    with ``earned`` (default) the margin is lowered until its in-sample absolute error is no worse than
    persistence's, and dropped when even the smallest is: an upper-quantile forecast that does not pay for
    its lower under-forecast rate with a higher WAPE than the baseline where smoothing gains nothing.
    Gaps are skipped (the level just does not move during them). Needs ``min_points`` finite points.
    """

    horizon_s: float = 1800.0
    quantile: float | None = 0.6
    earned: bool = True
    alphas: tuple[float, ...] = DEFAULT_ALPHAS
    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "ses"

    def __post_init__(self) -> None:
        if self.quantile is not None and not 0.0 < self.quantile < 1.0:
            raise ValueError(f"quantile must be None or in (0, 1), got {self.quantile!r}")
        if not self.alphas or any(not 0.0 < a <= 1.0 for a in self.alphas):
            raise ValueError(f"alphas must be a non-empty sequence in (0, 1], got {self.alphas!r}")
        if not self.horizon_s > 0:
            raise ValueError(f"horizon_s must be positive, got {self.horizon_s!r}")

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> _FittedSES:
        """Smooth with every alpha, keep the one with the smallest in-sample error ``horizon_s`` ahead."""
        check_step(step_s)
        hist = prepare(values, step_s=step_s, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap)
        positions = np.flatnonzero(np.isfinite(hist.values))
        x = hist.values[positions]
        alphas = np.asarray(self.alphas, dtype=np.float64)
        levels = smoothed_levels(x, alphas)
        lag = max(1, round(self.horizon_s / step_s))
        targets, origins = _pairs(positions, lag)
        if targets.size < _MIN_ERROR_PAIRS:
            raise ForecastError("insufficient_history", f"only {targets.size} points to tune the smoothing")
        errors = np.abs(x[targets, None] - levels[origins])
        best = int(np.argmin(errors.sum(axis=0)))
        return _FittedSES(
            x=x,
            positions=positions,
            levels=levels[:, best].copy(),
            skip=hist.skip,
            quantile=self.quantile,
            alpha=float(alphas[best]),
            earned=self.earned,
        )

    def history_points(self, step_s: float, default: int) -> int:
        """Only the recent level matters: ``default``."""
        return default
