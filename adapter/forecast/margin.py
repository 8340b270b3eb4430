"""The earned upper-quantile margin, as a piece any model that can replay its own past forecasts can wear.

Why a margin: for an autoscaler an under-forecast (pods arrive after the peak) costs more than an
over-forecast (a pod too many for a while), so a forecast a little above the median beats a point forecast --
as long as the margin does not cost more accuracy than the model gained over persistence.

The rule, per fit and per step ahead ``k`` (split-conformal style: the model's own in-sample errors):

- the candidates are the ``quantile`` of the errors ``k`` steps ahead and the quantiles below it in steps of
  0.05, down to just above the median;
- the budget is the model's in-sample mean absolute error plus the *lower confidence bound* of its mean gain
  over persistence on the same origins: ``mean(gain) - z * SE(gain)``, ``gain = |persistence error| - |model
  error|``, with the standard error of a mean of errors that overlap ``k`` steps (``k`` times fewer independent
  origins). ``z = 1.645`` is the one-sided 95 % bound: the margin spends only the part of the gain that is
  unlikely to be noise (an in-sample gain is optimistic: the model was fit on the same points);
- the margin is the highest positive candidate whose in-sample mean absolute error fits the budget, else none.

So where the model does not clearly beat persistence, it serves its own forecast without a margin.

The contract a base model's ``Fitted`` adds (``Replaying``): ``in_sample(steps)`` is what the fitted model
would have forecast at each point of its prepared history (``base.prepare``'s ``values``), ``steps`` ahead,
with the fitted parameters: an ``(n, steps)`` array on that grid, row ``i`` issued at point ``i``, NaN rows
where no forecast could be issued (a gap).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from adapter.forecast.base import Fitted, check_steps, checked

# Below this many in-sample error pairs at a step ahead a quantile is noise: no margin at that step.
MIN_ERROR_PAIRS = 10
# One-sided 95 % normal bound: the conventional "significant" gain, not fitted to any trace.
DEFAULT_Z = 1.645
DEFAULT_QUANTILE = 0.6
_Q_STEP = 0.05


class Replaying(Fitted, Protocol):
    """A fitted model that can replay its forecasts over its own history (see the module docstring)."""

    def in_sample(self, steps: int) -> np.ndarray: ...


def check_margin_params(quantile: float | None, z: float) -> None:
    """Raise ``ValueError`` unless ``quantile`` is None or in (0.5, 1) and ``z`` is finite and >= 0."""
    if quantile is not None and not 0.5 < quantile < 1.0:
        raise ValueError(f"quantile must be None or in (0.5, 1), got {quantile!r}")
    if not (math.isfinite(z) and z >= 0):
        raise ValueError(f"z must be a finite number >= 0, got {z!r}")


def lead_errors(values: np.ndarray, paths: np.ndarray) -> np.ndarray:
    """``actual - forecast`` for every origin (row ``i``, issued at ``values[i]``) and step ahead (column
    ``k``: ``values[i + k + 1]``); NaN where either is unknown or beyond the end of ``values``."""
    n, steps = paths.shape
    actual = np.full((n, steps), np.nan)
    for k in range(min(steps, n - 1)):
        actual[: n - 1 - k, k] = values[k + 1 :]
    return np.asarray(actual - paths)


def _se_of_mean(d: np.ndarray, overlap: int) -> float:
    """Standard error of ``mean(d)`` when each ``d`` overlaps the next ``overlap`` (steps ahead) ones."""
    return float(np.std(d, ddof=1)) * math.sqrt(overlap / d.size)


def earned_margin(
    errors: np.ndarray, persistence_errors: np.ndarray, *, lead: int, quantile: float, z: float = DEFAULT_Z
) -> float:
    """The margin ``lead`` steps ahead (module docstring) from the in-sample errors of the model and of
    persistence at the same origins (pairs with a NaN are ignored); 0.0 when none is earned (or fewer than
    ``MIN_ERROR_PAIRS`` pairs)."""
    ok = np.isfinite(errors) & np.isfinite(persistence_errors)
    e, pe = errors[ok], persistence_errors[ok]
    if e.size < MIN_ERROR_PAIRS:
        return 0.0
    gain = np.abs(pe) - np.abs(e)
    budget = float(np.mean(np.abs(e))) + float(np.mean(gain)) - z * _se_of_mean(gain, lead)
    q = quantile
    while q > 0.5 + 1e-9:
        margin = float(np.quantile(e, q))
        if margin > 0 and float(np.mean(np.abs(e - margin))) <= budget:
            return margin
        q -= _Q_STEP
    return 0.0


@dataclass(frozen=True)
class WithMargin:
    """A fitted base model wearing its earned margin: ``forecast(steps) = base + margins(steps)``.

    ``values`` is the prepared history the base was fit on (it ends with a finite point) and ``skip`` the
    trailing gap ``prepare`` cut, so step ``k`` of the forecast is ``k + 1 + skip`` steps after ``values[-1]``.
    """

    base: Replaying
    values: np.ndarray
    skip: int
    quantile: float
    z: float = DEFAULT_Z

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        return checked(self.base.forecast(steps) + self.margins(steps), steps)

    def margins(self, steps: int) -> np.ndarray:
        """The margin added at each of ``steps`` steps ahead (each >= 0)."""
        check_steps(steps)
        total = steps + self.skip
        errors = lead_errors(self.values, self.base.in_sample(total))
        persistence = lead_errors(self.values, np.repeat(self.values[:, None], total, axis=1))
        out = np.zeros(steps)
        for k in range(steps):
            lead = k + 1 + self.skip
            out[k] = earned_margin(
                errors[:, lead - 1], persistence[:, lead - 1], lead=lead, quantile=self.quantile, z=self.z
            )
        return out
