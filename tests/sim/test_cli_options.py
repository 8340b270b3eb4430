"""``simulate``'s physics and start options reach the run (and bad combinations are one-line errors)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from adapter.catalog import load_catalog
from adapter.cli.series_input import parse_duration
from adapter.cli.simulate import _start_offset
from adapter.hpa.spec import load_hpa
from adapter.sim.forecasting import history_span_s
from adapter.sim.policies import build_policies
from tests.support.sim import ENGINE

REPO = Path(__file__).resolve().parents[2]
HPA_FILE = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"
CATALOG = load_catalog(None)


def test_auto_start_leaves_the_forecasters_history_span_when_a_policy_boosts() -> None:
    assert CATALOG.forecast is not None
    span = history_span_s(CATALOG.forecast)
    boosting = build_policies(["gpu", "boosted"], load_hpa(HPA_FILE), CATALOG)
    reactive = build_policies(["gpu", "composite"], load_hpa(HPA_FILE), CATALOG)
    assert _start_offset("auto", boosting, 14 * 86_400.0, parse_duration) == span
    assert _start_offset("auto", boosting, 3600.0, parse_duration) == 900.0  # at most a quarter of the trace
    assert _start_offset("auto", reactive, 14 * 86_400.0, parse_duration) == 0.0
    assert _start_offset("2h", boosting, 14 * 86_400.0, parse_duration) == 7200.0
    assert _start_offset("0", boosting, 14 * 86_400.0, parse_duration) == 0.0


def _simulate(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    csv = tmp_path / "load.csv"
    csv.write_text("ts,rps\n" + "".join(f"{1_700_000_000 + 600 * i},{v}\n" for i, v in enumerate([60, 200, 220, 90])))
    return subprocess.run(
        [sys.executable, "-m", "adapter", "simulate", "--trace", str(csv), "--time-col", "ts", "--value-col",
         "rps", "--hpa", str(HPA_FILE), "--policy", "gpu", "--peak-pods", "8", "--json", str(tmp_path / "o.json"),
         *extra],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_physics_options_reach_the_run(tmp_path: Path) -> None:
    done = _simulate(
        tmp_path,
        "--metric-delay",
        "45s",
        "--warm-gpus",
        "8",
        "--node-provision",
        "2m..4m",
        "--max-gpus",
        "64",
        "--load-time",
        "60s..120s",
        "--drain-timeout",
        "90s",
    )
    assert done.returncode == 0, done.stderr
    inputs = json.loads((tmp_path / "o.json").read_text())["inputs"]
    assert inputs["metric_delay_s"] == 45.0
    assert inputs["gpu_pool"] == {"warm_gpus": 8, "node_provision_s": [120.0, 240.0], "max_gpus": 64}
    assert inputs["knee_rps_per_pod"] == pytest.approx(ENGINE.knee(), rel=1e-6)  # the default engine and mix
    assert inputs["physics"]["profile"] == "llama3-8b-h100" and inputs["slo"] == {"ttft": 2.0, "itl": 0.1}
    assert "| oracle |" in done.stdout


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--metric-delay", "20s"], "multiple of the sync period"),
        (["--max-gpus", "8"], "--max-gpus needs --warm-gpus"),
        (["--warm-gpus", "8", "--node-provision", "5m..1m"], "--node-provision"),
    ],
)
def test_bad_physics_options_are_one_line_errors(tmp_path: Path, extra: list[str], message: str) -> None:
    done = _simulate(tmp_path, *extra)
    assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr
