"""The forecast boost: how much bigger the coming peak is than now, as a factor on the composite metric.

``boost = clamp(max(forecast over the horizon) / current load, 1, max_boost)``. It never lowers a metric
(the HPA's own scale-down stabilisation handles falling load) and every doubt degrades it to exactly 1.0
with a reason the adapter can expose and count.
"""

from __future__ import annotations

import math

import numpy as np

DEFAULT_MAX_BOOST = 3.0


def boost_factor(
    current_load: float, forecast: np.ndarray | None, max_boost: float = DEFAULT_MAX_BOOST
) -> tuple[float, str]:
    """``(boost, reason)``: reason ``"ok"``, or why the boost degraded to 1.0.

    Degrade reasons, checked in this order: ``"no_forecast"`` (None or empty), ``"current_not_finite"``,
    ``"current_not_positive"`` (no load now: a ratio would be meaningless), ``"non_finite"`` (a NaN/Inf in
    the forecast). Raises ``ValueError`` if ``max_boost`` is not a finite number >= 1 (a settings bug).
    """
    if not (math.isfinite(max_boost) and max_boost >= 1.0):
        raise ValueError(f"max_boost must be a finite number >= 1, got {max_boost!r}")
    if forecast is None:
        return 1.0, "no_forecast"
    values = np.asarray(forecast, dtype=np.float64).reshape(-1)
    if values.size == 0:
        return 1.0, "no_forecast"
    if not math.isfinite(current_load):
        return 1.0, "current_not_finite"
    if current_load <= 0:
        return 1.0, "current_not_positive"
    if not np.all(np.isfinite(values)):
        return 1.0, "non_finite"
    ratio = float(values.max()) / current_load
    return min(max(ratio, 1.0), max_boost), "ok"


def boosted(value: float, boost: float) -> float:
    """``value * boost``; a boost that is not a finite number >= 1 is ignored (the value is returned as is)."""
    if not math.isfinite(boost) or boost < 1.0:
        return value
    return value * boost
