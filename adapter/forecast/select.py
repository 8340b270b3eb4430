"""``auto``: pick a model per workload by a small rolling-origin backtest on its own recent history.

At each of the last ``origins`` points whose next ``horizon_steps`` values are known, every candidate is fit
on the history up to that point and forecasts the horizon; the forecasts are scored against what happened
with an asymmetric WAPE that weighs under-forecasting ``under_weight`` : ``over_weight`` (default 3 : 1),
because a late scale-up hurts latency while an early one only costs a pod for a while (prior art: Crane's
asymmetric MAPE, gocrane/crane ``pkg/prediction/accuracy/accuracy.go``, landscape.md [R41]; own code). The
lowest score wins; ties go to the earlier candidate (simplest first).

A candidate that cannot forecast at an origin is scored with what the adapter would then serve: no boost,
i.e. the persistence forecast. Cost: ``origins x len(candidates)`` fits, a few milliseconds per workload with
the default candidates (see ``benchmarks/forecast_cost.py``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from adapter.forecast.base import Forecaster, ForecastError, as_series, check_step
from adapter.forecast.metrics import asymmetric_wape
from adapter.forecast.registry import get_model

# The cheap models (ARIMA costs ~50x more per fit and, on the shared trace, does not beat them).
DEFAULT_CANDIDATES: tuple[str, ...] = ("persistence", "ses", "ar", "fourier_ar")
DEFAULT_SELECT_ORIGINS = 72
DEFAULT_UNDER_WEIGHT = 3.0
DEFAULT_OVER_WEIGHT = 1.0


@dataclass(frozen=True)
class Selection:
    """The chosen model ``name``; ``scores`` = asymmetric WAPE per candidate (NaN if it could not be scored);
    ``origins`` = how many backtest origins were scored; ``failures`` = origins where a candidate could not
    forecast (scored as persistence there)."""

    name: str
    scores: dict[str, float]
    origins: int
    failures: dict[str, int] = field(default_factory=dict)


def last_value_forecast(window: np.ndarray, steps: int) -> np.ndarray | None:
    """The degraded forecast: the last finite value of ``window`` repeated ``steps`` times (None if none)."""
    finite = window[np.isfinite(window)]
    return np.full(steps, float(finite[-1])) if finite.size else None


def forecast_at(
    model: Forecaster,
    values: np.ndarray,
    origin: int,
    *,
    step_s: float,
    start_ts: float,
    horizon_steps: int,
    history_points: int,
) -> np.ndarray:
    """Fit ``model`` on the history ending at index ``origin`` (the model's lookback) and forecast the horizon.

    ``values`` is the whole series with ``values[0]`` at ``start_ts``. Raises ``ForecastError`` as the model.
    """
    lookback = model.history_points(step_s, history_points)
    lo = max(0, origin - lookback + 1)
    fitted = model.fit(values[lo : origin + 1], step_s=step_s, start_ts=start_ts + lo * step_s)
    return fitted.forecast(horizon_steps)


def score_candidates(
    actuals: np.ndarray,
    forecasts: Mapping[str, np.ndarray],
    *,
    under_weight: float = DEFAULT_UNDER_WEIGHT,
    over_weight: float = DEFAULT_OVER_WEIGHT,
) -> dict[str, float]:
    """Asymmetric WAPE of each candidate's forecasts (same shape as ``actuals``; NaN actuals are ignored)."""
    return {
        name: asymmetric_wape(actuals, f, under_weight=under_weight, over_weight=over_weight)
        for name, f in forecasts.items()
    }


def choose(scores: Mapping[str, float], order: Sequence[str]) -> str:
    """The candidate with the lowest finite score; ties and all-NaN go to the first in ``order``."""
    best = order[0]
    best_score = math.inf
    for name in order:
        score = scores.get(name, math.nan)
        if math.isfinite(score) and score < best_score:
            best, best_score = name, score
    return best


def select_model(
    values: np.ndarray,
    *,
    step_s: float,
    start_ts: float,
    horizon_steps: int,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    params: Mapping[str, Mapping[str, Any]] | None = None,
    history_points: int = 120,
    origins: int = DEFAULT_SELECT_ORIGINS,
    under_weight: float = DEFAULT_UNDER_WEIGHT,
    over_weight: float = DEFAULT_OVER_WEIGHT,
) -> Selection:
    """Choose among ``candidates`` (model names; ``params[name]`` are passed to ``get_model``) for this series.

    ``values`` must reach back far enough for the hungriest candidate's lookback plus ``origins +
    horizon_steps`` points. Raises ``ForecastError("insufficient_history")`` when no origin can be scored
    and ``ValueError`` for an empty candidate list or an unknown model.
    """
    check_step(step_s)
    if not candidates:
        raise ValueError("select_model needs at least one candidate")
    if horizon_steps < 1 or origins < 1:
        raise ValueError("horizon_steps and origins must be >= 1")
    series = as_series(values)
    models = {name: get_model(name, **dict((params or {}).get(name, {}))) for name in candidates}
    n = series.size
    last_origin = n - 1 - horizon_steps
    origin_list = [o for o in range(max(0, last_origin - origins + 1), last_origin + 1)]
    rows: list[np.ndarray] = []
    per_model: dict[str, list[np.ndarray]] = {name: [] for name in candidates}
    failures = dict.fromkeys(candidates, 0)
    for origin in origin_list:
        actual = series[origin + 1 : origin + 1 + horizon_steps]
        fallback = last_value_forecast(series[: origin + 1], horizon_steps)
        if fallback is None or not np.isfinite(actual).any():
            continue
        rows.append(actual)
        for name, model in models.items():
            try:
                f = forecast_at(
                    model,
                    series,
                    origin,
                    step_s=step_s,
                    start_ts=start_ts,
                    horizon_steps=horizon_steps,
                    history_points=history_points,
                )
            except ForecastError:
                failures[name] += 1
                f = fallback
            per_model[name].append(f)
    if not rows:
        raise ForecastError("insufficient_history", "no backtest origin with a known future to score models on")
    actuals = np.vstack(rows)
    scores = score_candidates(
        actuals,
        {name: np.vstack(fs) for name, fs in per_model.items()},
        under_weight=under_weight,
        over_weight=over_weight,
    )
    return Selection(name=choose(scores, list(candidates)), scores=scores, origins=len(rows), failures=failures)
