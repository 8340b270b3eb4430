"""The token fleet's vLLM families match a real vLLM V1 server's (tests/data/samples/vllm.prom): names, types,
label names and order, bucket bounds; and their values follow the fleet's state."""

from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from adapter.sim.config import Deployment
from adapter.sim.mix import AZURE_CONVERSATION
from adapter.sim.profiles import LLAMA3_8B_H100
from adapter.sim.slo import parse_slo
from adapter.sim.tokenfleet import TokenEngine, TokenFleet
from adapter.sim.vllm_families import EngineCounters, render_vllm

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "samples" / "vllm.prom"
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$")


def parse(text: str) -> tuple[dict[str, str], dict[str, list[list[tuple[str, str]]]]]:
    """(family -> TYPE, series name -> label pairs of each sample line, in order)."""
    types: dict[str, str] = {}
    series: dict[str, list[list[tuple[str, str]]]] = defaultdict(list)
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
        elif line and not line.startswith("#"):
            match = _LINE.match(line)
            if match is None:  # a series without labels (process_*): not a vLLM family
                continue
            pairs = re.findall(r'([a-zA-Z_]+)="([^"]*)"', match.group(2))
            series[match.group(1)].append(pairs)
    return types, series


def _fleet() -> TokenFleet:
    engine = TokenEngine(LLAMA3_8B_H100, AZURE_CONVERSATION, parse_slo("ttft=2s,itl=100ms"))
    config = engine.fleet_config(deployment=Deployment(), load_delay_s=(90.0, 90.0), drain_timeout_s=120.0, seed=0)
    return TokenFleet(engine, config, replicas=3, start=0.0, end=1200.0, families=True)


def test_families_match_a_real_vllm_server() -> None:
    fleet = _fleet()
    fleet.advance(300.0, 3 * 8.0)
    text = render_vllm([((), c) for c in fleet.engine_counters()[:1]], model_name="meta-llama/Llama-3.1-8B-Instruct")
    ours_types, ours = parse(text)
    real_types, real = parse(SAMPLE.read_text())
    assert len(ours_types) >= 13
    for name in ("vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds"):
        assert ours_types[name] == "histogram", name
    for name, kind in ours_types.items():
        assert real_types.get(name) == kind, name
    for name, lines in ours.items():
        assert name in real, name
        # The same label names in the same order, and for histograms the same bucket bounds.
        assert [[k for k, _ in pairs] for pairs in lines] == [[k for k, _ in pairs] for pairs in real[name]], name
        if name.endswith("_bucket"):
            assert [dict(p)["le"] for p in lines] == [dict(p)["le"] for p in real[name]], name


def test_values_follow_the_load_and_counters_follow_their_pods() -> None:
    fleet = _fleet()
    fleet.advance(300.0, 3 * 8.0)
    first = fleet.engine_counters()
    assert [c.success for c in first] == pytest.approx([8.0 * 300.0] * 3)
    for c in first:
        ttft, total = c.histograms["vllm:time_to_first_token_seconds"]
        assert ttft[-1] == pytest.approx(c.success) and np.all(np.diff(ttft) >= -1e-9)
        assert 0.0 < total / ttft[-1] < 2.0  # mean TTFT well under the SLO at this load
        itl, _ = c.histograms["vllm:inter_token_latency_seconds"]
        assert itl[-1] == pytest.approx(c.generation_tokens)
        assert c.prompt_tokens == pytest.approx(c.success * AZURE_CONVERSATION.prompt_mean)
        assert 0.0 < c.kv_cache_usage < 1.0 and c.running > 1.0
    # Scale down by one: the two pods left keep their counters; a new pod starts from zero.
    fleet.set_replicas(2, fleet.now)
    fleet.set_replicas(3, fleet.now)
    after = fleet.engine_counters()
    assert [c.success for c in after[:2]] == pytest.approx([c.success for c in first[:2]])
    assert after[2].success == 0.0
    text = render_vllm([((("pod", "p-0"),), after[0])], model_name="m")
    assert 'vllm:request_success_total{pod="p-0",engine="0",finished_reason="stop",model_name="m"} 2400.0' in text


