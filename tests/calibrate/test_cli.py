"""``python -m adapter calibrate``: the simulated source end to end, and user errors as one line + exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from adapter.__main__ import main
from adapter.catalog import parse_catalog
from adapter.demo.servers import free_port
from tests.support.sim import ENGINE

REPO = Path(__file__).resolve().parents[2]
TRACE = REPO / "adapter" / "data" / "traces" / "servegen_language_m_mid_10min.csv"
BACKEND = ["calibrate", "--prometheus-url", "http://127.0.0.1:{port}", "--namespace", "n", "--deployment", "d"]


def test_simulated_fleet_proposal_is_a_valid_catalog_whose_composite_reads_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, snippet, plot = tmp_path / "c.json", tmp_path / "c.yaml", tmp_path / "c.png"
    code = main(
        [
            "calibrate",
            "--simulate",
            "--trace",
            str(TRACE),
            "--json",
            str(out),
            "--catalog-out",
            str(snippet),
            "--plot",
            str(plot),
        ]
    )
    assert code == 0
    assert "knee:" in capsys.readouterr().out
    report = json.loads(out.read_text())
    # The knee simulate reports for this fleet (the default engine and mix), within 10 %.
    knee = ENGINE.knee()
    assert abs(report["knee_rps_per_pod"] - knee) <= 0.1 * knee and report["composite_at_safe"] == pytest.approx(1.0)
    assert report["growth_within_cold_start"] >= 0 and report["hpa_band"] > 1
    # The snippet drops into the embedded catalog and validates.
    doc = yaml.safe_load((REPO / "adapter" / "catalog.yaml").read_text())
    doc["composites"]["llm_composite_load"]["terms"] = yaml.safe_load(snippet.read_text())["composites"][
        "llm_composite_load"
    ]["terms"]
    terms = parse_catalog(doc).composites["llm_composite_load"].terms
    assert [t.metric for t in terms] == [
        "gpu_utilization_p90",
        "inference_queue_depth",
        "inference_itl_p99_seconds",
    ]
    # Which terms the boost leaves alone follows from what this fleet's terms do below the knee.
    flat = {t["metric"]: t["flat"] for t in report["terms"]}
    assert [t.flat for t in terms] == [flat[t.metric] for t in terms]
    assert plot.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["calibrate"], "give --prometheus-url, --namespace, --deployment (or --simulate)"),
        (
            ["calibrate", "--prometheus-url", "http://127.0.0.1:{port}", "--namespace", "n", "--deployment", "d"],
            "error: ",
        ),
        (["calibrate", "--simulate", "--slo-quantile", "1.5"], "--slo-quantile"),
        (["calibrate", "--simulate", "--slo-p99", "fast"], "bad duration"),
        (["calibrate", "--simulate", "--slo-p99", "1s"], "--simulate takes --slo"),
        (["calibrate", "--simulate", "--histogram", "vllm:e2e_request_latency_seconds"], "--simulate takes --slo"),
        (["calibrate", "--simulate", "--composite", "nope"], "no composite 'nope'"),
        ([*BACKEND, "--slo", "ttft=2s", "--slo-p99", "1s"], "or --slo-p99 with --histogram (one e2e bound), not both"),
        ([*BACKEND, "--histogram", "vllm:e2e_request_latency_seconds"], "--histogram goes with --slo-p99"),
        ([*BACKEND, "--slo", "ttft=2s,tpot=50ms"], "each part is NAME=DURATION"),
    ],
)
def test_user_errors_are_one_line_and_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = [a.replace("{port}", str(free_port())) for a in argv]  # nothing listens there
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("profile", ["llama3-8b-h100", "llama3-70b-h100-tp4"])
def test_simulated_token_engines_calibrate_to_the_engines_own_knee(
    profile: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from adapter.sim.mix import AZURE_CONVERSATION
    from adapter.sim.profiles import PROFILES
    from adapter.sim.slo import parse_slo
    from adapter.sim.tokenfleet import TokenEngine

    out = tmp_path / "cal.json"
    argv = ["calibrate", "--simulate", "--profile", profile, "--json", str(out)]
    assert main(argv) == 0
    report = json.loads(out.read_text())
    assert report["slo"] == "TTFT P99 <= 2 s, ITL P99 <= 0.1 s" and report["slo_p99_s"] is None
    own = TokenEngine(PROFILES[profile], AZURE_CONVERSATION, parse_slo("ttft=2s,itl=100ms")).knee()
    assert report["knee_rps_per_pod"] == pytest.approx(own, rel=0.1)
    assert "the last load within TTFT P99 <= 2 s" in capsys.readouterr().out
    # The sweep is relative to the knee, wherever it sits against the saturation (0.57 x on the 8B engine, 0.14 x
    # on the 70B one): dense below the knee, up to 1.5 x it.
    loads = [b["load_rps"] for b in report["bins"]]
    assert sum(x < report["knee_rps_per_pod"] for x in loads) >= 20
    assert report["max_load_rps_per_pod"] == pytest.approx(1.5 * own, rel=0.1)
    # The GPU duty cycle is saturated below the knee on both: a presence term, and the band widens for it.
    gpu = next(t for t in report["terms"] if t["metric"] == "gpu_utilization_p90")
    assert gpu["flat"] and not gpu["tracks_load"] and report["hpa_band"] > 1.15


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["calibrate", "--simulate", "--profile", "gpt-9"], "unknown engine profile"),
        (["calibrate", "--simulate", "--slo", "ttft=fast"], "bad duration"),
        (["calibrate", "--simulate", "--mix", "chat"], "unknown request mix"),
    ],
)
def test_token_engine_errors_are_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


CODE_TRACE = REPO / "adapter" / "data" / "traces" / "azure_llm_2023_code_1min.csv"
CODE_LAYOUT = ["--time-col", "timestamp", "--value-col", "requests", "--count"]
CODE_TOKENS = ["--prompt-tokens-col", "input_tokens_sum", "--output-tokens-col", "output_tokens_sum"]


def test_a_traces_token_columns_set_the_mix_of_the_sweep(tmp_path: Path) -> None:
    """``calibrate --simulate --trace`` reads the trace as ``simulate`` does; its token columns (the Azure 2023 code
    service: ~2,049 prompt and ~28 output tokens per request) give the mix the engines are swept with, so the knee
    found is that mix's, not the default chat mix's."""
    import csv

    from adapter.sim.mix import AZURE_CONVERSATION
    from adapter.sim.profiles import LLAMA3_8B_H100
    from adapter.sim.slo import parse_slo
    from adapter.sim.tokenfleet import TokenEngine

    with CODE_TRACE.open() as f:
        rows = list(csv.DictReader(f))
    requests = sum(float(r["requests"]) for r in rows)
    prompt = sum(float(r["input_tokens_sum"]) for r in rows) / requests
    output = sum(float(r["output_tokens_sum"]) for r in rows) / requests
    out = tmp_path / "cal.json"
    assert (
        main(["calibrate", "--simulate", "--trace", str(CODE_TRACE), *CODE_LAYOUT, *CODE_TOKENS, "--json", str(out)])
        == 0
    )
    report = json.loads(out.read_text())
    seen = report["workload"]
    assert seen["prompt_tokens_per_request"] == pytest.approx(prompt, rel=0.02)
    assert seen["output_tokens_per_request"] == pytest.approx(output, rel=0.02)
    slo = parse_slo("ttft=2s,itl=100ms")
    own = TokenEngine(LLAMA3_8B_H100, AZURE_CONVERSATION.at(prompt, output), slo).knee()
    assert report["knee_rps_per_pod"] == pytest.approx(own, rel=0.1)
    chat = TokenEngine(LLAMA3_8B_H100, AZURE_CONVERSATION, slo).knee()
    assert report["knee_rps_per_pod"] < 0.6 * chat
    # The same trace without its token columns: the default mix, and its own (higher) knee.
    assert main(["calibrate", "--simulate", "--trace", str(CODE_TRACE), *CODE_LAYOUT, "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["workload"]["prompt_tokens_per_request"] == pytest.approx(AZURE_CONVERSATION.prompt_mean, rel=0.02)
    assert report["knee_rps_per_pod"] == pytest.approx(chat, rel=0.1)


@pytest.mark.parametrize(
    "argv,needle",
    [
        (["calibrate", "--simulate", *CODE_LAYOUT], "need --trace"),
        (["calibrate", "--simulate", "--trace", str(CODE_TRACE), "--time-col", "timestamp", "--value-col", "requests",
          *CODE_TOKENS], "need --count"),
        (["calibrate", "--simulate", "--trace", str(CODE_TRACE), *CODE_LAYOUT, *CODE_TOKENS, "--mix", "azure-code"],
         "--mix and token columns"),
    ],
)  # fmt: skip
def test_trace_layout_errors_are_one_line(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err
