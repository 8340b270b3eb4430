"""``simulate --live``: the compressed catalog, the HPA's reads, the replay check, the live accounting, and a
closed-loop run against a real Prometheus and the real adapter (``python -m adapter serve``).

The closed-loop test runs 20 simulated minutes at 40x (about 40 s); the 5-hour run is a benchmark
(``benchmarks/simulate_report.py --live``).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import yaml

from adapter.catalog import duration_seconds, load_catalog, parse_catalog
from adapter.demo.autoscaler import pod_infos, pods_metric_path, replay
from adapter.demo.catalogs import catalog_document, scaled_catalog
from adapter.demo.live import LiveOptions, run_live, token_summary
from adapter.demo.live_report import compare, offline_twin
from adapter.demo.tokenpods import TokenPods
from adapter.hpa.proposals import MetricReading
from adapter.hpa.spec import HPASpec, load_hpa
from adapter.sim.config import Deployment
from adapter.sim.policies import build_policy
from adapter.sim.simulate import SimulationConfig, SimulationError, SyncRecord, run_policy
from adapter.sim.snapshot import PodPhase
from adapter.sim.trace import ScaledTrace, synthetic_trace
from tests.support.sim import CATALOG, ENGINE, PHYSICS, knee, sim_config

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
    fleet = TokenPods(ENGINE, cfg, replicas=2, now=0.0)
    fleet.set_replicas(4, 0.0)  # two pods loading
    fleet.advance(1.0, 10.0)
    fleet.set_replicas(3, 1.0)  # a loading pod goes at once
    snap = fleet.snapshot()
    infos = {p.name: p for p in pod_infos(snap, 4000)}
    assert len(infos) == 3
    for pod in snap.pods:
        info = infos[pod.name]
        assert info.phase == "Running" and info.requests_milli == {"cpu": 4000}
        assert info.ready == (pod.phase is PodPhase.READY)
        assert not info.deleted
    assert sum(i.ready for i in infos.values()) == 2


def _offline_records() -> tuple[HPASpec, tuple[SyncRecord, ...]]:
    trace = ScaledTrace(synthetic_trace(days=1), peak_rps=24 * knee())
    policy = build_policy("composite", design_hpa(), CATALOG)
    config = sim_config(start_s=8 * 3600.0, duration_s=3 * 3600.0, record_syncs=True)
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


# -- the live run's figures and the closed loop ----------------------------------------------------------------

TOKEN_FLEET = ENGINE.fleet_config(
    deployment=Deployment(name="llama-3-8b", namespace="llm", model_name=ENGINE.profile.model_name),
    load_delay_s=(90.0, 180.0),
    drain_timeout_s=120.0,
    seed=0,
)


def test_live_accounting_is_the_offline_engines() -> None:
    """The live loop's figures come from the token fleet's own ledger (``token_summary``): advanced at the same
    rates as the offline engine advances its fleet, with the same replicas, they are the offline run's figures."""
    trace = ScaledTrace(synthetic_trace(days=1), peak_rps=4 * ENGINE.knee() / 0.7)  # the knee at 10:00
    spec = replace(design_hpa(), min_replicas=4, max_replicas=4)
    policy = build_policy("composite", spec, CATALOG)
    start, duration = 6 * 3600.0, 6 * 3600.0
    config = SimulationConfig(fleet=TOKEN_FLEET, engine=ENGINE, start_s=start, duration_s=duration, initial_replicas=4)
    offline = run_policy(policy, trace, config, CATALOG)
    assert offline.summary["itl_violation_minutes"] or offline.summary["ttft_violation_minutes"]  # overloaded
    assert offline.summary["slo_violation_minutes"] < duration / 60  # and not throughout
    pods = TokenPods(ENGINE, TOKEN_FLEET, replicas=4, now=start)
    step = trace.trace.step_s
    while pods.now < start + duration - 1e-9:
        a = pods.now
        boundary = trace.trace.start_s + (math.floor((a - trace.trace.start_s) / step + 1e-9) + 1) * step
        until = min(math.floor(a / 15.0 + 1e-9) * 15.0 + 15.0, boundary, start + duration)
        pods.set_mix(trace.mix_at(a))
        pods.advance(until - a, trace.rate_at(a).rate)
    desired = np.full(offline.sync_t.size, 4, dtype=np.int64)
    live = token_summary(pods, trace, start, round(duration / 60), desired, 0, 0)
    for key in ("slo_violation_minutes", "ttft_violation_minutes", "itl_violation_minutes", "mean_replicas"):
        assert live[key] == offline.summary[key], key
    for key in ("gpu_hours", "oracle_gpu_hours", "x_oracle"):
        assert live[key] == pytest.approx(offline.summary[key], rel=1e-9), key


