"""What the simulator tests share: one fleet of token-level engines (the simulator's physics) and its catalog.

``ENGINE`` is ``simulate``'s default: Llama-3-8B on one H100 (``llama3-8b-h100``) serving the Azure conversation
mix under the default SLO (P99 TTFT <= 2 s, ITL <= 100 ms). One shared instance, so its fast models are built once
per test process. ``CATALOG`` is the embedded catalog, whose composite is calibrated for that engine
(tests/calibrate/test_catalog_profiles.py holds it to 1.0 at the engine's safe point).
"""

from __future__ import annotations

from typing import Any

from adapter.catalog import load_catalog
from adapter.sim.config import Deployment, FleetConfig
from adapter.sim.mix import AZURE_CONVERSATION
from adapter.sim.profiles import LLAMA3_8B_H100
from adapter.sim.simulate import SimulationConfig
from adapter.sim.slo import DEFAULT_SLO, parse_slo
from adapter.sim.tokenfleet import TokenEngine, TokenFleet

ENGINE = TokenEngine(LLAMA3_8B_H100, AZURE_CONVERSATION, parse_slo(DEFAULT_SLO))
PHYSICS: FleetConfig = ENGINE.fleet_config(
    deployment=Deployment(), load_delay_s=FleetConfig.load_delay_s, drain_timeout_s=FleetConfig.drain_timeout_s, seed=0
)
CATALOG = load_catalog(None)


def knee() -> float:
    """Requests/s per pod at which every SLO bound holds at P99 (the oracle's per-pod load)."""
    return ENGINE.knee()


def saturation() -> float:
    """Requests/s a pod of the default mix completes at most."""
    return ENGINE.model().saturation_rps


def sim_config(**kwargs: Any) -> SimulationConfig:
    """A ``SimulationConfig`` of ``ENGINE`` on ``PHYSICS`` (``fleet=`` to change the pods)."""
    return SimulationConfig(fleet=kwargs.pop("fleet", PHYSICS), engine=ENGINE, **kwargs)


def token_fleet(replicas: int, end: float, *, config: FleetConfig = PHYSICS, **kwargs: Any) -> TokenFleet:
    """A ``TokenFleet`` of ``ENGINE`` from t=0 to ``end`` (``families``, ``pool`` ... as keywords)."""
    return TokenFleet(ENGINE, config, replicas=replicas, start=0.0, end=end, **kwargs)
