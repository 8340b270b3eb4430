"""Token-level engine pods on a compressed clock: ``speed`` simulated seconds per wall second.

A big model's knee is about one request/s per pod: a load staircase through it, scraped in wall time, would need
an hour before each load bin holds the hundreds of requests ``calibrate`` judges a 1 % tail on. ``CompressedPods``
advances the fleet ``speed`` times faster than ``FleetRunner``'s wall time, so the scraped counters climb ``speed``
times faster: ``rate()`` reads ``speed`` x the per-pod request and token rates, while every latency the histograms
observe (TTFT, ITL, e2e) and every gauge (running, waiting, KV usage) is the engine's own. Everything ``calibrate``
judges scales with the load (the requests, those over a bound, the tokens), so its knee in scraped units is
``speed`` x the engine's: the test divides by ``speed``.
"""

from __future__ import annotations

from adapter.demo.tokenpods import TokenPods
from adapter.sim.config import FleetConfig
from adapter.sim.tokenfleet import TokenEngine


class CompressedPods(TokenPods):
    """``TokenPods`` whose ``advance(dt, rate)`` runs ``dt x speed`` simulated seconds at ``rate`` (per simulated
    second)."""

    def __init__(self, engine: TokenEngine, config: FleetConfig, *, replicas: int, speed: float) -> None:
        if not speed > 0:
            raise ValueError("speed must be positive")
        super().__init__(engine, config, replicas=replicas, now=0.0)
        self.speed = speed

    def advance(self, dt: float, arrival_rate: float) -> None:
        super().advance(dt * self.speed, arrival_rate)
