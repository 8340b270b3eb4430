"""The simulator's forecaster reads demand as the catalog's load query does: completions plus the growth of the
requests in the engine, estimated from what the simulated pods export, never from the trace's true arrivals.

Four pods serve below capacity for two hours, then demand outruns the fleet for 40 minutes (no HPA: the fleet
stays at four pods) and falls back. While demand outruns capacity, completions are capped at the fleet's
capacity; the estimate must follow the true arrivals (the ledger's) and the completion rate must not.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from adapter.catalog import load_catalog
from adapter.sim.config import Deployment
from adapter.sim.forecasting import BoostTracker, in_flight
from adapter.sim.lifecycle import MINUTE_S
from adapter.sim.mix import AZURE_CONVERSATION
from adapter.sim.profiles import LLAMA3_8B_H100
from adapter.sim.slo import parse_slo
from adapter.sim.tokenfleet import TokenEngine, TokenFleet

PODS = 4
SYNC_S = 15.0
CALM_END, SURGE_END, END = 7200.0, 7200.0 + 2400.0, 7200.0 + 2400.0 + 1800.0


def _fleet() -> tuple[TokenFleet, float]:
    """A fleet of ``PODS`` pods that queues without limit (no request is dropped) and its capacity (req/s)."""
    engine = TokenEngine(LLAMA3_8B_H100, AZURE_CONVERSATION, parse_slo("ttft=2s,itl=100ms"))
    config = engine.fleet_config(deployment=Deployment(), load_delay_s=(90.0, 90.0), drain_timeout_s=120.0, seed=0)
    config = dataclasses.replace(config, max_queue=1e9)
    fleet = TokenFleet(engine, config, replicas=PODS, start=0.0, end=END)
    return fleet, PODS * engine.model().saturation_rps


def _rate(t: float, capacity: float) -> float:
    return 1.3 * capacity if CALM_END <= t < SURGE_END else 0.7 * capacity


def test_the_demand_estimate_tracks_arrivals_where_completions_are_capped() -> None:
    fleet, capacity = _fleet()
    spec = load_catalog(None).forecast
    assert spec is not None
    tracker = BoostTracker(spec, start=0.0)
    now = 0.0
    while now < END - 1e-9:
        tracker.observe(now, *in_flight(fleet, now))
        fleet.advance(now + SYNC_S, _rate(now, capacity))
        now += SYNC_S
    tracker.observe(now, *in_flight(fleet, now))
    assert fleet.ledger.dropped.sum() == 0.0
    window = int(spec.load.window_seconds // MINUTE_S)
    steps = np.arange(3 * spec.step_s, END + 1.0, spec.step_s)
    estimate = np.array([tracker.history(float(t), fleet.ledger.completions)[-1] for t in steps])
    minute = (steps // MINUTE_S).astype(int)
    arrivals = np.array([fleet.ledger.arrivals[m - window : m].sum() for m in minute]) / (window * MINUTE_S)
    completed = np.array([fleet.ledger.completions[m - window : m].sum() for m in minute]) / (window * MINUTE_S)

    # Steps whose whole window lies in the surge (the first one lets the batch fill): demand outruns capacity.
    surge = (steps - spec.load.window_seconds >= CALM_END + spec.step_s) & (steps <= SURGE_END)
    calm = steps <= CALM_END
    assert surge.sum() >= 6 and calm.sum() >= 20
    np.testing.assert_allclose(arrivals[surge], 1.3 * capacity, rtol=1e-6)
    np.testing.assert_allclose(estimate[surge], arrivals[surge], rtol=0.03)
    assert np.all(completed[surge] <= capacity * (1 + 1e-6))  # capped at what the fleet can serve...
    assert np.all(completed[surge] < 0.8 * arrivals[surge])  # ...so completions miss the excess
    np.testing.assert_allclose(estimate[calm], arrivals[calm], rtol=0.03)  # below capacity both agree
    # After the surge the backlog drains at capacity: completions overstate demand, the estimate does not.
    after = steps >= SURGE_END + 2 * spec.step_s
    draining = after & (completed > 1.2 * arrivals)
    assert draining.sum() >= 2
    assert np.all(np.abs(estimate[draining] - arrivals[draining]) < 0.05 * arrivals[draining])
