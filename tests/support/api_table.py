"""The table the provider double serves in the in-process API tests (tests/api/test_inprocess_*.py)."""

from __future__ import annotations

from tests.support.provider_double import DoublePod

NS = "llm"
TS = 1_700_000_000.75  # 2023-11-14T22:13:20Z once truncated to the second, as metav1.Time marshals
# A real catalog metric of each kind: a GPU P90, an engine gauge, a windowed rate, the composite.
METRICS = ("gpu_utilization_p90", "inference_queue_depth", "inference_latency_p99_seconds", "llm_composite_load")
WINDOWS = {"inference_latency_p99_seconds": 120}
PODS = (
    DoublePod(
        NS,
        "llama-0",
        {"app": "llama", "tier": "serve"},
        {
            "gpu_utilization_p90": 0.5005,
            "inference_queue_depth": 3.0,
            "inference_latency_p99_seconds": 0.25,
            "llm_composite_load": 1.2345,
        },
    ),
    DoublePod(
        NS,
        "llama-1",
        {"app": "llama", "tier": "canary"},
        {"gpu_utilization_p90": 38.8, "inference_queue_depth": 0.0, "llm_composite_load": 0.0004},
    ),
    DoublePod(NS, "other-0", {"app": "other"}, {"gpu_utilization_p90": 12.0}),
    DoublePod("elsewhere", "llama-0", {"app": "llama"}, {"gpu_utilization_p90": 99.0}),
)
DEPLOYMENTS = {(NS, "llama"): ("llama-0", "llama-1")}
