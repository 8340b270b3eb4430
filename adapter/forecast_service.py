"""The forecast service (``ForecastService``): workloads and their load forecasts, refit in the background,
served from memory.

A workload is a Deployment (or the Deployments behind an HPA's pod selector), known from the requests the
HPA makes and from the catalog, and forgotten after ``forget_after_s`` without a request. Once per new step
(default 5 min) the service pulls the workload's load history from the backend (one range query), fits the
model off the event loop, and keeps the latest ``ForecastState``. Requests only read that state: they never
wait for a fit. Every doubt degrades the boost to exactly 1 with a reason (docs/forecasting.md, "The boost").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from adapter.catalog import Catalog, ForecastDef
from adapter.errors import AdapterError
from adapter.forecast.base import ForecastError
from adapter.forecast.boost import boost_factor, rise_quantile
from adapter.forecast.registry import AUTO, get_model
from adapter.forecast.select import DEFAULT_CANDIDATES, DEFAULT_SELECT_ORIGINS, select_model
from adapter.labels import EVERYTHING
from adapter.query.client import PromClient
from adapter.query.promql import Scope, deployment_pods_regex, render
from adapter.shares import ShareCounts
from adapter.tasks import BackgroundLoop

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class WorkloadKey:
    """A namespace and the Deployments whose pods make up the workload (sorted)."""

    namespace: str
    deployments: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.namespace}/{','.join(self.deployments)}"


def deployment_of(pod: str) -> str:
    """The Deployment a pod name belongs to (``<deployment>-<hash>-<suffix>``); the name itself otherwise."""
    parts = pod.rsplit("-", 2)
    return parts[0] if len(parts) == 3 and parts[0] else pod


def key_for_pods(namespace: str, pods: Iterable[str]) -> WorkloadKey:
    return WorkloadKey(namespace, tuple(sorted({deployment_of(p) for p in pods})))


@dataclass(frozen=True)
class ForecastState:
    """The latest forecast of a workload. ``reason`` is "ok" or why the boost is 1."""

    step_ts: float  # end of the history the fit used (aligned to the step)
    current: float  # the latest finite load point (requests/s), NaN if none
    forecast: np.ndarray | None  # horizon_steps values, or None when degraded
    model: str
    reason: str
    boost: float
    fit_seconds: float = 0.0
    rise: float = 0.0  # the boost's upper-quantile floor was 1 + rise (0: none; forecast.rise_quantile)

    @property
    def peak(self) -> float | None:
        return float(self.forecast.max()) if self.forecast is not None and self.forecast.size else None


@dataclass
class _Workload:
    last_seen: float
    state: ForecastState | None = None
    fitting: bool = False
    failures: int = field(default=0)


def _at_served_horizon(model: Any, spec: ForecastDef) -> Any:
    """A model that tunes itself at a lead time (``horizon_s``, e.g. ``ses``) tunes at the one served,
    ``horizon_steps x step``, not at its built-in 30 min: the same with the default catalog (6 x 5 min), and
    still meaningful when the catalog's step is shorter (a compressed clock, a 1-minute step)."""
    if (
        dataclasses.is_dataclass(model)
        and not isinstance(model, type)
        and any(f.name == "horizon_s" for f in dataclasses.fields(model))
    ):
        return dataclasses.replace(model, horizon_s=spec.horizon_steps * spec.step_s)
    return model


def fit_history(values: np.ndarray, *, step_ts: float, spec: ForecastDef) -> ForecastState:
    """Fit the catalog's model to a history ending at ``step_ts`` and compute the boost (pure, CPU-bound)."""
    started = time.perf_counter()
    finite = values[np.isfinite(values)]
    current = float(finite[-1]) if finite.size else math.nan
    start_ts = step_ts - (values.size - 1) * spec.step_s
    model_name = spec.model
    try:
        if spec.model == AUTO:
            model_name = select_model(
                values,
                step_s=spec.step_s,
                start_ts=start_ts,
                horizon_steps=spec.horizon_steps,
                history_points=spec.history_points,
            ).name
        model = _at_served_horizon(get_model(model_name), spec)
        forecast = model.fit(values, step_s=spec.step_s, start_ts=start_ts).forecast(spec.horizon_steps)
    except ForecastError as exc:
        return ForecastState(step_ts, current, None, model_name, exc.reason, 1.0, time.perf_counter() - started)
    except Exception as exc:  # a numerics library failing in a way we did not foresee: degrade, log
        log.warning("forecast fit failed with %s: %s", type(exc).__name__, exc)
        return ForecastState(step_ts, current, None, model_name, "fit_failed", 1.0, time.perf_counter() - started)
    rise = rise_quantile(values, spec.rise_lead_steps, spec.rise_quantile) if spec.rise_quantile > 0 else None
    boost, reason = boost_factor(current, forecast, spec.max_boost, rise=rise or 0.0)
    return ForecastState(
        step_ts,
        current,
        forecast if reason == "ok" else None,
        model_name,
        reason,
        boost,
        time.perf_counter() - started,
        rise=(rise or 0.0) if reason == "ok" else 0.0,
    )


