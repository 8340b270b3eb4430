"""The forecast boost inside the what-if simulator, computed as the server computes it.

``BoostTracker`` rebuilds the server's load history from the fleet's own completions, refits the catalog's
model with ``adapter.workloads.fit_history`` (the server's function) once per forecast step and returns its
boost. ``warmup_history`` supplies what a server that has been running for a while would already hold: the
trace's demand over the minutes before the replay (a fleet that kept up completed what arrived), so the
boost works from the first sync instead of only after the model's whole history span (150 min for 30
five-minute points: a 1-hour replay would never boost).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import cast

import numpy as np
import numpy.typing as npt

from adapter.catalog import ForecastDef
from adapter.sim.fluid import MINUTE_S, SimulationError
from adapter.sim.trace import ScaledTrace
from adapter.workloads import ForecastService, ForecastState, fit_history

_F64 = npt.NDArray[np.float64]
_EPS = 1e-9


def history_points(spec: ForecastDef) -> int:
    """How many points one forecast fit sees: the server's own ``ForecastService.points_needed``,
    called on an object that carries only the spec (it reads nothing else), so the two cannot drift."""
    holder = SimpleNamespace(spec=spec)
    return ForecastService.points_needed(cast(ForecastService, holder))


def history_span_s(spec: ForecastDef) -> float:
    """Seconds of load history one fit reads: its points on the step grid plus the load's rate window."""
    window = spec.load.window_seconds or 0.0
    return history_points(spec) * spec.step_s + float(window)


def warmup_history(trace: ScaledTrace, start_s: float, span_s: float) -> _F64:
    """Requests per minute for the ``span_s`` before ``start_s`` from the trace's (held) demand; NaN for
    minutes before the trace begins (the server would have no data there either)."""
    minutes = max(0, math.ceil(span_s / MINUTE_S - _EPS))
    out = np.full(minutes, np.nan)
    first = trace.trace.start_s
    for i in range(minutes):
        t = start_s - (minutes - i) * MINUTE_S
        if t >= first - _EPS:
            out[i] = trace.rate_at(t).rate * MINUTE_S
    return out


class BoostTracker:
    """The forecast boost as the server computes it, from the fleet's own completions.

    The server's load history is ``sum over pods of rate(vllm:request_success_total[window])`` on the
    forecast step grid; here: completions over ``[T - window, T)`` / window for each step ``T`` (NaN
    where no full window exists), from ``prehistory`` (requests per minute before ``start``) followed by
    the run's completions. Once per new step the history ending at the step is refit with
    ``adapter.workloads.fit_history`` and its ``boost`` is used until the next.
    """

    def __init__(self, spec: ForecastDef, start: float, prehistory: _F64 | None = None) -> None:
        window = spec.load.window_seconds
        if window is None or spec.step_s % MINUTE_S or window % MINUTE_S:
            raise SimulationError("the forecast step and load window must be whole minutes")
        self.spec = spec
        pre = np.zeros(0) if prehistory is None else np.asarray(prehistory, dtype=np.float64)
        known = np.flatnonzero(np.isfinite(pre))
        # Minutes before the first known one hold nothing the server could have read: drop them.
        self.pre = pre[known[0] :] if known.size else np.zeros(0)
        self.start = start
        self.origin = start - self.pre.size * MINUTE_S
        self.points = history_points(spec)
        self.window_min = int(window // MINUTE_S)
        self.state: ForecastState | None = None
        self.step_ts = -math.inf
        self.fits = 0
        self.reasons: dict[str, int] = {}
        self.fit_seconds = 0.0

    def history(self, step_ts: float, completions: _F64) -> _F64:
        """The load on the step grid ending at ``step_ts`` (req/s), NaN where no full window exists."""
        minutes = np.concatenate((self.pre, completions))
        known = np.isfinite(minutes)
        cs = np.concatenate(([0.0], np.cumsum(np.where(known, minutes, 0.0))))
        holes = np.concatenate(([0], np.cumsum(~known)))
        steps = step_ts - (self.points - 1 - np.arange(self.points)) * self.spec.step_s
        end = np.rint((steps - self.origin) / MINUTE_S).astype(np.int64)
        begin = end - self.window_min
        ok = (begin >= 0) & (end < cs.size)
        ok[ok] = holes[end[ok]] == holes[begin[ok]]
        values = np.full(self.points, np.nan)
        values[ok] = (cs[end[ok]] - cs[begin[ok]]) / (self.window_min * MINUTE_S)
        return values

    def boost(self, now: float, completions: _F64) -> float:
        """The boost to apply at ``now`` (refitting first when a new step has begun)."""
        step_ts = math.floor(now / self.spec.step_s) * self.spec.step_s
        if step_ts > self.step_ts and step_ts - self.window_min * MINUTE_S >= self.origin - _EPS:
            self.step_ts = step_ts
            self.state = fit_history(self.history(step_ts, completions), step_ts=step_ts, spec=self.spec)
            self.fits += 1
            self.fit_seconds += self.state.fit_seconds
            self.reasons[self.state.reason] = self.reasons.get(self.state.reason, 0) + 1
        return 1.0 if self.state is None else self.state.boost
