"""The embedded catalog reads about 1.0 at the safe point of each named engine profile (issue "Right on a real
vLLM": within +-10 %, no recalibration), so a user who applies the example HPA without calibrating gets a sane
fleet.

The composite is read the way ``simulate`` reads it: token-level engines at a steady per-pod load, vLLM's TTFT/ITL
histograms observed over the catalog's window, ``histogram_quantile(0.99)`` over vLLM's bucket bounds, the server's
``aggregate.fuse``. The safe point is ``calibrate``'s: the knee (the largest load at which TTFT P99 <= 2 s and ITL
P99 <= 100 ms hold) over the HPA's tolerance band, ``1 + 0.1 / (1 - flat share)``.
"""

from __future__ import annotations

import numpy as np
import pytest

from adapter.catalog import load_catalog
from adapter.sim.config import Deployment
from adapter.sim.mix import DEFAULT_MIX, mix
from adapter.sim.observer import Observer
from adapter.sim.profiles import PROFILES
from adapter.sim.readings import CpuModel, pod_values
from adapter.sim.simulate import latency_window
from adapter.sim.slo import DEFAULT_SLO, parse_slo
from adapter.sim.tokenfleet import TokenEngine, TokenFleet

HPA_TOLERANCE = 0.1  # the HPA controller's default --horizontal-pod-autoscaler-tolerance
PODS = 4


def composite_at(engine: TokenEngine, per_pod_rps: float, minutes: int = 8) -> float:
    """The embedded catalog's ``llm_composite_load``, averaged over the pods and the last half of ``minutes`` of a
    steady ``per_pod_rps`` on each of ``PODS`` ready pods."""
    catalog = load_catalog(None)
    config = engine.fleet_config(deployment=Deployment(), load_delay_s=(0.0, 0.0), drain_timeout_s=120.0, seed=0)
    end = minutes * 60.0
    fleet = TokenFleet(engine, config, replicas=PODS, start=0.0, end=end, families=True)
    observer = Observer(
        fleet, latency_window_s=latency_window(catalog), cpu=CpuModel(), sync_period_s=15.0, seed=0, deployment="d"
    )
    readings: list[float] = []
    while fleet.now < end - 1e-9:
        view = observer.view(fleet.now)
        if fleet.now >= end / 2:
            readings.extend(pod_values("llm_composite_load", view, catalog).values())
        fleet.advance(fleet.now + 15.0, per_pod_rps * PODS)
    assert readings, "no composite read"
    return float(np.mean(readings))


def safe_point(engine: TokenEngine) -> float:
    flat = load_catalog(None).boost_flat_share
    return engine.knee() / (1.0 + HPA_TOLERANCE / (1.0 - flat))


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_the_embedded_composite_reads_one_at_each_profiles_safe_point(name: str) -> None:
    engine = TokenEngine(PROFILES[name], mix(DEFAULT_MIX), parse_slo(DEFAULT_SLO))
    safe = safe_point(engine)
    assert composite_at(engine, safe) == pytest.approx(1.0, abs=0.1)
    # It follows load: well below 1 at a third of the safe load, above 1 past the knee (the HPA then adds pods).
    assert composite_at(engine, safe / 3) < 0.8
    assert composite_at(engine, engine.knee() * 1.05) > 1.0
