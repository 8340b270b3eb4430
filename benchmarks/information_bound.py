"""How far the shipped HPA metric is from the best any metric could do: the clairvoyant bound.

The oracle in every ``simulate`` table starts pods instantly; no HPA can. This asks the sharper question:
through the *same* HPA (the example manifest's behaviour: 60 s up-stabilization, 2 pods per 30 s, 300 s
down-stabilization, scale-up tolerance 0.02), the same 30 s-old metrics, model loads and fleet physics, how well
does a metric do that knows the truth? ``simulate --policy clairvoyant:LEAD@TARGET`` has every pod read the
trace's true peak demand over the next LEAD divided by the pod count, so the HPA sizes the fleet at
TARGET per pod (within its tolerances): a perfect capacity model, and (for LEAD > 0) a perfect forecast.

For each lead (``0`` = perfect knowledge of the present only) and each target (a fraction of the fleet's
knee, the per-pod load at which the P99 meets the SLO) it prints violation minutes and GPU-hours against
the oracle, then each lead's frontier read at the shipped boosted composite's violation share
(interpolated between the two grid targets that bracket it), beside the shipped composite and boosted
policies from the same run. If the boosted composite sits on the lead-0 frontier, no metric built from
present observations can beat it by much; what is left needs knowledge of the future.

Usage: python benchmarks/information_bound.py [--trace CSV] [--start 10h] [--days N] [--workers 2] [--write-results]
       [simulate options]
(any other option goes to ``simulate`` as is: ``--catalog``, ``--profile``, ``--load-time``...; whole shared
trace: about 4.5 minutes on 2 cores)
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import results_page
from simrun import REPO, TRACE, simulate

sys.path.insert(0, str(REPO))

from adapter.sim.accounting import frontier_cost  # noqa: E402
from adapter.sim.trace import load_trace  # noqa: E402

LEADS = ("0", "2m", "5m", "10m")
# Targets as fractions of the knee: 1/1.1 puts the controller's default 10 % tolerance band's top at the knee.
FRACTIONS = (1 / 1.1, 0.85, 0.8, 0.75, 0.7, 0.65)
SHIPPED = ("composite", "boosted")


def _simulate(args: argparse.Namespace, policies: list[str], out: Path, *, probe: bool = False) -> dict:
    window = ["--duration", "1h"] if probe else ([] if args.days is None else ["--days", f"{args.days:g}"])
    options = ["--start", args.start, "--workers", str(args.workers), *args.sim, *window]
    return simulate(options, out, policies=policies, trace=args.trace)


def _point(summary: dict) -> tuple[float, float]:
    """(violation share in %, x oracle) of one run."""
    minutes, total = float(summary["slo_violation_minutes"]), float(summary["minutes"])
    return 100.0 * minutes / max(total, 1.0), float(summary["x_oracle"])


def jump_recurrence(
    rates: np.ndarray, per_day: int, *, big: float = 0.3, small: float = 0.15
) -> tuple[int, float, float]:
    """Is a jump's time of day a forecastable fact? For each rise of more than ``big`` between consecutive
    windows: the share of the *other* days with a rise of more than ``small`` within one window of the same
    time of day; the same share averaged over every time of day is the base rate. Equal shares mean the
    jumps land at random times of day: no seasonal model can see them coming.
    Returns (number of big rises, share at their times of day, base rate)."""
    x = np.asarray(rates, dtype=np.float64)
    rise = np.full(x.size, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        rise[1:] = x[1:] / x[:-1] - 1.0

    def share_at(i: int) -> float:
        hits = []
        for j in range(i % per_day, x.size, per_day):
            if j == i:
                continue
            near = rise[max(j - 1, 1) : j + 2]
            if np.isfinite(near).any():
                hits.append(float(np.nanmax(near) > small))
        return float(np.mean(hits)) if hits else math.nan

    jumps = np.flatnonzero(rise > big)
    at_jumps = float(np.nanmean([share_at(int(i)) for i in jumps])) if jumps.size else math.nan
    base = float(np.nanmean([share_at(i) for i in range(1, min(x.size, per_day + 1))]))
    return int(jumps.size), at_jumps, base


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--start", default="10h")
    parser.add_argument("--days", type=float, default=None)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--leads", default=",".join(LEADS), help="comma-separated leads (default: %(default)s)")
    results_page.add_arguments(parser)
    args, args.sim = parser.parse_known_args()  # the rest goes to simulate as is (--profile NAME, ...)
    command = results_page.command_line(__file__, sys.argv[1:])
    with results_page.recording("information_bound", args.write_results, command, args.results_file):
        return _report(args)


def _report(args: argparse.Namespace) -> int:
    """Run the grid and the shipped policies; print the tables; 0 when every run gave a finite point."""
    started = time.perf_counter()
    leads = [lead.strip() for lead in args.leads.split(",") if lead.strip()]
    days = f" --days {args.days:g}" if args.days is not None else ""
    rest = "".join(f" {a}" for a in args.sim)
    which = "" if leads == list(LEADS) else f" --leads {','.join(leads)}"
    print(f"command: python benchmarks/information_bound.py --start {args.start}{days}{which}{rest}")
    with tempfile.TemporaryDirectory() as tmp:
        probe = _simulate(args, ["clairvoyant@1"], Path(tmp) / "probe.json", probe=True)
        knee = float(probe["inputs"]["knee_rps_per_pod"])
        grid = {(lead, f): f"clairvoyant:{lead}@{f * knee:.2f}" for lead in leads for f in FRACTIONS}
        doc = _simulate(args, [*SHIPPED, *grid.values()], Path(tmp) / "runs.json")
    runs = {r["policy"]: r for r in doc["policies"]}
    print(f"knee {knee:.2f} req/s per pod; oracle {float(doc['inputs']['oracle_gpu_hours']):,.0f} GPU-hours\n")
    print("| lead | target (req/s per pod) | x knee | violation minutes | GPU-hours | x oracle |")
    print("|---|---:|---:|---:|---:|---:|")
    frontiers: dict[str, list[tuple[float, float]]] = {}
    for (lead, f), name in grid.items():
        s = runs[name]
        share, x = _point(s)
        frontiers.setdefault(lead, []).append((share, x))
        print(
            f"| {lead} | {f * knee:.2f} | {f:.2f} | {int(s['slo_violation_minutes'])} ({share:.2f} %) | "
            f"{float(s['gpu_hours']):,.0f} | {x:.3f} |"
        )
    heads = " | ".join(f"lead {lead}: x oracle at that share" for lead in leads)
    print(f"\n| shipped policy | violation minutes | x oracle | {heads} |")
    print("|---|---:|---:|" + "---:|" * len(leads))
    for name in SHIPPED:
        share, x = _point(runs[name])
        cells = []
        for lead in leads:
            c = frontier_cost(frontiers[lead], share)
            cells.append("outside the grid" if c is None else f"{c:.3f} ({100 * (x / c - 1):+.1f} %)")
        minutes = int(runs[name]["slo_violation_minutes"])
        print(f"| {name} | {minutes} ({share:.2f} %) | {x:.3f} | " + " | ".join(cells) + " |")
    for lead in leads:
        c = frontier_cost(frontiers[lead], 1.0)
        print(f"lead {lead}: x oracle at 1 % of minutes: {'outside the grid' if c is None else f'{c:.3f}'}")
    trace = load_trace(args.trace)
    per_day = round(86_400.0 / trace.step_s)
    if trace.duration_s >= 2 * 86_400.0:
        n, at, base = jump_recurrence(np.where(trace.good_mask, trace.rates, np.nan), per_day)
        print(
            f"\n{n} rises of > 30 % between consecutive {trace.step_s / 60:g}-minute windows; other days with a rise of"
            f"\n> 15 % within one window of the same time of day: {100 * at:.1f} % (base rate at any time of"
            f" day: {100 * base:.1f} %)"
        )
    print(f"\nwall time {time.perf_counter() - started:.0f} s")
    return 0 if all(math.isfinite(_point(r)[1]) for r in runs.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
