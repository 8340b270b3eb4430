"""How good the served forecasts were: each forecast as issued, scored once the load it forecast has come.

``ForecastAccuracy`` keeps, per workload, the forecasts issued whose horizon has not passed yet and, once a load
history covers a horizon, scores it (``score_forecast``: WAPE over the horizon, and whether the forecast's peak
fell short of the real one) into a running ``Accuracy``. ``observability.py`` exports these per workload.
Bounded: at most a horizon (plus two) pending forecasts per workload, and ``forget`` drops the workloads the
forecast service no longer keeps.
"""

from __future__ import annotations

import math
from collections.abc import Container, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from adapter.forecast.metrics import wape

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Issued:
    """A forecast as issued: ``values[k]`` is the load expected ``k + 1`` steps after ``step_ts``."""

    step_ts: float
    values: np.ndarray


@dataclass(frozen=True, slots=True)
class Score:
    """A forecast scored against the load that really came: WAPE over its horizon, and whether its peak
    (the value the boost is computed from) fell short of the real peak."""

    error: float
    under_forecast: bool


@dataclass
class Accuracy:
    """The scores of one workload's forecasts so far."""

    evaluated: int = 0
    error_sum: float = 0.0
    under: int = 0
    last_error: float = math.nan


def score_forecast(issued: Issued, step_s: float, start_ts: float, values: np.ndarray) -> Score | None:
    """Score ``issued`` against a load history on the grid ``start_ts + i * step_s``.

    ``None`` when the history cannot score it (yet): its horizon ends after the history, starts before it,
    or no point of the horizon has a finite actual (a gap is not an error of the model).
    """
    horizon = issued.values.size
    times = issued.step_ts + step_s * np.arange(1, horizon + 1)
    index = np.rint((times - start_ts) / step_s).astype(int)
    if index[0] < 0 or index[-1] >= values.size:
        return None
    actual = values[index]
    finite = np.isfinite(actual)
    if not finite.any():
        return None
    error = wape(actual, issued.values)
    if not math.isfinite(error):  # every actual was 0: WAPE undefined, the forecast cannot be judged
        return None
    return Score(error=error, under_forecast=float(issued.values.max()) < float(actual[finite].max()))


class ForecastAccuracy(Generic[K]):
    """Forecasts issued per workload ``K``, scored as load histories arrive (see the module docstring)."""

    def __init__(self) -> None:
        self._issued: dict[K, list[Issued]] = {}
        self._accuracy: dict[K, Accuracy] = {}

    def issued(self, key: K, step_ts: float, forecast: np.ndarray) -> None:
        """A forecast for the steps after ``step_ts``, to score once its horizon has passed."""
        pending = self._issued.setdefault(key, [])
        if pending and pending[-1].step_ts == step_ts:
            pending[-1] = Issued(step_ts, np.asarray(forecast, dtype=float))
        else:
            pending.append(Issued(step_ts, np.asarray(forecast, dtype=float)))
        # One forecast per step and each is scored once its horizon has passed: more pending than the
        # horizon (plus slack for a missed pull) means the old ones can no longer be scored.
        del pending[: -(forecast.size + 2)]

    def history(self, key: K, start_ts: float, step_s: float, values: np.ndarray) -> None:
        """A load history arrived: score every pending forecast of ``key`` whose horizon it now covers."""
        pending = self._issued.get(key)
        if not pending:
            return
        end_ts = start_ts + (values.size - 1) * step_s
        keep = []
        for issued in pending:
            if issued.step_ts + issued.values.size * step_s > end_ts:
                keep.append(issued)  # its horizon has not passed yet
                continue
            score = score_forecast(issued, step_s, start_ts, values)
            if score is None:
                continue  # no actual to compare with (a gap, or older than the history): dropped unscored
            acc = self._accuracy.setdefault(key, Accuracy())
            acc.evaluated += 1
            acc.error_sum += score.error
            acc.under += int(score.under_forecast)
            acc.last_error = score.error
        self._issued[key] = keep

    def get(self, key: K) -> Accuracy | None:
        return self._accuracy.get(key)

    def __len__(self) -> int:
        """How many workloads it holds anything for (pending forecasts or scores)."""
        return len(self._issued.keys() | self._accuracy.keys())

    def forget(self, known: Container[K]) -> None:
        """Drop every workload not in ``known``."""
        for gone in [k for k in self._accuracy if k not in known]:
            del self._accuracy[gone]
        for gone in [k for k in self._issued if k not in known]:
            del self._issued[gone]
