"""The shipped example HPA after ``calibrate``, on fleets nobody tuned for, against a clairvoyant's GPU-hours.

For each fleet (pod capacity, service time, model-load time, SLO): ``calibrate --simulate`` proposes the
composite's targets (with the shared trace's demand growth), then ``python -m adapter simulate`` replays the
shared trace through the example HPA (``apiservice-manifests/examples/vllm-hpa.yaml``, unchanged) for the
boosted composite, the reactive composite and GPU-utilization-only. The oracle is ``simulate``'s own (pods
start instantly and each carries exactly its fleet model's knee load); the calibrated knee is printed beside it.
Every fleet's trace is scaled so its peak needs as many pods at the fleet's knee as the reference fleet's does
(``simulate``'s default, 32 pods of 40 req/s: 1,280 req/s, 37 pods at its 34.3 req/s knee), so the example
HPA's ``maxReplicas: 40`` is as far from binding on every fleet; a fleet whose knee sits far below its capacity
(the 2-slot one) would otherwise need more pods at its peak than ``maxReplicas`` allows.
``--fleet reference`` simulates with the base catalog as is (the shipped targets are what ``calibrate`` proposes
for that fleet).

Usage: python benchmarks/calibrate_fleets.py [--days 3] [--fleet NAME ...] [--catalog FILE] [--start auto]
(~1 minute per fleet per 2 days on a loaded 2-core machine)
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml
from simrun import REPO, TRACE, simulate

from adapter.calibrate.history import simulated_history
from adapter.calibrate.knee import calibrate
from adapter.catalog import load_catalog
from adapter.cli.series_input import parse_duration
from adapter.sim.accounting import frontier_cost
from adapter.sim.fleet import FleetConfig
from adapter.sim.simulate import latency_window
from adapter.sim.trace import load_trace

# name: (pod capacity req/s, service time, load-time range, P99 SLO). The SLO must sit above the idle P99
# (about 3.4 x the service time at sigma 0.6): a fleet that misses it at zero load has no knee.
FLEETS: dict[str, tuple[float, str, str, str]] = {
    "reference": (40.0, "120ms", "90s..180s", "0.8s"),
    "small-fast-load": (10.0, "120ms", "60s..120s", "0.8s"),
    "big-slow-load": (80.0, "120ms", "200s..300s", "0.8s"),
    "slow-model": (40.0, "300ms", "90s..180s", "2s"),
    "fast-model": (25.0, "60ms", "60s..300s", "0.8s"),
}
POLICIES = ("boosted", "composite", "gpu")
REFERENCE_PEAK_PODS = 32  # simulate's default --peak-pods, at the reference fleet's capacity
# --bound: clairvoyant targets as fractions of the knee (benchmarks/information_bound.py's grid).
BOUND_FRACTIONS = (1 / 1.1, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6)


def _catalog_for(fleet: str, out: Path, base_path: Path | None) -> tuple[Path | None, float]:
    """Calibrate ``fleet``; the catalog file to simulate with (None = embedded) and the knee (req/s per pod)."""
    cap, service, _load, slo = FLEETS[fleet]
    base = load_catalog(base_path)
    terms = base.composites["llm_composite_load"].terms
    cfg = FleetConfig(
        capacity_rps=cap, base_service_s=parse_duration(service), substep_s=min(0.5, parse_duration(service))
    )
    trace = load_trace(TRACE)
    demand = np.where(trace.good_mask, np.asarray(trace.rates, dtype=np.float64), np.nan)
    cal = calibrate(
        simulated_history(
            cfg,
            terms,
            slo_s=parse_duration(slo),
            deployment_load=demand,
            deployment_step_s=trace.step_s,
            latency_window_s=latency_window(base),
        ),
        terms,
        slo_s=parse_duration(slo),
    )
    if cal.knee_rps is None:
        raise SystemExit(f"{fleet}: no knee: {cal.warnings}")
    if fleet == "reference":
        return base_path, cal.knee_rps
    doc = yaml.safe_load((base_path or REPO / "adapter" / "catalog.yaml").read_text())
    doc["composites"]["llm_composite_load"]["terms"] = [
        {
            "metric": p.metric,
            "weight": p.weight,
            "target": round(p.target, 4),
            "idle": round(p.idle, 4),
            **({"when_missing": "idle"} if p.metric == "inference_latency_p99_seconds" else {}),
            **({"flat": True} if p.metric in cal.marked_flat else {}),
        }
        for p in cal.terms
    ]
    path = out / f"{fleet}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path, cal.knee_rps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=float, default=3.0, help="simulated days per fleet (default 3; 14 = all)")
    parser.add_argument("--fleet", action="append", choices=sorted(FLEETS), help="default: every fleet")
    parser.add_argument(
        "--catalog",
        type=Path,
        default=None,
        help="base catalog (default: the embedded one); each fleet gets its calibrated composite",
    )
    parser.add_argument("--start", default="auto", help="simulate --start (default auto: after the warm-up)")
    parser.add_argument(
        "--bound",
        action="store_true",
        help="also run the clairvoyant yardstick (benchmarks/information_bound.py) at lead 0 per fleet",
    )
    args = parser.parse_args(argv)
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    rows = []
    frontiers: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        calibrated = {"reference": _catalog_for("reference", Path(tmp), args.catalog)}  # sizes every fleet's trace
        reference_knee = calibrated["reference"][1]
        reference_peak = REFERENCE_PEAK_PODS * FLEETS["reference"][0]
        for fleet in args.fleet or list(FLEETS):
            cap, service, load, slo = FLEETS[fleet]
            if fleet not in calibrated:
                calibrated[fleet] = _catalog_for(fleet, Path(tmp), args.catalog)
            catalog, knee = calibrated[fleet]
            out = Path(tmp) / f"{fleet}.json"
            peak_rps = reference_peak * knee / reference_knee  # the reference itself: exactly simulate's default
            options = ["--pod-capacity", f"{cap:g}", "--service-time", service, "--load-time", load]
            options += ["--peak-rps", f"{peak_rps:.6g}"]
            options += ["--slo-p99", slo, "--days", f"{args.days:g}", "--start", args.start, "--workers", "2"]
            if catalog is not None:
                options += ["--catalog", str(catalog)]
            bound = {f: f"clairvoyant@{f * knee:.2f}" for f in BOUND_FRACTIONS} if args.bound else {}
            t0 = time.perf_counter()
            doc = simulate(options, out, policies=[*POLICIES, *bound.values()])
            print(f"  {fleet}: trace peak {peak_rps:,.0f} req/s, {time.perf_counter() - t0:.0f} s", file=sys.stderr)
            # simulate's own oracle: its fleet model's knee (the calibrated knee agrees within a bin).
            oracle = float(doc["policies"][0]["oracle_gpu_hours"])
            minutes = round(doc["inputs"]["duration_s"] / 60)
            by = {p["policy"]: p for p in doc["policies"]}
            rows.append((fleet, cap, service, load, slo, knee, oracle, minutes, by))
            if bound:
                curve = [
                    (100 * by[n]["slo_violation_minutes"] / minutes, by[n]["gpu_hours"] / oracle)
                    for n in bound.values()
                ]
                frontiers[fleet] = curve
    print(
        "\n| fleet | capacity | service | load time | SLO | knee | oracle GPU-h | policy | violation minutes | "
        "GPU-hours | × oracle |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---|---:|---:|---:|")
    for fleet, cap, service, load, slo, knee, oracle, minutes, by in rows:
        for p in POLICIES:
            r = by[p]
            v = r["slo_violation_minutes"]
            print(
                f"| {fleet} | {cap:g} | {service} | {load} | {slo} | {knee:.1f} | {oracle:,.0f} | {p} | "
                f"{v:,} ({100 * v / minutes:.1f} %) | {r['gpu_hours']:,.0f} | {r['gpu_hours'] / oracle:.2f} |"
            )
    print("\nboosted vs composite: violation minutes, GPU-hours")
    for fleet, *_rest, by in rows:
        b, c = by["boosted"], by["composite"]
        fewer = (
            (1 - b["slo_violation_minutes"] / c["slo_violation_minutes"])
            if c["slo_violation_minutes"]
            else (0.0 if b["slo_violation_minutes"] == 0 else -math.inf)
        )
        print(
            f"- {fleet}: {100 * fewer:+.0f} % fewer minutes, {100 * (b['gpu_hours'] / c['gpu_hours'] - 1):+.1f} % "
            "GPU-hours"
        )
    if frontiers:
        print(
            "\nthe present-knowledge frontier (clairvoyant, lead 0, targets "
            + ", ".join(f"{f:.2f}" for f in BOUND_FRACTIONS)
            + " x knee) read at each policy's violation share:"
        )
        print("| fleet | policy | violation share | x oracle | frontier x oracle there | above it |")
        print("|---|---|---:|---:|---:|---:|")
        for fleet, _cap, _service, _load, _slo, _knee, oracle, minutes, by in rows:
            for p in ("composite", "boosted"):
                share = 100 * by[p]["slo_violation_minutes"] / minutes
                x = by[p]["gpu_hours"] / oracle
                c = frontier_cost(frontiers[fleet], share)
                there = "outside the grid" if c is None else f"{c:.3f}"
                gap = "" if c is None else f"{100 * (x / c - 1):+.1f} %"
                print(f"| {fleet} | {p} | {share:.2f} % | {x:.3f} | {there} | {gap} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
