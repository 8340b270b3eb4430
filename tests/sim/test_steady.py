"""The fast steady-state model agrees with the step-level engine model.

Stated tolerance (docs/simulation.md): saturation throughput within 5 %; TTFT P99 and ITL P99 within 30 % at
0.3, 0.6 and 0.85 of saturation, for both profiles and two mixes of opposite shape (chat, code completion).
"""

from __future__ import annotations

import numpy as np
import pytest

from adapter.sim.engine import poisson_arrivals, run_engine
from adapter.sim.mix import AZURE_CODE, AZURE_CONVERSATION, TokenMix
from adapter.sim.profiles import LLAMA3_8B_H100, LLAMA3_70B_H100_TP4, EngineProfile
from adapter.sim.steady import SteadyState

CASES = [(p, m) for p in (LLAMA3_8B_H100, LLAMA3_70B_H100_TP4) for m in (AZURE_CONVERSATION, AZURE_CODE)]


def _id(case: tuple[EngineProfile, TokenMix]) -> str:
    return f"{case[0].name}-{case[1].name}"


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_saturation_throughput_agrees(case: tuple[EngineProfile, TokenMix]) -> None:
    profile, mix = case
    fast = SteadyState(profile, mix).saturation_rps
    rng = np.random.default_rng(3)
    duration = 240.0
    arrival = poisson_arrivals(1.5 * fast, duration, rng)
    p, o = mix.sample(arrival.size, rng)
    run = run_engine(profile, arrival, p, o, until_s=duration)
    finish = arrival + run.e2e
    served = np.sum((finish > duration / 2) & (finish <= duration)) / (duration / 2)
    assert served == pytest.approx(fast, rel=0.05)


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_ttft_and_itl_p99_agree_below_saturation(case: tuple[EngineProfile, TokenMix]) -> None:
    profile, mix = case
    model = SteadyState(profile, mix)
    for load in (0.3, 0.6, 0.85):
        rate = load * model.saturation_rps
        rng = np.random.default_rng(4)
        duration = max(600.0, 3000.0 / rate)
        arrival = poisson_arrivals(rate, duration, rng)
        p, o = mix.sample(arrival.size, rng)
        run = run_engine(profile, arrival, p, o)
        warm = arrival > 60.0
        point = model.at(rate)
        ttft = float(np.nanpercentile(run.ttft[warm], 99))
        assert point.ttft_quantile(0.99) == pytest.approx(ttft, rel=0.3), f"TTFT P99 at {load}"
        assert point.itl_quantile(0.99) == pytest.approx(run.itl_quantile(0.99), rel=0.3), f"ITL P99 at {load}"


def test_latencies_grow_with_load_and_the_knee_is_below_saturation() -> None:
    model = SteadyState(LLAMA3_8B_H100, AZURE_CONVERSATION)
    points = [model.at(f * model.saturation_rps) for f in (0.1, 0.5, 0.9)]
    ttft = [p.ttft_quantile(0.99) for p in points]
    itl = [p.itl_quantile(0.99) for p in points]
    assert ttft == sorted(ttft) and itl == sorted(itl)
    knee = model.knee_rps({"ttft": 2.0, "itl": 0.1})
    assert 0 < knee < model.saturation_rps
    assert model.at(knee).itl_quantile(0.99) <= 0.1
    assert model.at(knee).ttft_quantile(0.99) <= 2.0
    assert model.knee_rps({"ttft": 1e-4}) == 0.0
