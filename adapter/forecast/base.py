"""The forecasting seam: ``Forecaster.fit(values) -> Fitted``, ``Fitted.forecast(steps)``, and ``ForecastError``.

Every model in this package follows the same contract, so the adapter's background refresher, the model
selection and the backtest treat them alike:

- ``values`` is the load on a regular grid (one point per ``step_s`` seconds, oldest first); NaN marks a
  gap (no data). A gap is never filled with invented load: models drop or mask it.
- ``start_ts`` is the unix time of ``values[0]`` so that seasonal models know the time of day.
- A model that cannot give a trustworthy answer raises ``ForecastError`` with a short ``reason``; it never
  returns NaN or Inf. Forecasts are clipped at zero because a request rate cannot be negative.

The helpers below hold the rules every model shares (minimum history, trailing gaps, output checks) so a
model module only contains its own numerics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

# Fewer finite points than this and no model is asked to fit: at a 5-minute step 30 points is 2.5 h.
DEFAULT_MIN_POINTS = 30
# A few missed scrapes at the end of the history are tolerated (the forecast is then issued from the last
# real observation and shifted so that ``forecast[0]`` is still "one step after the end"); a longer silence
# means the data is stale and the forecast is refused.
DEFAULT_MAX_TRAILING_GAP = 3


class ForecastError(Exception):
    """ "Cannot forecast": ``reason`` is a short machine-readable token, ``detail`` a human sentence.

    Reasons used in this package: ``insufficient_history`` (too few finite points, or not enough days for a
    seasonal model), ``stale_history`` (too many missing points at the end), ``seasonal_gap`` (the value one
    season ago is missing), ``fit_failed`` (solver error or non-convergence), ``non_finite`` (the model
    produced NaN/Inf).
    """

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


class Fitted(Protocol):
    """A fitted model. ``forecast(steps)`` returns ``steps`` finite, non-negative values.

    ``forecast(steps)[k]`` is the load expected ``k + 1`` steps after the last point of the history given to
    ``fit``. ``steps < 1`` raises ``ValueError``; a non-finite result raises ``ForecastError("non_finite")``.
    """

    def forecast(self, steps: int) -> np.ndarray: ...


class Forecaster(Protocol):
    """A forecasting model, cheap to construct, stateless between fits (safe to share across threads).

    ``fit`` raises ``ForecastError`` when it cannot give a trustworthy model (see the module docstring).
    ``history_points(step_s, default)`` is how many trailing points the caller should pass to ``fit``:
    ``default`` for models that only need the recent level, more for models that need whole days.
    """

    @property
    def name(self) -> str:
        """The registry name of the model (read-only so frozen dataclasses satisfy the protocol)."""
        ...

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> Fitted: ...

    def history_points(self, step_s: float, default: int) -> int: ...


def as_series(values: np.ndarray) -> np.ndarray:
    """``values`` as a new 1-D float64 array with every non-finite entry (NaN, ±Inf) turned into NaN.

    Raises ``ValueError`` for anything that is not one-dimensional.
    """
    arr = np.array(values, dtype=np.float64, copy=True)
    if arr.ndim != 1:
        raise ValueError(f"values must be one-dimensional, got shape {arr.shape}")
    arr[~np.isfinite(arr)] = np.nan
    return arr


def check_step(step_s: float) -> None:
    """Raise ``ValueError`` unless ``step_s`` is a positive finite number of seconds."""
    if not (np.isfinite(step_s) and step_s > 0):
        raise ValueError(f"step_s must be a positive number of seconds, got {step_s!r}")


def check_steps(steps: int) -> None:
    """Raise ``ValueError`` unless ``steps`` is an integer >= 1."""
    if isinstance(steps, bool) or not isinstance(steps, (int, np.integer)) or steps < 1:
        raise ValueError(f"steps must be an integer >= 1, got {steps!r}")


@dataclass(frozen=True)
class History:
    """A checked history: ``values`` ends at its last finite point; ``skip`` trailing gap points were cut.

    A model fits ``values`` and must forecast ``skip`` extra steps, dropping the first ``skip`` of them, so
    that the caller's ``forecast(steps)[0]`` still means "one step after the end of what the caller passed".
    """

    values: np.ndarray
    skip: int
    finite: int


def prepare(
    values: np.ndarray,
    *,
    step_s: float,
    min_points: int = DEFAULT_MIN_POINTS,
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP,
) -> History:
    """Validate a history and cut its trailing gap: the checks every model runs first.

    Raises ``ForecastError("insufficient_history")`` with fewer than ``min_points`` finite points and
    ``ForecastError("stale_history")`` when more than ``max_trailing_gap`` points at the end are missing.
    """
    check_step(step_s)
    arr = as_series(values)
    finite_idx = np.flatnonzero(np.isfinite(arr))
    if finite_idx.size < min_points:
        raise ForecastError("insufficient_history", f"{finite_idx.size} finite points, at least {min_points} needed")
    last = int(finite_idx[-1])
    skip = arr.size - 1 - last
    if skip > max_trailing_gap:
        raise ForecastError(
            "stale_history", f"the last {skip} points are missing (at most {max_trailing_gap} tolerated)"
        )
    return History(values=arr[: last + 1], skip=skip, finite=int(finite_idx.size))


def checked(forecast: np.ndarray, steps: int) -> np.ndarray:
    """The last word on every model's output: ``steps`` finite values, clipped at zero.

    Raises ``ForecastError("non_finite")`` if any value is NaN/Inf: a broken forecast must degrade the
    boost, never reach the HPA.
    """
    out = np.asarray(forecast, dtype=np.float64).reshape(-1)
    if out.size != steps:
        raise ForecastError("fit_failed", f"model returned {out.size} values for {steps} steps")
    if not np.all(np.isfinite(out)):
        raise ForecastError("non_finite", "the model produced NaN or Inf")
    # A request rate cannot be negative; a differenced model extrapolating a fall can cross zero.
    return np.maximum(out, 0.0)
