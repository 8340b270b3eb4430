"""The simulated fleet in wall time: ``FleetRunner`` advances a fleet on a clock, fed by a trace.

``tick(wall)`` is the deterministic step; ``start()`` runs it on a background thread. ``render()`` is the
fleet's /metrics body (``adapter.demo.render``) as of the last tick, ``status()`` what the demo's status line shows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from adapter.demo.render import HpaStatus, render_metrics
from adapter.sim.snapshot import FleetSnapshot, PodPhase
from adapter.sim.trace import RateSample, ScaledTrace, TraceClock

if TYPE_CHECKING:
    from adapter.demo.tokenpods import TokenPods

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunnerStatus:
    """What the demo's live status line shows."""

    sim_time_s: float
    rate: RateSample
    desired: int
    ready: int
    loading: int
    terminating: int
    waiting: float
    running: float
    dropped: float
    ttft_p99_s: float  # the worst ready pod's TTFT and ITL P99 now
    itl_p99_s: float


class FleetRunner:
    """Advances ``TokenPods`` on a clock, fed by a ``ScaledTrace`` played through a ``TraceClock``.

    Thread-safe: every method takes the runner's lock. ``tick(wall)`` advances the fleet to ``wall`` (seconds on
    the clock's time base: ``monotonic``, which the demo and ``simulate --live`` make the simulated clock) at the
    trace's rate and mix of the interval's start.
    """

    def __init__(
        self,
        fleet: TokenPods,
        trace: ScaledTrace,
        clock: TraceClock,
        *,
        tick_s: float = 0.25,
        exported_nodes: Iterable[str] = (),
        monotonic: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if not tick_s > 0:
            raise ValueError("tick_s must be positive")
        self.fleet = fleet
        self.trace = trace
        self.clock = clock
        self.tick_s = tick_s
        self.exported_nodes = frozenset(exported_nodes)
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._last_wall = clock.wall_start
        # Unix time at fleet time 0, so kube_pod_deletion_timestamp reads like a real one.
        self._epoch = wall_clock() - (monotonic() - clock.wall_start) - fleet.now
        self._rate = trace.rate_at(clock.sim_time(clock.wall_start))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._hpa: HpaStatus | None = None
        self.failures = 0

    def tick(self, wall: float) -> None:
        """Advance the fleet from the last tick to ``wall`` at the trace rate of the interval's start."""
        with self._lock:
            dt = wall - self._last_wall
            if dt <= 0:
                return
            sim = self.clock.sim_time(self._last_wall)
            self._rate = self.trace.rate_at(sim)
            self.fleet.set_mix(self.trace.mix_at(sim))  # the window's own mix, if the trace has one
            self.fleet.advance(dt, self._rate.rate)
            self._last_wall = wall

    def set_replicas(self, n: int) -> None:
        """Scale the fleet now (at the fleet's current clock)."""
        with self._lock:
            self.fleet.set_replicas(n, self.fleet.now)

    def set_hpa_status(self, hpa: HpaStatus | None) -> None:
        """What the HPA driving the fleet last reported (None: no HPA, no series)."""
        with self._lock:
            self._hpa = hpa

    def snapshot(self) -> FleetSnapshot:
        """The fleet as of the last tick."""
        with self._lock:
            return self.fleet.snapshot()

    def render(self) -> str:
        """The /metrics body as of the last tick."""
        with self._lock:
            snap = self.fleet.snapshot()
            engines = self.fleet.engine_counters()
            epoch = self._epoch
            hpa = self._hpa
        return render_metrics(snap, epoch=epoch, exported_nodes=self.exported_nodes, hpa=hpa, engines=engines)

    def status(self) -> RunnerStatus:
        """Summary for a one-line status display."""
        with self._lock:
            snap = self.fleet.snapshot()
            rate = self._rate
            sim = self.clock.sim_time(self._last_wall)
            ttft, itl = self.fleet.latency_p99()
        serving = [p for p in snap.pods if p.serving]
        return RunnerStatus(
            sim_time_s=sim,
            rate=rate,
            desired=snap.desired_replicas,
            ready=snap.count(PodPhase.READY),
            loading=snap.count(PodPhase.LOADING),
            terminating=snap.count(PodPhase.TERMINATING),
            waiting=sum(p.waiting for p in serving),
            running=sum(p.running for p in serving),
            dropped=snap.dropped,
            ttft_p99_s=ttft,
            itl_p99_s=itl,
        )

    def start(self) -> None:
        """Tick every ``tick_s`` seconds on a daemon thread until ``stop()``; a no-op if running."""
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="fleet-runner", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                self.tick(self._monotonic())
            except Exception:
                # A failing tick must not kill the exporter silently: log, count, keep serving.
                self.failures += 1
                log.exception("fleet tick failed")
