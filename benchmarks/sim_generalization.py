"""The what-if simulator's generalization table: the shipped HPA and catalog on other fleets and traces.

Every cell replays one trace through one fleet with the shipped example HPA (``averageValue: "1"``) and the
embedded catalog, for the GPU-utilization-only baseline, the reactive composite and the boosted composite,
and prints violation minutes, GPU-hours and GPU-hours as a multiple of the oracle (a clairvoyant whose
pods start instantly and each carry the knee load, where the P99 meets the SLO: ``adapter.sim.latency``).
Nothing is tuned here: the figures show how far the shipped defaults carry to fleets and traces they were
not set on.

Fleets: pod capacity 10, 40 and 80 req/s (light-load service 0.12 s, so 2, 7 and 14 batch slots: very
different queueing), model-load time 60-120 s, 90-180 s and 180-300 s (the default run pairs them
diagonally; ``--full`` runs all nine). Traces: the shared ServeGen trace's two weeks (default: six hours of
each week's busiest ramp; ``--full``: each whole week), a synthetic trace without a daily cycle
(``trace.flat_noisy_trace``) and a bursty 1-hour trace (``trace.bursty_trace``). Each trace is scaled so
its peak needs 24 pods at the fleet's knee (well inside the example HPA's maxReplicas 40). The replay
starts after the forecaster's warm-up span (at most a quarter of the trace), fed to the forecaster as
history, as ``simulate --start auto`` does.

Usage:
  python benchmarks/sim_generalization.py [--full] [--workers 2] [--json FILE]

Measured (shared 2-core machine, default run): see docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from adapter.catalog import load_catalog  # noqa: E402
from adapter.hpa.spec import load_hpa  # noqa: E402
from adapter.sim.fleet import FleetConfig  # noqa: E402
from adapter.sim.forecasting import history_span_s  # noqa: E402
from adapter.sim.policies import build_policies  # noqa: E402
from adapter.sim.simulate import SimulationConfig, knee, simulate  # noqa: E402
from adapter.sim.trace import RateTrace, ScaledTrace, bursty_trace, flat_noisy_trace, load_trace  # noqa: E402

TRACE = REPO / "adapter" / "data" / "traces" / "servegen_language_m_mid_10min.csv"
HPA = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"
POLICIES = ("gpu", "composite", "boosted")
PEAK_PODS = 24.0
DAY = 86_400.0


@dataclass(frozen=True)
class Case:
    name: str
    trace: RateTrace
    start_s: float  # where the replay starts (the warm-up before it comes from the trace)
    duration_s: float


def _cases(full: bool, warmup_s: float) -> list[Case]:
    shared = load_trace(TRACE)
    cases = []
    for week in (0, 1):
        if full:
            start = week * 7 * DAY + warmup_s if week == 0 else week * 7 * DAY
            cases.append(Case(f"shared week {week + 1}", shared, start, 7 * DAY - (start - week * 7 * DAY)))
        else:
            # Six hours over the morning ramp of the week's third day (06:00-12:00).
            start = (week * 7 + 2) * DAY + 6 * 3600.0
            cases.append(Case(f"shared week {week + 1}, day 3 06-12h", shared, start, 6 * 3600.0))
    flat = flat_noisy_trace(days=2.0 if full else 1.0, seed=11)
    flat_start = min(warmup_s, flat.duration_s / 4)
    cases.append(Case("no daily cycle", flat, flat_start, (flat.duration_s - flat_start) if full else 6 * 3600.0))
    burst = bursty_trace(minutes=60, seed=0)
    burst_start = min(warmup_s, burst.duration_s / 4)
    cases.append(Case("bursty 1 h", burst, burst_start, burst.duration_s - burst_start))
    return cases


def _fleets(full: bool) -> list[tuple[float, tuple[float, float]]]:
    capacities = (10.0, 40.0, 80.0)
    loads = ((60.0, 120.0), (90.0, 180.0), (180.0, 300.0))
    if full:
        return [(c, lt) for c in capacities for lt in loads]
    return [(10.0, (180.0, 300.0)), (40.0, (90.0, 180.0)), (80.0, (60.0, 120.0))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--full", action="store_true", help="whole weeks and all nine fleets (long)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write every cell's figures here")
    args = parser.parse_args()
    catalog = load_catalog(None)
    base = load_hpa(HPA)
    policies = build_policies(list(POLICIES), base, catalog)
    assert catalog.forecast is not None
    warmup = history_span_s(catalog.forecast)
    started = time.perf_counter()
    cells = []
    print("| trace | pod capacity | load time | knee (req/s) | policy | SLO-violation minutes | GPU-hours | x oracle |")
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for case in _cases(args.full, warmup):
        for capacity, load in _fleets(args.full):
            fleet = FleetConfig(capacity_rps=capacity, base_service_s=0.12, substep_s=0.12, load_delay_s=load)
            sync = 15.0
            config = SimulationConfig(
                fleet=fleet,
                start_s=math.floor((case.trace.start_s + case.start_s) / sync) * sync,
                duration_s=case.duration_s,
            )
            per_pod = knee(config)
            scaled = ScaledTrace(case.trace, peak_rps=PEAK_PODS * per_pod)
            result = simulate(policies, scaled, config, catalog, workers=args.workers)
            for run in result.runs:
                s = run.summary
                minutes, total = int(s["slo_violation_minutes"] or 0), int(s["minutes"] or 0)
                x = s["x_oracle"]
                print(
                    f"| {case.name} | {capacity:g} | {load[0]:g}-{load[1]:g} s | {per_pod:.1f} | {run.policy} | "
                    f"{minutes} ({100 * minutes / max(total, 1):.1f} %) | {float(s['gpu_hours'] or 0):,.0f} | "
                    f"{'-' if x is None else f'{float(x):.2f}'} |",
                    flush=True,
                )
                cells.append(
                    {
                        "trace": case.name,
                        "capacity_rps": capacity,
                        "load_time_s": list(load),
                        "knee_rps": per_pod,
                        "policy": run.policy,
                        **s,
                    }
                )
    print(f"\nwall time {time.perf_counter() - started:.0f} s ({len(cells)} runs)")
    if args.json is not None:
        args.json.write_text(json.dumps(cells, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
