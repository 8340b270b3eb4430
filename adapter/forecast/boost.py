"""The forecast boost: how much bigger the coming peak is than now, as a factor on the composite metric.

``boost = clamp(max(max(forecast over the horizon) / current load, 1 + rise), 1, max_boost)``. ``rise`` is the
upper-quantile part: how much the load rose within one lead time (``rise_quantile``) over the history the
model was fitted on, so a workload whose load jumps gets headroom for the jumps a point forecast cannot see,
and a smooth one none. It never lowers a metric (the HPA's own scale-down stabilisation handles falling
load) and every doubt degrades it to exactly 1.0 with a reason the adapter can expose and count.
"""

from __future__ import annotations

import math

import numpy as np

# The composite is concave in per-pod load below its safe point: the GPU term (0.4 of it) reads near 1
# whenever a pod is busy, so the HPA, which settles where composite x boost = 1, buys about ``b`` times the
# pods for a boost ``b`` up to ~1.3, about twice the pods at 1.5, and pins the fleet at maxReplicas once
# ``b`` nears 1 / 0.4 = 2.5 (README "Calibrate", measured). 1.5 bounds that; the boosts a cold start needs
# are below it (the shared trace and the calibrated fleets decide the same with 3).
DEFAULT_MAX_BOOST = 1.5


# Below this many (origin, lead window) pairs a quantile of the rises is noise: no rise term.
MIN_RISE_PAIRS = 10


def rise_quantile(history: np.ndarray, lead_steps: int, quantile: float) -> float | None:
    """The ``quantile``, over every point of ``history`` (oldest first, NaN = no data), of the rise to the
    peak of the next ``lead_steps`` points: ``max(x[t+1 .. t+lead]) / x[t] - 1``, floored at 0. Origins
    that are not positive, and windows that hold a NaN, are skipped; None when fewer than
    ``MIN_RISE_PAIRS`` remain. Raises ``ValueError`` for ``lead_steps < 1`` or a quantile outside [0, 1]."""
    if lead_steps < 1:
        raise ValueError(f"lead_steps must be >= 1, got {lead_steps!r}")
    if not 0.0 <= quantile <= 1.0:
        raise ValueError(f"quantile must be in [0, 1], got {quantile!r}")
    x = np.asarray(history, dtype=np.float64).reshape(-1)
    if x.size <= lead_steps:
        return None
    now = x[:-lead_steps]
    ahead = np.full(now.shape, -np.inf)
    for j in range(1, lead_steps + 1):
        ahead = np.maximum(ahead, x[j : x.size - lead_steps + j])  # NaN propagates: the window is skipped
    ok = np.isfinite(now) & np.isfinite(ahead) & (now > 0)
    if int(ok.sum()) < MIN_RISE_PAIRS:
        return None
    return max(float(np.quantile(ahead[ok] / now[ok] - 1.0, quantile)), 0.0)


def boost_factor(
    current_load: float, forecast: np.ndarray | None, max_boost: float = DEFAULT_MAX_BOOST, rise: float = 0.0
) -> tuple[float, str]:
    """``(boost, reason)``: reason ``"ok"``, or why the boost degraded to 1.0. ``rise`` (>= 0, see
    ``rise_quantile``) sets a floor of ``1 + rise`` under an ``"ok"`` boost.

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
    ratio = max(float(values.max()) / current_load, 1.0 + rise if math.isfinite(rise) and rise > 0 else 1.0)
    return min(max(ratio, 1.0), max_boost), "ok"


def boosted(value: float, boost: float) -> float:
    """``value * boost``; a boost that is not a finite number >= 1 is ignored (the value is returned as is)."""
    if not math.isfinite(boost) or boost < 1.0:
        return value
    return value * boost
