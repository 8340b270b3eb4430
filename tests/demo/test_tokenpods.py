"""The demo's token-engine fleet as a scrape target: vLLM's families per pod, DCGM series from the same state."""

from __future__ import annotations

import re

import pytest

from adapter.catalog import parse_catalog
from adapter.demo.catalogs import catalog_document, itl_bounds, token_catalog
from adapter.demo.render import render_metrics
from adapter.demo.run import DemoOptions, build_fleet, demo_engine
from adapter.demo.tokenpods import TokenPods
from adapter.sim.fleet import PodPhase

FAMILIES = (
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds", "vllm:num_requests_running", "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc", "vllm:num_preemptions_total", "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total", "vllm:request_success_total",
)  # fmt: skip


def _fleet(pods: int = 3) -> TokenPods:
    fleet, _, _ = build_fleet(DemoOptions(pods=pods), 86400.0)
    assert isinstance(fleet, TokenPods)
    return fleet


def _values(text: str, name: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "{"):
            pod = re.search(r'pod="([^"]*)"', line)
            out[pod.group(1) if pod else ""] = float(line.rsplit(" ", 1)[1])
    return out


def test_every_serving_pod_exports_vllms_families_with_model_name_and_engine() -> None:
    fleet = _fleet()
    fleet.advance(120.0, 20.0)
    snap = fleet.snapshot()
    text = render_metrics(snap, engines=fleet.engine_counters())
    names = {p.name for p in snap.pods}
    for family in FAMILIES:
        assert f"# TYPE {family} " in text, family
    ttft = _values(text, "vllm:time_to_first_token_seconds_count")
    assert set(ttft) == names and all(v > 0 for v in ttft.values())
    for line in text.splitlines():
        if line.startswith("vllm:"):
            assert 'engine="0"' in line and 'model_name="meta-llama/Llama-3.1-8B-Instruct"' in line, line
    # A loading pod has no vLLM server yet: no series.
    fleet.set_replicas(4, fleet.now)
    snap = fleet.snapshot()
    loading = [p.name for p in snap.pods if p.phase is PodPhase.LOADING]
    assert len(loading) == 1
    assert loading[0] not in _values(render_metrics(snap, engines=fleet.engine_counters()), "vllm:num_requests_running")


def test_dcgm_follows_the_engines_state_framebuffer_growing_with_kv_use() -> None:
    readings = []
    for rate in (3.0, 30.0):
        fleet = _fleet()
        fleet.advance(300.0, rate)
        text = render_metrics(fleet.snapshot(), engines=fleet.engine_counters())
        kv = _values(text, "vllm:kv_cache_usage_perc")
        fb = {k: v for k, v in _values(text, "DCGM_FI_DEV_FB_USED").items() if k}
        power = {k: v for k, v in _values(text, "DCGM_FI_DEV_POWER_USAGE").items() if k}
        assert set(fb) == set(kv)
        readings.append((max(kv.values()), min(fb.values()), min(power.values())))
    (kv_low, fb_low, w_low), (kv_high, fb_high, w_high) = readings
    assert kv_high > kv_low and fb_high > fb_low and w_high > w_low


def test_a_deleted_pod_disappears_and_kept_pods_keep_their_counters() -> None:
    fleet = _fleet(3)
    fleet.advance(60.0, 20.0)
    before = {n: c.success for n, c in fleet.engine_counters().items()}
    fleet.set_replicas(2, fleet.now)
    after = fleet.engine_counters()
    assert len(after) == 2 and all(after[n].success == before[n] for n in after)


def test_the_demo_catalog_reads_itl_and_one_at_the_safe_point() -> None:
    engine = demo_engine("llama3-8b-h100")
    idle, target = itl_bounds(engine)
    # histogram_quantile over vLLM's ITL buckets: an idle pod reads inside (0, 0.01], one step's overhead
    assert 0.0 < idle < 0.01 < target < engine.slo.itl_s  # type: ignore[operator]
    doc = token_catalog(catalog_document(None), engine)
    catalog = parse_catalog(doc)
    assert "inference_itl_p99_seconds" in catalog.names()
    terms = {t["metric"]: t for t in doc["composites"]["llm_composite_load"]["terms"]}
    assert [terms[m]["weight"] for m in terms] == [0.4, 0.3, 0.3]
    assert terms["inference_itl_p99_seconds"]["idle"] == round(idle, 4)
    assert "inter_token_latency_seconds_bucket" in doc["metrics"]["inference_itl_p99_seconds"]["query"]
    # the composite at the safe point, the GPU busy (flat term 1) and no queue: 0.4 + 0.3 x the ITL term = 1.0
    import numpy as np

    from adapter.sim.latency import SLO_QUANTILE, histogram_quantile
    from adapter.sim.vllm_families import ITL_BUCKETS

    upper = np.asarray(ITL_BUCKETS, dtype=np.float64)
    band = 1.0 + 0.1 / (1.0 - 0.4)
    samples = engine.model().at(engine.knee() / band).itl_s
    cumulative = np.append(np.searchsorted(samples, upper, side="right"), samples.size).astype(np.float64)
    safe = float(histogram_quantile(SLO_QUANTILE, upper, cumulative[None, :])[0])
    assert 0.4 + 0.3 * (safe - idle) / (target - idle) == pytest.approx(1.0, abs=1e-3)
    # the embedded document is left alone
    assert "inference_itl_p99_seconds" not in catalog_document(None).get("metrics", {})
