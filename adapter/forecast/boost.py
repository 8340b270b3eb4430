"""The forecast boost: how much bigger the coming peak is than now.

``boost = clamp(max(max(forecast over the horizon) / current load, 1 + rise), 1, max_boost)``. ``rise`` is the
upper-quantile part: how much the load rose within one lead time (``rise_quantile``) over the history the
model was fitted on, so a workload whose load jumps gets headroom for the jumps a point forecast cannot see,
and a smooth one none. It never lowers a metric (the HPA's own scale-down stabilisation handles falling
load) and every doubt degrades it to exactly 1.0 with a reason the adapter can expose and count.

The boosted composite is the composite at ``boost`` times the load (``adapter.aggregate.at_load``), so the
HPA, which settles where the served value is 1.0, buys ``boost`` times the pods.
"""

from __future__ import annotations

import math

import numpy as np

# A boost b buys b times the pods (``adapter.aggregate.at_load``), so the bound is the most pods a forecast
# may add: at most twice what the reactive composite asks for. The boosts a cold start needs are below it
# (shared trace: mean 1.1); bursts of 2-3x that decay within minutes reach it (docs/forecasting.md "The boost's
# bound"; measured in docs/results.md).
DEFAULT_MAX_BOOST = 2.0

# The rise quantile a catalog without ``forecast.rise_quantile`` gets: cross-validated on the shared trace
# (``benchmarks/rise_quantile_cv.py`` picks it on week 1; week 2 is the held-out check).
DEFAULT_RISE_QUANTILE = 0.9


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
