"""Rolling-origin backtest of a model (or ``auto``) against persistence and seasonal-naive, on the same points.

The series is split in time: the first ``train_fraction`` is history only, the rest is the test period. For
every test point ``t`` the forecast issued at origin ``o = t - horizon_steps`` is scored: each model is fit on
its lookback ending at ``o`` (``history_points`` for level models, whole days for seasonal ones), forecasts
``horizon_steps`` ahead, and

- its last step is compared with the actual at ``t`` (WAPE, MAPE, bias, under-forecast rate);
- the largest value over its horizon (what the boost is computed from) feeds ``peak_recall``.

A point with a missing actual is skipped and counted (``points_skipped``), as is one with no finite history
at all. When a model cannot forecast at an origin (``ForecastError``) it is scored with what the adapter then
serves — no boost, i.e. the persistence forecast — and the reason is counted under ``fallbacks``. Every
model, baselines included, is scored on exactly the same points.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from adapter.forecast.base import Forecaster, ForecastError, as_series, check_step
from adapter.forecast.baselines import Persistence, SeasonalNaive
from adapter.forecast.metrics import summary
from adapter.forecast.registry import AUTO, get_model
from adapter.forecast.select import (
    DEFAULT_CANDIDATES,
    DEFAULT_OVER_WEIGHT,
    DEFAULT_SELECT_ORIGINS,
    DEFAULT_UNDER_WEIGHT,
    choose,
    forecast_at,
    last_value_forecast,
    score_candidates,
)

BASELINES = ("persistence", "seasonal_naive")


@dataclass(frozen=True)
class _Issued:
    """A forecast issued at one origin: the horizon path, and the ForecastError reason if it fell back."""

    path: np.ndarray
    fallback_reason: str | None


class _Forecasts:
    """Memoised forecasts of one model at each origin (each origin is fit at most once)."""

    def __init__(
        self,
        model: Forecaster,
        values: np.ndarray,
        *,
        step_s: float,
        start_ts: float,
        horizon: int,
        history: int,
    ) -> None:
        self._model = model
        self._values = values
        self._step_s = step_s
        self._start_ts = start_ts
        self._horizon = horizon
        self._history = history
        self._memo: dict[int, _Issued | None] = {}

    def at(self, origin: int) -> _Issued | None:
        """The forecast issued at ``origin``; None when there is no finite history at all."""
        if origin not in self._memo:
            self._memo[origin] = self._issue(origin)
        return self._memo[origin]

    def _issue(self, origin: int) -> _Issued | None:
        fallback = last_value_forecast(self._values[: origin + 1], self._horizon)
        if fallback is None:
            return None
        try:
            path = forecast_at(
                self._model,
                self._values,
                origin,
                step_s=self._step_s,
                start_ts=self._start_ts,
                horizon_steps=self._horizon,
                history_points=self._history,
            )
        except ForecastError as exc:
            return _Issued(fallback, exc.reason)
        return _Issued(path, None)


def _json_float(x: float) -> float | None:
    """NaN/Inf have no JSON spelling: an undefined figure is ``null``."""
    return x if math.isfinite(x) else None


def _figures(actual: np.ndarray, target: np.ndarray, peak: np.ndarray) -> dict[str, float | None]:
    return {k: _json_float(v) for k, v in summary(actual, target, peak).items()}


def _check_grid(values: np.ndarray, timestamps: np.ndarray, step_s: float) -> None:
    if values.shape != timestamps.shape:
        raise ValueError(f"values and timestamps differ in length: {values.size} vs {timestamps.size}")
    if timestamps.size >= 2:
        spacing = np.diff(timestamps)
        if not np.allclose(spacing, step_s, rtol=1e-6, atol=1e-3):
            raise ValueError(f"timestamps are not a regular grid of {step_s:g} s (resample first)")


def run_backtest(
    values: np.ndarray,
    timestamps: np.ndarray,
    *,
    step_s: float,
    horizon_steps: int,
    model: str = AUTO,
    train_fraction: float = 0.5,
    history_points: int = 120,
    progress: Callable[[int, int], None] | None = None,
    params: Mapping[str, Any] | None = None,
    candidates: Sequence[str] = DEFAULT_CANDIDATES,
    select_origins: int = DEFAULT_SELECT_ORIGINS,
    under_weight: float = DEFAULT_UNDER_WEIGHT,
    over_weight: float = DEFAULT_OVER_WEIGHT,
    seasonal_period_s: float = 86_400.0,
    include_points: bool = False,
) -> dict[str, Any]:
    """Backtest ``model`` (a registry name, or ``"auto"``) on a regular series; returns a JSON-ready dict.

    ``values[i]`` is the load at ``timestamps[i]`` (unix seconds, spacing ``step_s``; NaN = gap). ``params``
    go to ``get_model`` (for ``auto``: a mapping name -> params per candidate). ``progress(done, total)`` is
    called after every origin. Keys: ``model``, ``step_s``, ``horizon_steps``, ``horizon_s``,
    ``history_points``, ``train_fraction``, ``test_start_ts``, ``test_end_ts``, ``points_tested``,
    ``points_skipped``, ``skipped``, the five figures of ``metrics.summary`` (null when undefined),
    ``fallbacks``, ``baselines`` (``persistence`` and ``seasonal_naive``, each with the same figures and
    ``fallbacks``), for ``auto`` also ``candidates``, ``selected`` (times each was chosen) and the loss weights,
    and with ``include_points`` a ``points`` table (timestamp, actual, forecast and baselines per point).

    Raises ``ValueError`` for an irregular grid, bad arguments, an unknown model, or no test point.
    """
    check_step(step_s)
    series = as_series(values)
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    _check_grid(series, ts, step_s)
    if horizon_steps < 1:
        raise ValueError(f"horizon_steps must be >= 1, got {horizon_steps}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    if history_points < 2:
        raise ValueError(f"history_points must be >= 2, got {history_points}")
    n = series.size
    h = horizon_steps
    test_start = max(h, math.ceil(n * train_fraction))
    if test_start > n - 1:
        raise ValueError(f"no test point: {n} points, train fraction {train_fraction}, horizon {h} steps")
    start_ts = float(ts[0])

    def forecasts_of(m: Forecaster) -> _Forecasts:
        return _Forecasts(m, series, step_s=step_s, start_ts=start_ts, horizon=h, history=history_points)

    auto = model == AUTO
    selected: Counter[str] = Counter()
    issue: Callable[[int], _Issued | None]
    if auto:
        if not candidates:
            raise ValueError("auto needs at least one candidate model")
        cand_params: Mapping[str, Any] = params or {}
        cand = {c: forecasts_of(get_model(c, **dict(cand_params.get(c, {})))) for c in candidates}
        issue = partial(
            _issue_auto,
            cand,
            series,
            h=h,
            select_origins=select_origins,
            order=list(candidates),
            under_weight=under_weight,
            over_weight=over_weight,
            selected=selected,
        )
    else:
        issue = forecasts_of(get_model(model, **dict(params or {}))).at
    baselines = {
        "persistence": forecasts_of(Persistence()),
        "seasonal_naive": forecasts_of(SeasonalNaive(period_s=seasonal_period_s)),
    }

    targets = range(test_start, n)
    total = len(targets)
    actual: list[float] = []
    chosen_target: list[float] = []
    chosen_peak: list[float] = []
    point_ts: list[float] = []
    base_target: dict[str, list[float]] = {b: [] for b in BASELINES}
    base_peak: dict[str, list[float]] = {b: [] for b in BASELINES}
    fallbacks: Counter[str] = Counter()
    base_fallbacks: dict[str, Counter[str]] = {b: Counter() for b in BASELINES}
    skipped: Counter[str] = Counter()

    for done, t in enumerate(targets, start=1):
        origin = t - h
        if not math.isfinite(series[t]):
            skipped["nan_target"] += 1
        else:
            issued = issue(origin)
            base = {b: f.at(origin) for b, f in baselines.items()}
            if issued is None or any(v is None for v in base.values()):
                skipped["no_history"] += 1
            else:
                actual.append(float(series[t]))
                point_ts.append(float(ts[t]))
                chosen_target.append(float(issued.path[-1]))
                chosen_peak.append(float(issued.path.max()))
                if issued.fallback_reason:
                    fallbacks[issued.fallback_reason] += 1
                for b, f in base.items():
                    assert f is not None
                    base_target[b].append(float(f.path[-1]))
                    base_peak[b].append(float(f.path.max()))
                    if f.fallback_reason:
                        base_fallbacks[b][f.fallback_reason] += 1
        if progress is not None:
            progress(done, total)

    a = np.asarray(actual)
    result: dict[str, Any] = {
        "model": model,
        "params": dict(params or {}),
        "step_s": step_s,
        "horizon_steps": h,
        "horizon_s": h * step_s,
        "history_points": history_points,
        "train_fraction": train_fraction,
        "test_start_ts": float(ts[test_start]),
        "test_end_ts": float(ts[-1]),
        "points_tested": len(actual),
        "points_skipped": sum(skipped.values()),
        "skipped": dict(skipped),
        **_figures(a, np.asarray(chosen_target), np.asarray(chosen_peak)),
        "fallbacks": dict(fallbacks),
        "baselines": {
            b: {
                **_figures(a, np.asarray(base_target[b]), np.asarray(base_peak[b])),
                "fallbacks": dict(base_fallbacks[b]),
            }
            for b in BASELINES
        },
    }
    if auto:
        result.update(
            candidates=list(candidates),
            selected=dict(selected),
            select_origins=select_origins,
            under_weight=under_weight,
            over_weight=over_weight,
        )
    if include_points:
        result["points"] = {
            "timestamp": point_ts,
            "actual": actual,
            "forecast": chosen_target,
            **{b: base_target[b] for b in BASELINES},
        }
    return result


def _issue_auto(
    cand: Mapping[str, _Forecasts],
    series: np.ndarray,
    origin: int,
    *,
    h: int,
    select_origins: int,
    order: list[str],
    under_weight: float,
    over_weight: float,
    selected: Counter[str],
) -> _Issued | None:
    """What ``auto`` serves at ``origin``: select on the ``select_origins`` latest origins whose horizon has
    fully happened by ``origin`` (no look-ahead), then issue the winner's forecast. Falls back to the first
    candidate when nothing can be scored yet (as the adapter does on ``insufficient_history``)."""
    rows: list[np.ndarray] = []
    paths: dict[str, list[np.ndarray]] = {c: [] for c in order}
    for o in range(max(0, origin - h - select_origins + 1), origin - h + 1):
        actual = series[o + 1 : o + 1 + h]
        issued = {c: f.at(o) for c, f in cand.items()}
        if not np.isfinite(actual).any() or any(v is None for v in issued.values()):
            continue
        rows.append(actual)
        for c, v in issued.items():
            assert v is not None
            paths[c].append(v.path)
    if rows:
        scores = score_candidates(
            np.vstack(rows),
            {c: np.vstack(p) for c, p in paths.items()},
            under_weight=under_weight,
            over_weight=over_weight,
        )
        name = choose(scores, order)
    else:
        name = order[0]
    issued_now = cand[name].at(origin)
    if issued_now is not None:
        selected[name] += 1
    return issued_now
