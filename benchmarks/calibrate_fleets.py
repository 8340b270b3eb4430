"""The example HPA after ``calibrate``, per engine profile and request mix, against the shipped catalog.

For each cell (an engine profile of ``adapter/sim/profiles.py`` serving a request mix of ``adapter/sim/mix.py``):
``python -m adapter calibrate --simulate --profile P --mix M --trace <shared trace>`` proposes the
composite's targets (with the shared trace's demand growth as headroom), written into a copy of the base catalog
(default: the embedded one; only that composite's terms change). Then ``python -m adapter simulate --profile P
--mix M`` replays one window of the shared trace (default: 2 days after the forecaster's warm-up) through the
example HPA (``apiservice-manifests/examples/vllm-hpa.yaml``, unchanged) for the reactive and the boosted
composite, once with the base catalog and once with the calibrated one. ``simulate``'s defaults hold throughout
(SLO ``ttft=2s,itl=100ms``, the trace scaled so its peak needs 32 pods at the knee of the mix) and its own oracle
(pods start instantly and each carries the knee load) and static peak fleet (sized for the busiest minute,
always on) are the yardsticks. ``--bound`` also runs the clairvoyant at lead 0 (``benchmarks/information_bound.py``)
per cell and reads its frontier at each policy's violation share.

Usage: python benchmarks/calibrate_fleets.py [--profile NAME ...] [--mix NAME ...] [--days 2] [--start auto]
       [--workers 2] [--catalog FILE] [--growth-quantile Q] [--bound] [--write-results]
(default grid, 2 profiles x 3 mixes x 2 days: about 5 minutes on 2 idle cores; ``--days 0`` replays the whole
trace, about 25 minutes)
"""

from __future__ import annotations

import argparse
import copy
import json
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import results_page
import yaml
from simrun import REPO, RUN_HEAD, TRACE, add_cell_arguments, cell_options, cells, run_cells, simulate, static_cells

from adapter.sim.accounting import frontier_cost

CATALOG = REPO / "adapter" / "catalog.yaml"
POLICIES = ("composite", "boosted")
# --bound: clairvoyant targets as fractions of the knee (benchmarks/information_bound.py's grid).
BOUND_FRACTIONS = (1 / 1.1, 0.85, 0.8, 0.75, 0.7, 0.65, 0.6)
SHORT = {"gpu_utilization_p90": "GPU", "inference_queue_depth": "queue", "inference_itl_p99_seconds": "ITL P99"}


@dataclass(frozen=True)
class Calibrated:
    """What ``calibrate --simulate`` proposed for one cell; ``catalog`` None when it found no knee."""

    knee: float | None
    safe: float | None
    terms: list[dict[str, Any]]
    warnings: list[str]
    catalog: Path | None


def terms_text(terms: list[dict[str, Any]]) -> str:
    """``GPU 27.3 (idle 4), queue 8, ITL P99 0.0596 (idle 0) e 1.7``: each term's target and idle, ``flat`` marked,
    its elasticity when not 1."""
    out = []
    for t in terms:
        idle = f" (idle {float(t['idle']):.3g})" if t.get("idle") not in (None, 0, 0.0) else ""
        flat = " flat" if t.get("flat") else ""
        e = float(t.get("elasticity", 1.0))
        grows = f" e {e:g}" if e != 1.0 else ""
        out.append(f"{SHORT.get(t['metric'], t['metric'])} {float(t['target']):.3g}{idle}{flat}{grows}")
    return ", ".join(out)


def with_terms(base: dict[str, Any], composite: str, terms: list[dict[str, Any]], note: str) -> dict[str, Any]:
    """A copy of the catalog document ``base`` whose composite ``composite`` has ``terms``; the rest unchanged."""
    doc = copy.deepcopy(base)
    doc["composites"][composite]["terms"] = terms
    doc["composites"][composite]["help"] = note
    return doc


