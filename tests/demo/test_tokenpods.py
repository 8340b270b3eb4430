"""The demo's token-engine fleet as a scrape target: vLLM's families per pod, DCGM series from the same state."""

from __future__ import annotations

import re

from adapter.catalog import parse_catalog
from adapter.demo.catalogs import catalog_document
from adapter.demo.render import render_metrics
from adapter.demo.run import DemoOptions, build_fleet, demo_catalog
from adapter.demo.tokenpods import TokenPods
from adapter.sim.snapshot import PodPhase

FAMILIES = (
    "vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds", "vllm:e2e_request_latency_seconds",
    "vllm:request_queue_time_seconds", "vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds",
    "vllm:num_requests_running", "vllm:num_requests_waiting",
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


def test_the_demo_serves_the_embedded_catalog_on_its_clock() -> None:
    # The embedded composite reads vLLM's ITL P99 (tests/calibrate/test_catalog_profiles.py holds it to 1.0 at each
    # profile's safe point); the demo only compresses its windows and forecasts its Deployment from the start.
    options = DemoOptions(speed=60.0)
    doc = demo_catalog(catalog_document(None), options)
    embedded = catalog_document(None)
    assert doc["composites"]["llm_composite_load"]["terms"] == embedded["composites"]["llm_composite_load"]["terms"]
    assert "inter_token_latency_seconds_bucket" in doc["metrics"]["inference_itl_p99_seconds"]["query"]
    assert doc["metrics"]["inference_itl_p99_seconds"]["window"] == "2000ms"  # 2 m of simulated time at x60
    assert {"namespace": options.namespace, "deployment": options.deployment} in doc["forecast"]["workloads"]
    parse_catalog(doc)
