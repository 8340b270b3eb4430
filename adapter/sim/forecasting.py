"""The forecast boost inside the what-if simulator, computed as the server computes it.

``BoostTracker`` rebuilds the server's load history from what the simulated pods export: the catalog's load is
demand, ``rate(vllm:request_success_total) + deriv(vllm:num_requests_waiting) + deriv(vllm:num_requests_running)``
per pod (completions plus the growth of the requests in the engine), so the tracker reads the fleet's own
completions and, at every sync, each serving pod's waiting and running requests (``observe``), never the
trace's true arrivals. It refits the catalog's model with ``adapter.forecast_service.fit_history`` (the server's
function) once per forecast step and returns its boost. ``warmup_history`` supplies what a server that has
been running for a while would already hold: the trace's demand over the minutes before the replay, so the
boost works from the first sync instead of only after the model's whole history span (150 min for 30
five-minute points: a 1-hour replay would never boost).
"""

from __future__ import annotations

import bisect
import math
from types import SimpleNamespace
from typing import cast

import numpy as np
import numpy.typing as npt

from adapter.catalog import ForecastDef
from adapter.forecast_service import ForecastService, ForecastState, fit_history
from adapter.sim.lifecycle import MINUTE_S, SimulationError
from adapter.sim.tokenfleet import TokenFleet
from adapter.sim.trace import ScaledTrace

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
    """The forecast boost as the server computes it, from the fleet's own completions and in-flight requests.

    The server's load history is ``sum over pods of (rate(vllm:request_success_total[window]) +
    deriv((waiting + running)[window]))`` on the forecast step grid; here, for each step ``T``: completions over
    ``[T - window, T)`` / window from ``prehistory`` (requests per minute before ``start``) followed by the run's
    completions, plus, per pod, the least-squares slope (PromQL's ``deriv``) of its waiting + running requests
    over the samples ``observe`` recorded in ``(T - window, T]`` (a pod with fewer than two samples there adds
    nothing, as the catalog's query reads it; the prehistory has none: a fleet that kept up). NaN where no full
    window of completions exists. Once per new step the history ending at the step is refit with
    ``adapter.forecast_service.fit_history`` and its ``boost`` is used until the next.
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
        # What observe recorded: per sample time, the serving pods' ids and their waiting + running requests.
        self._obs_t: list[float] = []
        self._obs_ids: list[npt.NDArray[np.int64]] = []
        self._obs_v: list[_F64] = []
        self._growth: dict[float, float] = {}

    def observe(self, now: float, ids: npt.NDArray[np.int64], in_flight: _F64) -> None:
        """Record, at ``now``, each serving pod's waiting + running requests (what its gauges read). A pod that
        served at the previous sample and is gone now was deleted and drained: it reads 0 at ``now`` (the
        simulator books a drain at once; a real pod keeps exporting while its in-flight requests finish)."""
        ids = np.asarray(ids, dtype=np.int64)
        values = np.asarray(in_flight, dtype=np.float64)
        if self._obs_ids:
            gone = np.setdiff1d(self._obs_ids[-1], ids, assume_unique=True)
            ids, values = np.concatenate((ids, gone)), np.concatenate((values, np.zeros(gone.size)))
        self._obs_t.append(now)
        self._obs_ids.append(ids)
        self._obs_v.append(values)

    def growth(self, step_ts: float) -> float:
        """Sum over pods of ``deriv`` of their in-flight requests over ``(step_ts - window, step_ts]`` (req/s)."""
        cached = self._growth.get(step_ts)
        if cached is not None:
            return cached
        window = self.window_min * MINUTE_S
        lo = bisect.bisect_right(self._obs_t, step_ts - window + _EPS)
        hi = bisect.bisect_right(self._obs_t, step_ts + _EPS)
        out = 0.0
        if hi - lo >= 2:
            ids = np.concatenate(self._obs_ids[lo:hi])
            v = np.concatenate(self._obs_v[lo:hi])
            times = np.asarray(self._obs_t[lo:hi]) - step_ts
            t = np.repeat(times, [a.size for a in self._obs_ids[lo:hi]])
            _, pod = np.unique(ids, return_inverse=True)
            n = np.bincount(pod).astype(np.float64)
            st, sv = np.bincount(pod, t), np.bincount(pod, v)
            stt, stv = np.bincount(pod, t * t), np.bincount(pod, t * v)
            den = n * stt - st * st
            ok = (n >= 2) & (den > _EPS)
            out = float(np.sum((n[ok] * stv[ok] - st[ok] * sv[ok]) / den[ok]))
        if hi < len(self._obs_t):  # later samples exist: this step's window is complete, keep it
            self._growth[step_ts] = out
        return out

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
        if self._obs_t:
            for i in np.flatnonzero(ok & (steps > self._obs_t[0] + _EPS)):
                values[i] += self.growth(float(steps[i]))
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


def in_flight(fleet: TokenFleet, now: float) -> tuple[npt.NDArray[np.int64], _F64]:
    """The serving pods' ids and what their gauges read: ``vllm:num_requests_waiting`` +
    ``vllm:num_requests_running`` (a pod that is still loading its model exports nothing)."""
    ready = fleet.ready_mask(now)
    values: _F64 = (fleet.queue_depth + fleet.running)[ready]
    return fleet.ids[ready], values
