"""The demo's timeline as JSON (``demo --json FILE``): every sample, NaN as null, strict JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

from adapter.demo.timeline import Sample, Timeline


def test_the_timeline_json_holds_every_sample_and_no_nan(tmp_path: Path) -> None:
    timeline = Timeline(slo_p99_s=0.8, speed=20.0, autoscale=True)
    timeline.add(Sample(sim_time_s=0.0, arrivals_rps=12.5, desired=4, ready=4, worst_p99_s=0.4))
    timeline.add(Sample(60.0, 20.0, 6, 4, 0.7, composite=1.2, boost=1.1, boosted=1.32, forecast_rps=25.0))
    path = timeline.write_json(tmp_path / "t.json")
    text = path.read_text()
    assert "NaN" not in text
    doc = json.loads(text)
    assert doc["speed"] == 20.0 and doc["autoscale"] is True and doc["slo_p99_s"] == 0.8
    first, second = doc["samples"]
    assert first["composite"] is None and first["forecast_rps"] is None  # the adapter had no answer yet
    assert first["desired"] == 4 and first["arrivals_rps"] == 12.5
    assert second == {
        "sim_time_s": 60.0, "arrivals_rps": 20.0, "desired": 6, "ready": 4, "worst_p99_s": 0.7,
        "composite": 1.2, "boost": 1.1, "boosted": 1.32, "forecast_rps": 25.0,
    }  # fmt: skip
    assert math.isnan(timeline.samples[0].composite)  # the in-memory samples keep their NaN
