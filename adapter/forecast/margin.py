"""The earned margin: a piece any model that can replay its own past forecasts can wear.

Why: for an autoscaler an under-forecast (pods arrive after the peak) costs more than an over-forecast (a pod
too many for a while), so a forecast a little above the median beats a point forecast -- as long as the
margin costs less accuracy than the model gained over persistence. And a model's gain measured on the points
it was fit to is optimistic: on a random walk, where persistence is the best forecast there is, a fitted
model still "wins" in-sample by chance. So both what the model adds and the margin are paid for with
evidence, per fit and per step ahead ``k``, from the in-sample errors of the model and of persistence at the
same origins (``gain = |persistence error| - |model error|``, whose mean has a standard error for errors that
overlap ``k`` steps, i.e. ``k`` times fewer independent origins):

1. Shrink towards persistence: the forecast is ``last + w * (model - last)`` with ``w = max(0, 1 - 1/t^2)``,
   ``t`` the t-statistic of the mean gain (0 when the model does not gain). This is the plug-in estimate of
   the mean-square-optimal factor ``theta^2 / (theta^2 + se^2)`` by which to scale a noisy estimate
   ``theta`` (``theta^2`` estimated unbiasedly by ``mean^2 - se^2``): the model's departure from persistence
   is kept in proportion to how clearly it has paid off.
2. The margin: the ``quantile`` of the shrunk model's in-sample errors ``k`` steps ahead (split-conformal
   style), or the next lower one in steps of 0.05 down to just above the median, the highest whose extra
   in-sample absolute error fits within the *lower confidence bound* of the shrunk model's gain,
   ``mean(gain) - z * SE(gain)`` (``z = 1.645``: one-sided 95 %). A margin that *lowers* the in-sample error
   is credited nothing (it would be a drift fitted to the history). No significant gain, no margin.
3. With ``under_gap`` (default None: off), the margin widens when needed: it is raised, if it is
   not already, to the shrunk model's in-sample error quantile at ``1 - u + under_gap``, where ``u`` is
   persistence's in-sample under-forecast rate at the same origins, so the forecast under-forecasts the
   history ``under_gap`` less often than persistence did. Near the median this costs little absolute error (the
   median is where the absolute error is flat), and it is what the under-forecast rate needs on a load that
   drifts up (persistence then under-forecasts more than half the time, and a margin earned from a small gain
   may not reach that far).

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


def check_margin_params(quantile: float | None, z: float, under_gap: float | None = None) -> None:
    """Raise ``ValueError`` unless ``quantile`` is None or in (0.5, 1), ``z`` is finite and >= 0 and ``under_gap``
    is None or in [0, 0.5)."""
    if quantile is not None and not 0.5 < quantile < 1.0:
        raise ValueError(f"quantile must be None or in (0.5, 1), got {quantile!r}")
    if not (math.isfinite(z) and z >= 0):
        raise ValueError(f"z must be a finite number >= 0, got {z!r}")
    if under_gap is not None and not 0.0 <= under_gap < 0.5:
        raise ValueError(f"under_gap must be None or in [0, 0.5), got {under_gap!r}")


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
    earned = float(np.mean(gain)) - z * _se_of_mean(gain, lead)
    # No significant gain, no margin -- even one that would *lower* the in-sample error: that margin is a
    # drift fitted to the history (noise on a random walk), not something the model earned over persistence.
    if not earned > 0:
        return 0.0
    mae = float(np.mean(np.abs(e)))
    q = quantile
    while q > 0.5 + 1e-9:
        margin = float(np.quantile(e, q))
        if margin > 0 and float(np.mean(np.abs(e - margin))) - mae <= earned:
            return margin
        q -= _Q_STEP
    return 0.0


def under_floor(errors: np.ndarray, persistence_errors: np.ndarray, *, gap: float) -> float:
    """The smallest margin (never below 0) at which the in-sample under-forecast rate of ``errors`` (actual minus
    forecast) is ``gap`` below persistence's at the same origins: their quantile at ``1 - u + gap``, ``u`` the
    share of persistence's errors above 0; 0.0 with fewer than ``MIN_ERROR_PAIRS`` pairs."""
    ok = np.isfinite(errors) & np.isfinite(persistence_errors)
    if int(ok.sum()) < MIN_ERROR_PAIRS:
        return 0.0
    u = float(np.mean(persistence_errors[ok] > 0))
    q = min(max(1.0 - u + gap, 0.0), 1.0)
    return max(float(np.quantile(errors[ok], q)), 0.0)


def shrink_weight(errors: np.ndarray, persistence_errors: np.ndarray, *, lead: int) -> float:
    """How far to trust the model over persistence ``lead`` steps ahead, in [0, 1] (module docstring):
    ``max(0, 1 - 1/t^2)`` with ``t`` the t-statistic of its mean in-sample gain; 1 when there are fewer than
    ``MIN_ERROR_PAIRS`` pairs to judge by (the model's own forecast, as without this wrapper)."""
    ok = np.isfinite(errors) & np.isfinite(persistence_errors)
    if int(ok.sum()) < MIN_ERROR_PAIRS:
        return 1.0
    gain = np.abs(persistence_errors[ok]) - np.abs(errors[ok])
    mean = float(np.mean(gain))
    if not mean > 0:
        return 0.0
    se = _se_of_mean(gain, lead)
    return 1.0 if se == 0 else max(0.0, 1.0 - (se / mean) ** 2)


@dataclass(frozen=True)
class Plan:
    """Per step ahead: ``weight`` of the model's departure from persistence and the ``margin`` added."""

    weight: np.ndarray
    margin: np.ndarray


@dataclass(frozen=True)
class WithMargin:
    """A fitted base model, shrunk towards persistence by its evidence and wearing its earned margin:
    ``forecast[k] = last + weight[k] * (base[k] - last) + margin[k]`` (``last`` = the last observation).

    ``values`` is the prepared history the base was fit on (it ends with a finite point) and ``skip`` the
    trailing gap ``prepare`` cut, so step ``k`` of the forecast is ``k + 1 + skip`` steps after ``values[-1]``.
    """

    base: Replaying
    values: np.ndarray
    skip: int
    quantile: float
    z: float = DEFAULT_Z
    under_gap: float | None = None

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        plan = self.plan(steps)
        last = float(self.values[-1])
        return checked(last + plan.weight * (self.base.forecast(steps) - last) + plan.margin, steps)

    def plan(self, steps: int) -> Plan:
        """The weight and the margin at each of ``steps`` steps ahead, from the in-sample replay."""
        check_steps(steps)
        total = steps + self.skip
        errors = lead_errors(self.values, self.base.in_sample(total))
        persistence = lead_errors(self.values, np.repeat(self.values[:, None], total, axis=1))
        weight = np.ones(steps)
        margin = np.zeros(steps)
        for k in range(steps):
            lead = k + 1 + self.skip
            e, pe = errors[:, lead - 1], persistence[:, lead - 1]
            weight[k] = shrink_weight(e, pe, lead=lead)
            # The shrunk model's own errors: persistence's, moved ``weight`` of the way to the model's.
            shrunk = pe - weight[k] * (pe - e)
            margin[k] = earned_margin(shrunk, pe, lead=lead, quantile=self.quantile, z=self.z)
            if self.under_gap is not None:
                margin[k] = max(margin[k], under_floor(shrunk, pe, gap=self.under_gap))
        return Plan(weight=weight, margin=margin)