def _token_catalog_file(tmp_path: Path) -> Path:
    """The shipped catalog with a composite both the server and the offline engine compute:
    0.4 x GPU P90/100 (flat: busy at any load) + 0.6 x queue/8 (0 below saturation)."""
    doc = catalog_document(None)
    doc["composites"]["llm_composite_load"] = {
        "help": "0.4 x GPU P90/100 + 0.6 x queue/8 (test, token engines)",
        "terms": [
            {"metric": "gpu_utilization_p90", "weight": 0.4, "target": 100, "flat": True},
            {"metric": "inference_queue_depth", "weight": 0.6, "target": 8},
        ],
        "objects": "mean",
    }
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.binary("prometheus")
def test_closed_loop_against_the_real_adapter(tmp_path: Path) -> None:
    """20 simulated minutes at 40x of token-level vLLM engines (their vLLM families and DCGM series scraped by a
    real Prometheus, served by the real adapter) with too few pods at the start: the HPA scales them up, a fresh
    model replaying what it read decides the same at every sync, and the offline engine on the same span, the same
    physics and SLO, sees what the live run saw."""
    catalog_path = _token_catalog_file(tmp_path)
    catalog = load_catalog(catalog_path)
    trace = ScaledTrace(synthetic_trace(days=1), peak_rps=16 * ENGINE.knee())
    policy = build_policy("composite", design_hpa(), catalog)
    config = SimulationConfig(
        fleet=TOKEN_FLEET, engine=ENGINE, start_s=12 * 3600.0, duration_s=20 * 60.0, initial_replicas=3
    )
    options = LiveOptions(speed=40.0, scrape_interval_s=0.5, catalog_path=catalog_path)
    live = run_live(policy, trace, config, options)
    assert len(live.records) == 80
    assert live.replay.matches, live.replay.mismatches
    desired = live.sync_desired
    assert desired[0] == 3 and desired.max() > 6  # 3 pods cannot carry ~16 knees' worth of load
    assert live.read_errors <= 2
    ever = {p.name for rec in live.records for p in rec.pods}
    for rec in live.records[4:]:
        values = rec.readings[0].pod_values or {}
        assert values and set(values) <= ever
    assert np.nanmax(live.sync_usage) > 1.0  # the queue behind saturated engines, through Prometheus
    assert live.slo == {"ttft": 2.0, "itl": 0.1}
    assert np.isfinite(live.sync_ttft).all() and np.isfinite(live.sync_itl).all()
    assert live.sync_ttft.max() > 2.0  # the overloaded start breaks the TTFT bound ...
    assert live.summary["ttft_violation_minutes"]  # ... and the minutes count it, as offline would
    # The offline engine on the same span: measured 0.6 replicas apart on average (correlation 0.99), 13 vs 14
    # violation minutes (TTFT 9 vs 10, ITL 13 vs 14), GPU-hours 1 % apart. The live values lag by a scrape and
    # the server's windows, and the live fleet moves in clock ticks: close, not identical (the replay is).
    comparison = compare(live, offline_twin(policy, trace, config, live, catalog))
    assert comparison["replicas_mean_abs_diff"] <= 2.0
    assert comparison["replicas_correlation"] > 0.9
    for bound, counts in comparison["violation_minutes"].items():
        assert counts["offline"] > 0 and abs(counts["live"] - counts["offline"]) <= 3, bound
    assert live.summary["gpu_hours"] == pytest.approx(comparison["offline"]["gpu_hours"], rel=0.1)
