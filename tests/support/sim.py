"""What the simulator tests share: the shipped catalog and one fleet's physics."""

from __future__ import annotations

from adapter.catalog import load_catalog
from adapter.sim.fleet import FleetConfig

CATALOG = load_catalog(None)
# The simulator's default physics: 40 req/s per pod, 0.12 s light-load service (P99 0.40 s idle, 0.61 s at a
# full batch), so a pod meets a 0.8 s SLO up to its capacity and queues beyond it.
PHYSICS = FleetConfig(capacity_rps=40.0, base_service_s=0.12, substep_s=0.12)
