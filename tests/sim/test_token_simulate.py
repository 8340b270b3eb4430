"""``simulate``'s token-level engines: request mixes from trace columns, SLOs on TTFT and ITL, the engine options."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from adapter.sim.config import Deployment
from adapter.sim.mix import AZURE_CONVERSATION
from adapter.sim.profiles import LLAMA3_8B_H100
from adapter.sim.slo import parse_slo
from adapter.sim.tokenfleet import TokenEngine, TokenFleet

REPO = Path(__file__).resolve().parents[2]
HPA_FILE = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"
AZURE_CODE = REPO / "adapter" / "data" / "traces" / "azure_llm_2023_code_1min.csv"
TOKEN_COLS = ("--time-col", "timestamp", "--value-col", "requests", "--count",
              "--prompt-tokens-col", "input_tokens_sum", "--output-tokens-col", "output_tokens_sum")  # fmt: skip


def _simulate(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapter", "simulate", "--hpa", str(HPA_FILE), "--json", str(tmp_path / "o.json"),
         "--workers", "1", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _engine(slo: str = "ttft=2s,itl=100ms") -> TokenEngine:
    return TokenEngine(LLAMA3_8B_H100, AZURE_CONVERSATION, parse_slo(slo))


def _fleet(engine: TokenEngine, pods: int, minutes: int) -> TokenFleet:
    config = engine.fleet_config(deployment=Deployment(), load_delay_s=(90.0, 90.0), drain_timeout_s=120.0, seed=0)
    return TokenFleet(engine, config, replicas=pods, start=0.0, end=60.0 * minutes)


def test_below_the_knee_no_minute_violates_and_above_saturation_ttft_does() -> None:
    engine = _engine()
    knee, sat = engine.knee(), engine.model().saturation_rps
    assert 0 < knee < sat
    calm = _fleet(engine, 4, 10)
    calm.advance(600.0, 4 * 0.9 * knee)
    assert not any(broken.any() for broken in calm.bound_minutes().values())
    assert calm.ledger.completions.sum() == pytest.approx(4 * 0.9 * knee * 600.0)
    hot = _fleet(engine, 4, 10)
    hot.advance(600.0, 4 * 1.3 * sat)
    broken = hot.bound_minutes()
    assert broken["ttft"][2:].all()  # the backlog grows: every request waits longer than 2 s
    assert hot.waiting.sum() > 0
    # Completions are capped at the saturation rate; the rest queues or is dropped.
    served = hot.ledger.completions.sum() + hot.waiting.sum() + hot.ledger.dropped.sum()
    assert served == pytest.approx(4 * 1.3 * sat * 600.0)
    assert hot.ledger.completions.sum() <= 4 * sat * 600.0 * (1 + 1e-6)


def test_the_itl_bound_binds_where_the_ttft_bound_does_not() -> None:
    # Between the ITL-only knee and the TTFT-only knee, only the ITL minutes are broken.
    itl_knee = _engine("itl=100ms").knee()
    ttft_knee = _engine("ttft=2s").knee()
    assert itl_knee < ttft_knee
    engine = _engine()
    fleet = _fleet(engine, 2, 5)
    fleet.advance(300.0, 2 * 0.5 * (itl_knee + ttft_knee))
    broken = fleet.bound_minutes()
    assert broken["itl"].all() and not broken["ttft"].any()
    assert fleet.ledger.over_slo.sum() > 0


def test_simulate_reads_the_azure_code_traces_token_columns(tmp_path: Path) -> None:
    done = _simulate(tmp_path, "--trace", str(AZURE_CODE), *TOKEN_COLS, "--policy", "gpu",
                     "--policy", "composite", "--peak-pods", "6", "--plot", str(tmp_path / "o.png"))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "o.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    doc = json.loads((tmp_path / "o.json").read_text())
    inputs = doc["inputs"]
    assert inputs["slo"] == {"ttft": 2.0, "itl": 0.1}
    physics = inputs["physics"]
    assert physics["engine"] == "token" and physics["profile"] == "llama3-8b-h100"
    # The trace's own mix: ~2,048 prompt and ~28 output tokens per request (its README).
    assert physics["mix"]["prompt_mean"] == pytest.approx(2048, rel=0.05)
    assert physics["mix"]["output_mean"] == pytest.approx(28, rel=0.1)
    assert 0 < inputs["knee_rps_per_pod"] < physics["saturation_rps_per_pod"]
    for run in doc["policies"]:
        s = run["summary"] if "summary" in run else run
        per_bound = [s["ttft_violation_minutes"], s["itl_violation_minutes"]]
        assert max(per_bound) <= s["slo_violation_minutes"] <= sum(per_bound)
    assert inputs["oracle_gpu_hours"] > 0


def test_without_token_columns_the_default_mix_is_used(tmp_path: Path) -> None:
    done = _simulate(tmp_path, "--trace", str(AZURE_CODE), "--time-col", "timestamp",
                     "--value-col", "requests", "--count", "--policy", "gpu", "--peak-pods", "6",
                     "--slo", "ttft=1s,itl=150ms,e2e=20s")  # fmt: skip
    assert done.returncode == 0, done.stderr
    inputs = json.loads((tmp_path / "o.json").read_text())["inputs"]
    assert inputs["physics"]["mix"]["name"] == "azure-conversation"
    assert inputs["slo"] == {"ttft": 1.0, "itl": 0.15, "e2e": 20.0}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--profile", "gpt-9"), "unknown engine profile"),
        (("--slo", "ttft=soon"), "bad duration"),
        (("--slo", "p99=2s"), "NAME=DURATION"),
        (("--mix", "azure-code", *TOKEN_COLS[5:]), "use one"),
    ],
)
def test_bad_engine_options_are_one_line_errors(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    done = _simulate(tmp_path, "--trace", str(AZURE_CODE), "--time-col", "timestamp", "--value-col", "requests",
                     "--count", "--policy", "gpu", *args)  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr


# The request queue's options: one physics, so they are unknown, never silently ignored. (calibrate's --slo-p99 is the
# e2e form of a backend's history: tests/calibrate/test_cli.py.)
_NO_PHYSICS = [("--engine", "queue"), ("--pod-capacity", "9"), ("--service-time", "1s"), ("--latency-sigma", "0.5"),
               ("--gpus-per-pod", "2"), ("--queueing", "fluid"), ("--arrival-cv2", "2")]  # fmt: skip


@pytest.mark.parametrize(
    ("command", "args"),
    [*(("simulate", a) for a in [*_NO_PHYSICS, ("--slo-p99", "1s")]), *(("calibrate", a) for a in _NO_PHYSICS)],
)
def test_options_of_no_physics_are_refused(
    command: str, args: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    from adapter.__main__ import build_parser

    base = ["simulate", "--trace", str(AZURE_CODE), "--hpa", str(HPA_FILE), "--json", "o.json"]
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args([*(base if command == "simulate" else ["calibrate", "--simulate"]), *args])
    assert exc.value.code == 2 and f"unrecognized arguments: {' '.join(args)}" in capsys.readouterr().err


def test_token_columns_need_count_and_each_other(tmp_path: Path) -> None:
    base = ("--trace", str(AZURE_CODE), "--time-col", "timestamp", "--value-col", "requests")
    done = _simulate(tmp_path, *base, "--prompt-tokens-col", "input_tokens_sum", "--policy", "gpu")
    assert done.returncode == 2 and "both" in done.stderr
    done = _simulate(tmp_path, *base, *TOKEN_COLS[5:], "--policy", "gpu")
    assert done.returncode == 2 and "--count" in done.stderr


def test_the_mix_changes_the_knee() -> None:
    engine = _engine()
    chat = engine.knee()
    code = engine.knee(2048.0, 28.0)
    assert chat != code
    assert np.isfinite(chat) and np.isfinite(code)


def test_a_window_without_requests_keeps_the_last_known_mix() -> None:
    from adapter.sim.trace import RateTrace, ScaledTrace

    rates = np.array([2.0, 0.0, 2.5, 3.0])
    prompt = np.array([1000.0, np.nan, 3000.0, 2000.0])
    output = np.array([100.0, np.nan, 10.0, 50.0])
    trace = RateTrace(step_s=60.0, rates=rates, suspect=rates < 0.5, prompt_means=prompt, output_means=output)
    scaled = ScaledTrace(trace, peak_rps=30.0)
    assert scaled.mix_at(30.0) == (1000.0, 100.0)
    assert scaled.mix_at(90.0) == (1000.0, 100.0)  # no requests: the mix of the minute before
    assert scaled.mix_at(150.0) == (3000.0, 10.0)
    # The trace's own mix weighs each good window by its requests.
    p, o = scaled.mean_mix() or (0.0, 0.0)
    assert p == pytest.approx((2 * 1000 + 2.5 * 3000 + 3 * 2000) / 7.5)
    assert o == pytest.approx((2 * 100 + 2.5 * 10 + 3 * 50) / 7.5)
    with pytest.raises(ValueError, match="both"):
        RateTrace(step_s=60.0, rates=rates, suspect=rates < 0.5, prompt_means=prompt)


def test_the_replay_is_deterministic(tmp_path: Path) -> None:
    args = ("--trace", str(AZURE_CODE), *TOKEN_COLS, "--policy", "queue", "--peak-pods", "6")
    docs = []
    for k in range(2):
        out = tmp_path / f"run{k}"
        out.mkdir()
        assert _simulate(out, *args).returncode == 0
        docs.append(json.loads((out / "o.json").read_text()))
    strip = [{k: v for k, v in d["policies"][0].items() if k != "runtime_s"} for d in docs]
    assert strip[0] == strip[1]


def test_kv_usage_grows_with_the_running_sequences_and_the_observer_reads_it() -> None:
    from adapter.sim.observer import Observer
    from adapter.sim.readings import CpuModel

    engine = _engine()
    usage = []
    for load in (0.2, 0.6, 0.95):
        fleet = _fleet(engine, 2, 5)
        fleet.advance(120.0, 2 * load * engine.model().saturation_rps)
        usage.append(float(fleet.kv_cache_usage.mean()))
        view = Observer(fleet, latency_window_s=120.0, cpu=CpuModel(), sync_period_s=15.0, seed=0,
                        deployment="d").view(fleet.now)  # fmt: skip
        assert view.kv_cache_usage is not None
        assert np.allclose(view.kv_cache_usage, fleet.kv_cache_usage)
    assert usage == sorted(usage) and 0.0 < usage[0] and usage[-1] <= 1.0
    # Little's law: the sequences hold their mean context, a share of the cache's tokens.
    point = engine.model().at(0.6 * engine.model().saturation_rps)
    expected = point.running * engine.model().context_per_seq / LLAMA3_8B_H100.kv_cache_tokens
    assert usage[1] == pytest.approx(expected, rel=1e-6)


def test_the_slo_guard_holds_a_mix_the_composites_targets_were_not_set_on(tmp_path: Path) -> None:
    """On the Azure code trace (2,048-token prompts, 28-token answers) the shipped composite reads low at the knee,
    so the boosted composite alone runs pods past it; the example HPA's SLO guard (its TTFT and ITL P99 metrics,
    which the boosted policy keeps) cuts the violation minutes, at more GPU-hours."""
    manifest = yaml.safe_load(HPA_FILE.read_text())
    manifest["spec"]["metrics"] = manifest["spec"]["metrics"][:1]
    bare = tmp_path / "no-guard.yaml"
    bare.write_text(yaml.safe_dump(manifest))
    runs = {}
    for name, hpa in (("guard", HPA_FILE), ("bare", bare)):
        done = subprocess.run(
            [sys.executable, "-m", "adapter", "simulate", "--hpa", str(hpa), "--json", str(tmp_path / f"{name}.json"),
             "--workers", "1", "--trace", str(AZURE_CODE), *TOKEN_COLS, "--policy", "boosted"],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        [run] = json.loads((tmp_path / f"{name}.json").read_text())["policies"]
        runs[name] = run
    assert [m["pods"]["metric"]["name"] for m in manifest["spec"]["metrics"]] == ["llm_composite_load_boosted"]
    assert "inference_itl_p99_guard_seconds" in runs["guard"]["description"]
    assert "inference_itl" not in runs["bare"]["description"]
    guarded, bare_run = runs["guard"]["slo_violation_minutes"], runs["bare"]["slo_violation_minutes"]
    assert bare_run >= 5 and guarded <= bare_run / 2, (guarded, bare_run)
    assert runs["guard"]["gpu_hours"] > runs["bare"]["gpu_hours"]
