"""Forecast accuracy figures, pure numpy. Every function takes aligned ``actual`` and ``forecast`` arrays.

Common rules: a pair whose actual (or forecast) is NaN is ignored — a gap in the data is not an error of
the model. A figure that is undefined on what remains (no pairs, a zero denominator, no peaks) is NaN.
"""

from __future__ import annotations

import numpy as np


def _pairs(actual: np.ndarray, forecast: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(actual, dtype=np.float64).reshape(-1)
    f = np.asarray(forecast, dtype=np.float64).reshape(-1)
    if a.shape != f.shape:
        raise ValueError(f"actual and forecast differ in length: {a.size} vs {f.size}")
    keep = np.isfinite(a) & np.isfinite(f)
    return a[keep], f[keep]


def wape(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Weighted absolute percentage error: ``sum|f - a| / sum|a|`` (a fraction, 0.12 = 12 %)."""
    a, f = _pairs(actual, forecast)
    denom = float(np.abs(a).sum())
    return float(np.abs(f - a).sum()) / denom if denom > 0 else float("nan")


def mape(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Mean absolute percentage error ``mean(|f - a| / |a|)`` over the pairs whose actual is not zero."""
    a, f = _pairs(actual, forecast)
    nonzero = a != 0
    if not nonzero.any():
        return float("nan")
    return float(np.mean(np.abs(f[nonzero] - a[nonzero]) / np.abs(a[nonzero])))


def bias(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Relative bias ``mean(f - a) / mean(a)``: positive = over-forecasting on average."""
    a, f = _pairs(actual, forecast)
    if a.size == 0 or float(a.mean()) == 0:
        return float("nan")
    return float(np.mean(f - a) / a.mean())


def under_forecast_rate(actual: np.ndarray, forecast: np.ndarray) -> float:
    """Share of the pairs where the forecast is strictly below the actual (the autoscaler was late)."""
    a, f = _pairs(actual, forecast)
    return float(np.mean(f < a)) if a.size else float("nan")


def peak_recall(actual: np.ndarray, forecast: np.ndarray, *, quantile: float = 0.9, tolerance: float = 0.9) -> float:
    """Share of the load peaks that the forecast saw coming.

    Definition: a *peak* is a point whose actual is strictly above the ``quantile`` (default P90, linear
    interpolation) of the actuals passed in (the test period). ``forecast[i]`` must be what the forecaster
    said about point ``i`` one horizon before it: the backtest passes the *largest* value of the forecast
    issued one horizon earlier (the peak over the horizon, the value the boost is computed from). A peak is
    *seen* if that forecast is at least ``tolerance`` (default 90 %) of the actual. NaN when there is no peak.
    """
    a, f = _pairs(actual, forecast)
    if a.size == 0:
        return float("nan")
    peaks = a > np.quantile(a, quantile)
    if not peaks.any():
        return float("nan")
    return float(np.mean(f[peaks] >= tolerance * a[peaks]))


def asymmetric_wape(
    actual: np.ndarray, forecast: np.ndarray, *, under_weight: float = 3.0, over_weight: float = 1.0
) -> float:
    """WAPE whose under-forecast errors weigh ``under_weight`` and over-forecast errors ``over_weight``.

    ``sum(w_i |f_i - a_i|) / sum|a_i|`` with ``w_i = under_weight`` where ``f_i < a_i``. The idea of
    amplifying under-prediction when scoring forecasters is Crane's (gocrane/crane,
    ``pkg/prediction/accuracy/accuracy.go``, an asymmetric MAPE; see shared/reference/landscape.md [R41]);
    this is our own linear, scale-free variant.
    """
    a, f = _pairs(actual, forecast)
    denom = float(np.abs(a).sum())
    if denom <= 0:
        return float("nan")
    weights = np.where(f < a, under_weight, over_weight)
    return float(np.sum(weights * np.abs(f - a))) / denom


def summary(actual: np.ndarray, forecast: np.ndarray, peak_forecast: np.ndarray) -> dict[str, float]:
    """The backtest's five figures: ``wape``, ``mape``, ``bias``, ``under_forecast_rate`` (on ``forecast``)
    and ``peak_recall`` (on ``peak_forecast``, see ``peak_recall``)."""
    return {
        "wape": wape(actual, forecast),
        "mape": mape(actual, forecast),
        "bias": bias(actual, forecast),
        "under_forecast_rate": under_forecast_rate(actual, forecast),
        "peak_recall": peak_recall(actual, peak_forecast),
    }