def test_a_fleet_without_families_refuses_to_make_them_up() -> None:
    engine = TokenEngine(LLAMA3_8B_H100, AZURE_CONVERSATION, parse_slo("ttft=2s"))
    config = engine.fleet_config(deployment=Deployment(), load_delay_s=(90.0, 90.0), drain_timeout_s=120.0, seed=0)
    fleet = TokenFleet(engine, config, replicas=1, start=0.0, end=60.0)
    with pytest.raises(ValueError, match="families"):
        fleet.engine_counters()


def test_prefill_and_decode_split_each_request_as_vllm_does() -> None:
    """vLLM's intervals: queue (to first scheduled) + prefill (to first token) = TTFT; TTFT + decode (first token to
    last) = e2e. A backlog's wait is spent waiting: it lengthens queue, TTFT and e2e, not prefill or decode."""
    fleet = _fleet()
    fleet.advance(300.0, 3 * 8.0)

    def sums(c: EngineCounters) -> dict[str, float]:
        return {name.split(":")[1]: c.histograms[name][1] for name in c.histograms}

    for c in fleet.engine_counters():
        s = sums(c)
        for name in ("vllm:request_prefill_time_seconds", "vllm:request_decode_time_seconds"):
            cumulative, _ = c.histograms[name]
            assert cumulative[-1] == pytest.approx(c.success) and np.all(np.diff(cumulative) >= -1e-9), name
        assert s["request_queue_time_seconds"] + s["request_prefill_time_seconds"] == pytest.approx(
            s["time_to_first_token_seconds"], rel=1e-6
        )
        assert s["time_to_first_token_seconds"] + s["request_decode_time_seconds"] == pytest.approx(
            s["e2e_request_latency_seconds"], rel=1e-6
        )
        # 211 output tokens on average at about 10 ms a step: seconds of decode, a fraction of a second of prefill.
        assert s["request_decode_time_seconds"] / c.success > 1.0 > s["request_prefill_time_seconds"] / c.success
    # Twice the saturation rate for a minute: a backlog builds. Its wait adds to queue and TTFT; prefill and decode
    # are those of a saturated engine, whatever the backlog ahead.
    start = fleet.engine_counters()[0]
    fleet.advance(360.0, 3 * 2.0 * fleet.saturation_rps)
    end = fleet.engine_counters()[0]
    served = end.success - start.success
    during = {k: (v - sums(start)[k]) / served for k, v in sums(end).items()}
    saturated = fleet._model.at(fleet.saturation_rps * (1.0 - 1e-6))
    assert during["request_prefill_time_seconds"] == pytest.approx(float(saturated.prefill_s.mean()), rel=1e-6)
    assert during["request_decode_time_seconds"] == pytest.approx(float(saturated.decode_s.mean()), rel=1e-6)
    backlog = during["request_queue_time_seconds"] - float(saturated.queue_s.mean())
    assert backlog > 1.0
    assert during["time_to_first_token_seconds"] == pytest.approx(float(saturated.ttft_s.mean()) + backlog, rel=1e-6)


def test_preemptions_count_where_the_kv_cache_fills() -> None:
    """vllm:num_preemptions_total follows the fast model: none at the default mix (max_num_seqs caps the batch
    below a full cache), the full-cache rate per completion on an overloaded pod serving long prompts."""
    fleet = _fleet()
    fleet.advance(300.0, 3 * 1.5 * fleet.saturation_rps)
    assert all(c.preemptions == 0.0 for c in fleet.engine_counters())
    fleet.set_mix(6000.0, 400.0)
    start = fleet.engine_counters()
    fleet.advance(600.0, 3 * 1.5 * fleet.saturation_rps)
    model = fleet._model
    assert model.preempted_full > 0.05
    for before, after in zip(start, fleet.engine_counters(), strict=True):
        served = after.success - before.success
        assert served > 0
        assert after.preemptions - before.preemptions == pytest.approx(served * model.preempted_full, rel=1e-6)
    text = render_vllm([((), fleet.engine_counters()[0])], model_name="m")
    line = next(x for x in text.splitlines() if x.startswith("vllm:num_preemptions_total{"))
    assert float(line.rsplit(" ", 1)[1]) > 0