def sum_over_pods(series_ts: list[tuple[tuple[float, ...], tuple[float, ...]]], grid: np.ndarray) -> np.ndarray:
    """Sum per-pod range series onto ``grid``; a step where no pod has a finite point is a gap (NaN), never 0."""
    total = np.zeros(grid.size)
    seen = np.zeros(grid.size, dtype=bool)
    index = {float(t): i for i, t in enumerate(grid)}
    for ts, values in series_ts:
        for t, v in zip(ts, values, strict=True):
            i = index.get(float(t))
            if i is not None and math.isfinite(v):
                total[i] += v
                seen[i] = True
    total[~seen] = np.nan
    return total


class ForecastObserver(Protocol):
    """What observability.py hooks in: fits, history pulls (to score old forecasts) and failures."""

    def fitted(self, key: WorkloadKey, state: ForecastState) -> None: ...

    def history_pulled(self, key: WorkloadKey, start_ts: float, step_s: float, values: np.ndarray) -> None: ...

    def failed(self, stage: str) -> None: ...


class ForecastService:
    """Keeps one ForecastState per known workload, refreshed once per step in the background."""

    def __init__(
        self,
        spec: ForecastDef,
        catalog: Catalog,
        client: PromClient,
        clock: Callable[[], float] = time.time,
        executor: Executor | None = None,
        tick_s: float = 5.0,
        observer: ForecastObserver | None = None,
    ) -> None:
        self.spec = spec
        self.catalog = catalog
        self.client = client
        self.clock = clock
        self.tick_s = tick_s
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="forecast")
        self._owns_executor = executor is None
        self._workloads: dict[WorkloadKey, _Workload] = {}
        self._loop = BackgroundLoop("forecast-refresh", self.refresh_due, tick_s, self._loop_failed, log)
        self.observer = observer
        self.refused = 0  # new workloads not registered: a share or the cap was reached
        self.refusal = ""  # why the latest one was not
        self.shares = ShareCounts(log)
        self._by_namespace: dict[str, dict[WorkloadKey, None]] = {}  # each namespace's workloads (its share)
        for ns, dep in spec.workloads:
            key = WorkloadKey(ns, (dep,))
            self._workloads[key] = _Workload(last_seen=math.inf)
            self._by_namespace.setdefault(ns, {})[key] = None

    # -- what requests use (memory only) ------------------------------------------------------------
    def touch(self, key: WorkloadKey) -> bool:
        """Note that the HPA asked about ``key``; a new workload gets its first fit right away.

        Callers touch only workloads that exist (their pods are known to the pod source). A new workload is
        registered only within the fair shares: at most ``max_workloads_per_namespace`` per namespace, of which
        at most ``max_sets_per_namespace`` sets of several Deployments (a selector spanning Deployments would
        otherwise name one workload per subset), and ``max_workloads`` in all (at the cap, a forgotten
        workload or one of the namespace holding the most, when it holds more than this one, gives way).
        Otherwise it is not registered (False, ``refusal`` says why): it is served with boost 1 and counted
        in ``refused`` and ``shares``, so no caller can grow the forecast set (range queries, /metrics series)
        without bound, nor take another namespace's place.
        """
        w = self._workloads.get(key)
        if w is None:
            refused = self._admit(key)
            if refused is not None:
                budget, self.refusal = refused
                self.refused += 1
                self.shares.count(budget, key.namespace, self.refusal)
                return False
            self._workloads[key] = _Workload(last_seen=self.clock())
            self._by_namespace.setdefault(key.namespace, {})[key] = None
            self._loop.wake()
        elif w.last_seen != math.inf:
            w.last_seen = self.clock()
        return True

    def _admit(self, key: WorkloadKey) -> tuple[str, str] | None:
        """None when ``key`` may be registered now (after making room if that is fair), else the budget it
        exceeds (``adapter/shares.py``) and why."""
        spec = self.spec
        own = self._by_namespace.get(key.namespace, {})
        if len(own) >= spec.max_workloads_per_namespace or (
            len(key.deployments) > 1 and sum(len(k.deployments) > 1 for k in own) >= spec.max_sets_per_namespace
        ):
            self._drop_forgotten()
            own = self._by_namespace.get(key.namespace, {})
        if len(own) >= spec.max_workloads_per_namespace:
            return "forecast_workloads", (
                f"namespace {key.namespace} has {len(own)} forecast workloads, its share "
                f"(forecast.max_workloads_per_namespace); one not asked for in {spec.forget_after_s:g}s gives way"
            )
        if len(key.deployments) > 1 and sum(len(k.deployments) > 1 for k in own) >= spec.max_sets_per_namespace:
            return "forecast_sets", (
                f"namespace {key.namespace} has {spec.max_sets_per_namespace} forecast workloads of several "
                "Deployments (forecast.max_sets_per_namespace): give each HPA's pods one Deployment"
            )
        if len(self._workloads) >= spec.max_workloads:
            self._drop_forgotten()
        if len(self._workloads) >= spec.max_workloads:
            biggest = max(self._by_namespace.values(), key=len)
            movable = [k for k in biggest if self._workloads[k].last_seen != math.inf]
            if len(biggest) > len(own) + 1 and movable:
                self._forget(min(movable, key=lambda k: self._workloads[k].last_seen))
            else:
                return "forecast_workloads", f"{len(self._workloads)} workloads are forecast (forecast.max_workloads)"
        return None

    def _forget(self, key: WorkloadKey) -> None:
        del self._workloads[key]
        own = self._by_namespace.get(key.namespace)
        if own is not None:
            own.pop(key, None)
            if not own:
                del self._by_namespace[key.namespace]

    def state(self, key: WorkloadKey) -> ForecastState | None:
        w = self._workloads.get(key)
        return w.state if w else None

    def boost(self, key: WorkloadKey) -> tuple[float, str]:
        """(boost, reason) to apply now: 1 unless a fresh, healthy forecast exists."""
        st = self.state(key)
        if st is None:
            return 1.0, "pending"
        if self.clock() - st.step_ts > 2 * self.spec.step_s + self.spec.step_s:
            # The forecast was issued more than two steps before the current one: stale.
            return 1.0, "stale"
        return st.boost, st.reason

    def workloads(self) -> dict[WorkloadKey, ForecastState | None]:
        return {k: w.state for k, w in self._workloads.items()}

    # -- background ---------------------------------------------------------------------------------
    def current_step(self) -> float:
        return math.floor(self.clock() / self.spec.step_s) * self.spec.step_s

    def points_needed(self) -> int:
        """History length to pull: the catalog's ``history_points``, or more for models that need whole
        days (a daily cycle) or, with ``auto``, enough for the selection's rolling origins too."""
        spec = self.spec
        if spec.model != AUTO:
            return get_model(spec.model).history_points(spec.step_s, spec.history_points)
        lookback = max(get_model(n).history_points(spec.step_s, spec.history_points) for n in DEFAULT_CANDIDATES)
        return lookback + DEFAULT_SELECT_ORIGINS + spec.horizon_steps

    async def history(self, key: WorkloadKey, end: float) -> np.ndarray:
        """The workload's load on the step grid ending at ``end`` (one range query, summed over pods)."""
        spec = self.spec
        points = self.points_needed()
        start = end - (points - 1) * spec.step_s
        scope = Scope(key.namespace, pod_regex=deployment_pods_regex(key.deployments))
        query = render(spec.load, self.catalog, scope, EVERYTHING)
        series = await self.client.query_range(query, start, end, spec.step_s)
        grid = start + np.arange(points) * spec.step_s
        return sum_over_pods([(s.ts, s.values) for s in series], grid)

    async def refresh(self, key: WorkloadKey) -> ForecastState | None:
        """Pull history and refit one workload now (the loop calls this once per step per workload)."""
        w = self._workloads.get(key)
        if w is None or w.fitting:
            return None
        w.fitting = True
        try:
            step_ts = self.current_step()
            try:
                values = await self.history(key, step_ts)
            except AdapterError as exc:
                w.failures += 1
                if self.observer is not None:
                    self.observer.failed("history")
                log.warning("forecast history for %s unavailable: %s", key, exc.message)
                return w.state
            if self.observer is not None:
                self.observer.history_pulled(
                    key, step_ts - (values.size - 1) * self.spec.step_s, self.spec.step_s, values
                )
            loop = asyncio.get_running_loop()
            state = await loop.run_in_executor(
                self._executor, lambda: fit_history(values, step_ts=step_ts, spec=self.spec)
            )
            if w.state is None or w.state.reason != state.reason:
                log.info("forecast %s: model=%s reason=%s boost=%.3f", key, state.model, state.reason, state.boost)
            w.state = state
            if self.observer is not None:
                self.observer.fitted(key, state)
            return state
        finally:
            w.fitting = False

    def _drop_forgotten(self) -> None:
        now = self.clock()
        for key in [k for k, w in self._workloads.items() if now - w.last_seen > self.spec.forget_after_s]:
            self._forget(key)

    def _due(self) -> list[WorkloadKey]:
        step = self.current_step()
        self._drop_forgotten()
        return [k for k, w in self._workloads.items() if not w.fitting and (w.state is None or w.state.step_ts < step)]

    async def refresh_due(self) -> None:
        """Refit every workload whose forecast is older than the current step."""
        due = self._due()
        if due:
            await asyncio.gather(*(self.refresh(k) for k in due))

    def _loop_failed(self) -> None:
        if self.observer is not None:
            self.observer.failed("loop")

    @property
    def loop_failures(self) -> int:
        return self._loop.failures

    def start(self) -> None:
        self._loop.start()

    async def close(self) -> None:
        await self._loop.stop()
        if self._owns_executor:
            self._executor.shutdown(wait=False, cancel_futures=True)
