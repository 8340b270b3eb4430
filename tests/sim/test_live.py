"""``simulate --live``: the compressed catalog, the HPA's reads, the replay check, and one closed-loop run
against a real Prometheus and the real adapter (``python -m adapter serve``).

The closed-loop test runs 20 simulated minutes at 40x (about 40 s); the 5-hour run is a benchmark
(``benchmarks/simulate_report.py --live``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from adapter.catalog import duration_seconds, parse_catalog
from adapter.demo.live import (
    LiveOptions,
    _count_at_most,
    catalog_document,
    pod_infos,
    pods_metric_path,
    replay,
    run_live,
    scaled_catalog,
)
from adapter.hpa.proposals import MetricReading
from adapter.hpa.spec import HPASpec, load_hpa
from adapter.sim.fleet import Fleet, PodPhase
from adapter.sim.policies import build_policy
from adapter.sim.simulate import SimulationConfig, SimulationError, SyncRecord, run_policy
from adapter.sim.trace import ScaledTrace, synthetic_trace
from tests.support.sim import CATALOG, PHYSICS

REPO = Path(__file__).resolve().parents[2]


def design_hpa() -> HPASpec:
    return load_hpa(REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml")


def test_scaled_catalog_keeps_simulated_time() -> None:
    doc = catalog_document(None)
    live = scaled_catalog(doc, speed=20.0, scrape_interval_s=0.5)
    catalog = parse_catalog(live)
    latency = catalog.metrics["inference_latency_p99_seconds"]
    assert latency.window == "6000ms"  # 2m / 20
    assert catalog.forecast is not None
    assert catalog.forecast.step_s == pytest.approx(15.0)  # 5m / 20
    assert duration_seconds(str(catalog.forecast.load.window)) == pytest.approx(15.0)
    assert catalog.store is not None  # the value store refreshes on the simulated clock too
    assert (catalog.store.refresh_s, catalog.store.max_staleness_s, catalog.store.idle_s) == pytest.approx(
        (0.75, 1.5, 180.0)
    )  # 15s, 30s, 1h / 20
    assert doc["metrics"]["inference_latency_p99_seconds"]["window"] == "2m"  # the input is not modified
    with pytest.raises(SimulationError, match="four scrapes"):
        scaled_catalog(doc, speed=200.0, scrape_interval_s=0.5)  # 2m / 200 = 0.6 s: under 4 scrapes


def test_pods_path_is_the_hpa_clients() -> None:
    # kubernetes/metrics pkg/client/custom_metrics/versioned_client.go: GetForObjects with name "*".
    assert pods_metric_path("llm", "llm_composite_load") == (
        "/apis/custom.metrics.k8s.io/v1beta2/namespaces/llm/pods/%2A/llm_composite_load"
    )


def test_pod_infos_as_the_api_holds_them() -> None:
    cfg = replace(PHYSICS, load_delay_s=(100.0, 100.0))
    fleet = Fleet(cfg, replicas=2)
    fleet.set_replicas(3, 0.0)  # one pod loading
    fleet.advance(1.0, 10.0)
    fleet.set_replicas(2, 1.0)  # the loading pod goes at once
    fleet.set_replicas(1, 1.0)  # a ready pod drains
    snap = fleet.snapshot()
    infos = {p.name: p for p in pod_infos(snap, 4000)}
    for pod in snap.pods:
        info = infos[pod.name]
        assert info.phase == "Running" and info.requests_milli == {"cpu": 4000}
        assert info.ready == (pod.phase is PodPhase.READY)
        assert info.deleted == (pod.phase is PodPhase.TERMINATING)
    assert sum(i.deleted for i in infos.values()) == 1


def test_slo_count_from_buckets() -> None:
    cum = [10.0, 20.0, 40.0, 50.0] + [60.0] * 17  # le = 0.3, 0.5, 0.8, 1.0, ...
    assert _count_at_most(cum, 60.0, 0.8) == 40.0  # a bucket bound: exact
    assert _count_at_most(cum, 60.0, 0.9) == pytest.approx(45.0)  # linear inside (0.8, 1.0]
    assert _count_at_most(cum, 60.0, 10_000.0) == 60.0


def _offline_records() -> tuple[HPASpec, tuple[SyncRecord, ...]]:
    trace = ScaledTrace(synthetic_trace(days=1), peak_rps=24 * 40.0)
    policy = build_policy("composite", design_hpa(), CATALOG)
    config = SimulationConfig(fleet=PHYSICS, start_s=8 * 3600.0, duration_s=3 * 3600.0, record_syncs=True)
    run = run_policy(policy, trace, config, CATALOG)
    assert run.summary["scale_events"]  # something to replay
    return policy.hpa, run.syncs


def test_replay_reproduces_recorded_decisions() -> None:
    spec, records = _offline_records()
    result = replay(spec, records)
    assert result.matches
    assert list(result.decisions) == [r.desired for r in records]


def test_replay_detects_a_decision_that_was_not_the_models() -> None:
    spec, records = _offline_records()
    i = next(k for k, r in enumerate(records) if r.desired != r.spec_replicas)
    tampered = list(records)
    tampered[i] = replace(records[i], desired=records[i].desired + 1)
    assert replay(spec, tampered).mismatches[0] == i
    # A fleet that did not apply a decision shows up at the next sync (its replica count is not the model's).
    unapplied = list(records)
    unapplied[i + 1] = replace(records[i + 1], spec_replicas=records[i].spec_replicas)
    assert i + 1 in replay(spec, unapplied).mismatches


def test_replay_feeds_only_recorded_values() -> None:
    spec, records = _offline_records()
    # Doubling every value read must change decisions: the replay uses the readings, nothing else.
    doubled = [
        replace(
            r,
            readings=tuple(MetricReading.pods({k: 2 * v for k, v in (m.pod_values or {}).items()}) for m in r.readings),
        )
        for r in records
    ]
    assert not replay(spec, doubled).matches


@pytest.mark.binary("prometheus")
def test_closed_loop_against_the_real_adapter() -> None:
    """20 simulated minutes at 40x with too few pods at the start: the HPA reads the composite from the
    real adapter over HTTP, scales the fleet up, and a fresh model replaying what it read decides the same
    at every sync."""
    trace = ScaledTrace(synthetic_trace(days=1), peak_rps=16 * 40.0)
    policy = build_policy("composite", design_hpa(), CATALOG)
    config = SimulationConfig(fleet=PHYSICS, start_s=12 * 3600.0, duration_s=20 * 60.0, initial_replicas=3)
    live = run_live(policy, trace, config, LiveOptions(speed=40.0, scrape_interval_s=0.5))
    assert len(live.records) == 80
    assert live.replay.matches, live.replay.mismatches
    desired = live.sync_desired
    assert desired[0] == 3 and desired.max() > 6  # 3 pods cannot carry ~15 pods' worth of load
    assert live.summary["scale_ups"]
    # After the first scrapes every read succeeded and named only pods the fleet has had. (A pod deleted
    # a moment ago may still be answered for: Prometheus holds its last scrape, as in a cluster, and the
    # controller keeps such items in the average.)
    assert live.read_errors <= 2
    ever = {p.name for rec in live.records for p in rec.pods}
    for rec in live.records[4:]:
        values = rec.readings[0].pod_values or {}
        assert values and set(values) <= ever
        assert all(v >= 0 for v in values.values())
    usage = live.sync_usage[np.isfinite(live.sync_usage)]
    assert usage.max() > 1.0  # the overload was seen through Prometheus and the adapter
