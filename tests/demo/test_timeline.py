"""The demo's timeline as JSON (``demo --json FILE``): every sample, NaN as null, strict JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

from adapter.demo.timeline import Sample, Timeline


def test_the_timeline_json_holds_every_sample_and_no_nan(tmp_path: Path) -> None:
    timeline = Timeline(speed=20.0, autoscale=True)
    timeline.add(Sample(sim_time_s=0.0, arrivals_rps=12.5, desired=4, ready=4))
    timeline.add(Sample(60.0, 20.0, 6, 4, composite=1.2, boost=1.1, boosted=1.32, forecast_rps=25.0))
    path = timeline.write_json(tmp_path / "t.json")
    text = path.read_text()
    assert "NaN" not in text
    doc = json.loads(text)
    assert doc["speed"] == 20.0 and doc["autoscale"] is True and doc["slo_ttft_s"] is None
    first, second = doc["samples"]
    assert first["composite"] is None and first["forecast_rps"] is None  # the adapter had no answer yet
    assert first["desired"] == 4 and first["arrivals_rps"] == 12.5
    assert second == {
        "sim_time_s": 60.0, "arrivals_rps": 20.0, "desired": 6, "ready": 4,
        "composite": 1.2, "boost": 1.1, "boosted": 1.32, "forecast_rps": 25.0,
        "ttft_p99_s": None, "itl_p99_s": None,  # no TTFT or ITL was recorded
    }  # fmt: skip
    assert math.isnan(timeline.samples[0].composite)  # the in-memory samples keep their NaN


def test_the_timeline_json_carries_the_token_engines_latencies_and_their_bounds(tmp_path: Path) -> None:
    timeline = Timeline(speed=60.0, autoscale=True, slo_ttft_s=2.0, slo_itl_s=0.1)
    timeline.max_replicas, timeline.trace_peak_rps = 16, 39.0
    timeline.add(Sample(0.0, 10.0, 4, 4, composite=0.5, ttft_p99_s=0.21, itl_p99_s=0.054))
    timeline.add(Sample(60.0, 12.0, 3, 4, composite=0.6, ttft_p99_s=0.24, itl_p99_s=0.068))
    doc = json.loads(timeline.write_json(tmp_path / "t.json").read_text())
    assert (doc["slo_ttft_s"], doc["slo_itl_s"], doc["max_replicas"], doc["trace_peak_rps"]) == (2.0, 0.1, 16, 39.0)
    assert [(s["ttft_p99_s"], s["itl_p99_s"]) for s in doc["samples"]] == [(0.21, 0.054), (0.24, 0.068)]
    png = timeline.write_png(tmp_path / "t.png")  # TTFT and ITL against their bounds, on a log axis
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
