"""What the simulator tests share: the request-queue fleet's physics and the catalog calibrated for it.

The shipped catalog's composite reads vLLM's ITL P99, which only the token-level engines export. Tests of the
request-queue fleet (``--engine queue``) read the composite ``calibrate --simulate --engine queue`` proposes for
``PHYSICS`` on the shared trace (knee 34.25 req/s per pod, safe point 29.27): the embedded catalog with that
composite, its latency term on the e2e P99 (``queue_catalog_doc``; ``queue_catalog_file`` for the CLI).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from adapter.catalog import parse_catalog
from adapter.sim.config import FleetConfig

EMBEDDED = Path(__file__).resolve().parents[2] / "adapter" / "catalog.yaml"
QUEUE_COMPOSITE: dict[str, Any] = {
    "help": "0.4 x GPU P90/95.95 + 0.3 x queue/8 + 0.3 x (e2e P99 - 0.2567)/(0.483 - 0.2567) (request queue)",
    "terms": [
        {"metric": "gpu_utilization_p90", "weight": 0.4, "target": 95.95, "flat": True},
        {"metric": "inference_queue_depth", "weight": 0.3, "target": 8},
        {"metric": "inference_latency_p99_seconds", "weight": 0.3, "target": 0.483, "idle": 0.2567,
         "when_missing": "idle"},
    ],
    "objects": "mean",
}  # fmt: skip


def queue_catalog_doc() -> dict[str, Any]:
    """The embedded catalog with the request-queue fleet's composite (a new document)."""
    doc = copy.deepcopy(yaml.safe_load(EMBEDDED.read_text(encoding="utf-8")))
    doc["composites"]["llm_composite_load"] = copy.deepcopy(QUEUE_COMPOSITE)
    return doc


def queue_catalog_file(directory: Path) -> Path:
    """``queue_catalog_doc`` written to ``directory`` (for ``simulate --engine queue --catalog FILE``)."""
    path = directory / "queue-catalog.yaml"
    path.write_text(yaml.safe_dump(queue_catalog_doc(), sort_keys=False), encoding="utf-8")
    return path


CATALOG = parse_catalog(queue_catalog_doc())
# The simulator's default physics: 40 req/s per pod, 0.12 s light-load service (P99 0.40 s idle, 0.61 s at a
# full batch), so a pod meets a 0.8 s SLO up to its capacity and queues beyond it.
PHYSICS = FleetConfig(capacity_rps=40.0, base_service_s=0.12, substep_s=0.12)
