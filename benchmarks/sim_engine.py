"""What a replay costs on the simulator's physics: one policy over the shared trace, and the fast engine model
against the step-level engine it stands in for.

1. ``simulate --policy POLICY --workers 1`` over ``--days`` of the shared trace on this checkout: the run's own
   ``runtime_s`` (the policy's CPU-bound loop, without process start-up), in total and per simulated day. The
   14-day trace should replay in about a minute per policy.
2. One pod of ``--profile`` serving the default mix at ``--load`` x its saturation for ``--span`` simulated
   seconds, twice: the step-level engine (``adapter.sim.engine.run_engine``: every vLLM step, Poisson arrivals)
   and the fast model the replay runs (a one-pod ``TokenFleet`` advanced in the HPA's 15 s syncs). Each one's wall
   time and the ratio: what the fast model buys a replay, which advances ~20 pods for 80,640 syncs.

    python benchmarks/sim_engine.py [--policy gpu] [--days 14] [--profile llama3-8b-h100] [--span 600] [--load 0.6]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
from simrun import simulate

from adapter.sim.config import Deployment
from adapter.sim.engine import poisson_arrivals, run_engine
from adapter.sim.mix import DEFAULT_MIX, mix
from adapter.sim.profiles import profile
from adapter.sim.slo import DEFAULT_SLO, parse_slo
from adapter.sim.tokenfleet import TokenEngine, TokenFleet


def replay_seconds(policy: str, days: float, profile_name: str) -> float:
    """``runtime_s`` of one policy's replay over ``days`` of the shared trace."""
    common = ["--workers", "1", "--start", "0", "--duration", f"{days * 24:g}h", "--profile", profile_name]
    with tempfile.TemporaryDirectory() as tmp:
        doc = simulate(common, Path(tmp) / "sim.json", policies=[policy])
    run = doc["policies"][0]
    return float((run.get("summary") or run)["runtime_s"])


def one_pod_seconds(profile_name: str, span_s: float, load: float) -> tuple[float, float, int]:
    """(step-level wall s, fast-model wall s, requests served) for one pod at ``load`` x saturation."""
    engine = TokenEngine(profile(profile_name), mix(DEFAULT_MIX), parse_slo(DEFAULT_SLO))
    rate = load * engine.model().saturation_rps  # the fast model is built here, outside both timings
    rng = np.random.default_rng(0)
    arrival = poisson_arrivals(rate, span_s, rng)
    prompt, output = engine.mix.sample(arrival.size, rng)
    started = time.perf_counter()
    run = run_engine(engine.profile, arrival, prompt, output, until_s=span_s)
    step = time.perf_counter() - started
    config = engine.fleet_config(deployment=Deployment(), load_delay_s=(0.0, 0.0), drain_timeout_s=120.0, seed=0)
    started = time.perf_counter()
    fleet = TokenFleet(engine, config, replicas=1, start=0.0, end=span_s)
    while fleet.now < span_s - 1e-9:
        fleet.advance(min(fleet.now + 15.0, span_s), rate)
    fast = time.perf_counter() - started
    return step, fast, int(run.done.sum())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--policy", default="gpu")
    p.add_argument("--days", type=float, default=14.0)
    p.add_argument("--profile", default="llama3-8b-h100")
    p.add_argument("--span", type=float, default=600.0, help="simulated seconds of the one-pod comparison")
    p.add_argument("--load", type=float, default=0.6, help="the pod's load as a fraction of its saturation")
    args = p.parse_args()
    seconds = replay_seconds(args.policy, args.days, args.profile)
    print(
        f"replay: {seconds:6.1f} s for {args.days:g} simulated days of {args.policy!r} "
        f"({seconds / args.days:.1f} s per simulated day)"
    )
    step, fast, served = one_pod_seconds(args.profile, args.span, args.load)
    print(f"one pod, {args.span:g} simulated s at {args.load:g} x saturation ({served} requests):")
    print(f"  step-level engine {step:8.3f} s, fast model {fast:8.4f} s: {step / fast:,.0f}x")


if __name__ == "__main__":
    main()
