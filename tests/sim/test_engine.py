"""The step-level engine model: continuous batching, chunked prefill, the KV cache and preemption."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from adapter.sim.engine import poisson_arrivals, run_engine, weighted_quantile
from adapter.sim.mix import AZURE_CONVERSATION
from adapter.sim.profiles import BLOCK_TOKENS, LLAMA3_8B_H100, PROFILES, profile

P = LLAMA3_8B_H100


def test_a_lone_request_takes_one_prefill_step_then_one_step_per_token() -> None:
    run = run_engine(P, np.array([0.0]), np.array([1000]), np.array([5]))
    prefill = P.step_s(1000, 0)
    assert run.ttft[0] == pytest.approx(prefill)
    decode = sum(P.step_s(1, 1000 + k) for k in range(4))
    assert run.e2e[0] == pytest.approx(prefill + decode)
    assert run.queue[0] == 0.0
    assert run.itl_weight.sum() == 4


def test_a_prompt_longer_than_the_budget_is_prefilled_in_chunks() -> None:
    prompt = 2 * P.max_num_batched_tokens + 100
    run = run_engine(P, np.array([0.0]), np.array([prompt]), np.array([1]))
    assert list(run.step_tokens) == [P.max_num_batched_tokens, P.max_num_batched_tokens, 100]
    assert run.ttft[0] == pytest.approx(run.step_dt.sum())


def test_decodes_go_first_and_prefill_fills_the_rest_of_the_budget() -> None:
    # Ten requests decode; a long prompt arrives: its chunks never push out a decode token.
    arrival = np.array([0.0] * 10 + [0.05])
    prompt = np.array([100] * 10 + [20_000])
    output = np.array([200] * 10 + [2])
    run = run_engine(P, arrival, prompt, output)
    assert run.step_tokens.max() == P.max_num_batched_tokens
    full = run.step_tokens == P.max_num_batched_tokens
    assert np.all(run.step_running[full] == 11)
    assert run.preemptions == 0


def test_max_num_seqs_caps_the_batch_and_the_rest_queue() -> None:
    n = P.max_num_seqs + 50
    run = run_engine(P, np.zeros(n), np.full(n, 10), np.full(n, 50))
    assert run.step_running.max() == P.max_num_seqs
    assert np.sum(run.queue > 0) == 50
    assert np.all(run.done)


def test_a_full_kv_cache_preempts_the_newest_sequence_and_counts_it() -> None:
    small = dataclasses.replace(P, weights_gib=P.gpus * (P.gpu_gib * 0.9 - P.activation_gib_per_gpu) - 0.05)
    blocks = small.kv_cache_blocks
    assert 10 < blocks < 100
    # Two sequences that each fit the cache alone, but not together once they have decoded a while.
    length = blocks * BLOCK_TOKENS * 2 // 3
    run = run_engine(small, np.zeros(2), np.full(2, length // 2), np.full(2, length // 2))
    assert run.preemptions >= 1
    assert np.all(run.done)
    assert run.step_kv.max() <= 1.0 + 1e-9
    # The preempted sequence waited and was recomputed: one inter-token gap spans it.
    assert run.itl_s.max() > 5 * run.step_dt.max() / 2
    # Without the memory pressure nothing is preempted.
    assert run_engine(P, np.zeros(2), np.full(2, length // 2), np.full(2, length // 2)).preemptions == 0


def test_ttft_is_queue_plus_prefill_and_e2e_adds_the_decode() -> None:
    rng = np.random.default_rng(0)
    a = poisson_arrivals(10.0, 60.0, rng)
    p, o = AZURE_CONVERSATION.sample(a.size, rng)
    run = run_engine(P, a, p, o)
    assert np.all(run.done)
    assert np.all(run.ttft >= run.queue)
    assert np.all(run.e2e >= run.ttft)
    decode = run.e2e - run.ttft
    multi = run.output > 1
    assert np.all(decode[multi] >= (run.output[multi] - 1) * P.overhead_s * 0.999)


def test_weighted_quantile_counts_weights() -> None:
    assert weighted_quantile(np.array([1.0, 2.0]), np.array([99.0, 1.0]), 0.99) == 1.0
    assert weighted_quantile(np.array([1.0, 2.0]), np.array([98.0, 2.0]), 0.99) == 2.0


def test_profiles_are_named_and_unknown_names_are_refused() -> None:
    assert profile("llama3-8b-h100") is LLAMA3_8B_H100
    with pytest.raises(ValueError, match="known"):
        profile("gpt-5")
    for p in PROFILES.values():
        # KV bytes per token follow the architecture: layers x kv_heads x head_dim x 2 x 2 bytes.
        assert p.kv_bytes_per_token == p.layers * p.kv_heads * p.head_dim * 4
        assert p.kv_cache_tokens > 100_000


def test_a_chunked_prefill_never_takes_more_blocks_than_the_cache_has() -> None:
    small = dataclasses.replace(
        P,
        max_num_batched_tokens=64,
        weights_gib=P.gpus * (P.gpu_gib * 0.9 - P.activation_gib_per_gpu) - 0.05,
    )
    capacity = small.kv_cache_tokens
    # Three prompts that each fit the cache but not all at once, prefilled 64 tokens a step.
    prompt = capacity // 2
    run = run_engine(small, np.zeros(3), np.full(3, prompt), np.full(3, 4))
    assert np.all(run.done)
    assert run.step_kv.max() <= 1.0 + 1e-9
    assert run.step_tokens.max() <= 64