def _calibrate(
    profile: str, mix: str, base: Path | None, tmp: Path, growth_quantile: float | None = None
) -> Calibrated:
    """``calibrate --simulate`` for one cell (``--growth-quantile`` when given), and the calibrated catalog it
    implies."""
    report, snippet = tmp / f"{profile}-{mix}.json", tmp / f"{profile}-{mix}-snippet.yaml"
    cmd = [sys.executable, "-m", "adapter", "calibrate", "--simulate", "--profile", profile]
    cmd += ["--mix", mix, "--trace", str(TRACE), "--json", str(report), "--catalog-out", str(snippet)]
    cmd += ["--catalog", str(base)] if base is not None else []
    cmd += ["--growth-quantile", f"{growth_quantile:g}"] if growth_quantile is not None else []
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if done.returncode not in (0, 1):
        raise SystemExit(f"calibrate failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    cal = json.loads(report.read_text())
    if done.returncode == 1 or not snippet.exists():
        return Calibrated(None, None, [], list(cal.get("warnings") or []), None)
    composite = cal["composite"]
    terms = yaml.safe_load(snippet.read_text())["composites"][composite]["terms"]
    doc = with_terms(
        yaml.safe_load((base or CATALOG).read_text()),
        composite,
        terms,
        f"calibrate --simulate --profile {profile} --mix {mix} (benchmarks/calibrate_fleets.py)",
    )
    path = tmp / f"{profile}-{mix}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return Calibrated(cal["knee_rps_per_pod"], cal["safe_rps_per_pod"], terms, list(cal["warnings"]), path)


@dataclass(frozen=True)
class Cell:
    profile: str
    mix: str
    calibrated: Calibrated
    shipped: dict[str, Any]  # simulate's JSON with the base catalog
    tuned: dict[str, Any] | None  # ... with the calibrated catalog (None: no knee)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_cell_arguments(parser, days=2.0)
    parser.add_argument("--catalog", type=Path, default=None, help="base catalog (default: the embedded one)")
    parser.add_argument(
        "--bound", action="store_true", help="also run the clairvoyant yardstick at lead 0 per cell (slower)"
    )
    parser.add_argument(
        "--growth-quantile",
        type=float,
        default=None,
        help="calibrate --growth-quantile for every cell (default: calibrate's own)",
    )
    results_page.add_arguments(parser)
    args = parser.parse_args(argv)
    command = results_page.command_line(__file__, sys.argv[1:])
    with results_page.recording("calibrate_fleets", args.write_results, command, args.results_file):
        return _run(args, command)


def _run(args: argparse.Namespace, command: str) -> int:
    print(f"command: {command}")
    started = time.perf_counter()
    base_doc = yaml.safe_load((args.catalog or CATALOG).read_text())
    composite = base_doc["forecast"]["base"]
    done: list[Cell] = []
    frontiers: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for profile, mix in cells(args):
            t0 = time.perf_counter()
            cal = _calibrate(profile, mix, args.catalog, Path(tmp), args.growth_quantile)
            options = cell_options(args, profile, mix)
            base = ["--catalog", str(args.catalog)] if args.catalog is not None else []
            shipped = simulate([*options, *base], Path(tmp) / "shipped.json", policies=POLICIES)
            knee = float(shipped["inputs"]["knee_rps_per_pod"])
            bound = {f: f"clairvoyant@{f * knee:.4g}" for f in BOUND_FRACTIONS} if args.bound else {}
            tuned = None
            if cal.catalog is not None:
                tuned = simulate(
                    [*options, "--catalog", str(cal.catalog)],
                    Path(tmp) / "tuned.json",
                    policies=[*POLICIES, *bound.values()],
                )
                if bound:
                    by = {r["policy"]: r for r in tuned["policies"]}
                    frontiers[(profile, mix)] = [_point(by[name]) for name in bound.values()]
            done.append(Cell(profile, mix, cal, shipped, tuned))
            print(f"  {profile} x {mix}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    _report(done, frontiers, base_doc["composites"][composite]["terms"], composite)
    print(f"\nwall time {time.perf_counter() - started:.0f} s ({len(done)} cells)")
    return 0


def _point(run: dict[str, Any]) -> tuple[float, float]:
    """(violation share in %, x oracle) of one run."""
    return 100.0 * float(run["slo_violation_minutes"]) / max(float(run["minutes"]), 1.0), float(run["x_oracle"])


def _report(
    done: list[Cell], frontiers: dict[tuple[str, str], list[tuple[float, float]]], shipped: list[Any], name: str
) -> None:
    inputs = done[0].shipped["inputs"]
    slo = ", ".join(f"{k} {v:g} s" for k, v in inputs["slo"].items())
    print(
        f"\n{inputs['duration_s'] / 3_600:g} simulated hours from {inputs['start_s'] / 3_600:.2f} h into the trace; "
        f"P99 bounds {slo}; the example HPA"
    )
    print(f"shipped {name}: {terms_text(shipped)}\n")
    print("| profile | mix | knee: calibrate | knee: simulate | safe point | proposed terms (target, idle) |")
    print("|---|---|---:|---:|---:|---|")
    for c in done:
        k = c.calibrated
        knee = float(c.shipped["inputs"]["knee_rps_per_pod"])
        if k.catalog is None:
            print(f"| {c.profile} | {c.mix} | not reached | {knee:.2f} | - | {'; '.join(k.warnings) or '-'} |")
        else:
            assert k.knee is not None and k.safe is not None
            print(f"| {c.profile} | {c.mix} | {k.knee:.2f} | {knee:.2f} | {k.safe:.2f} | {terms_text(k.terms)} |")
    print(f"\n| profile | mix | catalog | policy | {RUN_HEAD} |")
    print("|---|---|---|---|" + "---:|" * len(RUN_HEAD.split(" | ")))
    for c in done:
        for label, doc in (("shipped", c.shipped), ("calibrated", c.tuned)):
            for run in [] if doc is None else doc["policies"]:
                if run["policy"] in POLICIES:
                    print(f"| {c.profile} | {c.mix} | {label} | {run['policy']} | {run_cells(run)} |")
        print(f"| {c.profile} | {c.mix} | - | static peak | {static_cells(c.shipped)} |")
    print("\ncalibrated vs shipped:\n")
    print("| profile | mix | " + " | ".join(f"{p}: violation minutes | {p}: GPU-hours" for p in POLICIES) + " |")
    print("|---|---|" + "---:|---:|" * len(POLICIES))
    for c in done:
        if c.tuned is None:
            print(f"| {c.profile} | {c.mix} | " + " | ".join("no knee" for _ in range(2 * len(POLICIES))) + " |")
            continue
        before = {r["policy"]: r for r in c.shipped["policies"]}
        after = {r["policy"]: r for r in c.tuned["policies"]}
        parts = [
            f"{int(before[p]['slo_violation_minutes']):,} -> {int(after[p]['slo_violation_minutes']):,} | "
            f"{100 * (float(after[p]['gpu_hours']) / float(before[p]['gpu_hours']) - 1) + 0.0:+.1f} %"
            for p in POLICIES
        ]
        print(f"| {c.profile} | {c.mix} | " + " | ".join(parts) + " |")
    if frontiers:
        print(
            "\nthe present-knowledge frontier (clairvoyant, lead 0, targets "
            + ", ".join(f"{f:.2f}" for f in BOUND_FRACTIONS)
            + " x knee)\nread at each policy's violation share:\n"
        )
        print("| profile | mix | catalog | policy | violation share | x oracle | frontier x oracle there | above it |")
        print("|---|---|---|---|---:|---:|---:|---:|")
        for c in done:
            curve = frontiers.get((c.profile, c.mix))
            if curve is None or c.tuned is None:
                continue
            for label, doc in (("shipped", c.shipped), ("calibrated", c.tuned)):
                by = {r["policy"]: r for r in doc["policies"]}
                for p in POLICIES:
                    share, x = _point(by[p])
                    cost = frontier_cost(curve, share)
                    there = "outside the grid" if cost is None else f"{cost:.3f}"
                    gap = "" if cost is None else f"{100 * (x / cost - 1):+.1f} %"
                    print(f"| {c.profile} | {c.mix} | {label} | {p} | {share:.2f} % | {x:.3f} | {there} | {gap} |")


if __name__ == "__main__":
    raise SystemExit(main())
