"""The boost's rise quantile, chosen on one week of the shared trace and replayed once on the other.

Week 1 (from 10 h in, when the forecaster has its history, to day 7): the reactive composite once, then the
boosted composite for each quantile of the grid (the shipped catalog with only ``forecast.rise_quantile``
changed). The rule picks the smallest quantile whose boosted composite keeps at most 1 % of minutes in SLO
violation and at least 50 % fewer violation minutes than the reactive one at no more than +10 % GPU-hours
(issue 10's goals); when none does, the one with the fewest violation minutes within +10 %. Week 2 (day 7 to
the end) is then replayed once with the picked quantile, next to the reactive composite: the held-out figures.
Every run is ``python -m adapter simulate`` with the example HPA (``apiservice-manifests/examples/vllm-hpa.yaml``).

Usage: python benchmarks/rise_quantile_cv.py [--grid 0.7,0.75,0.8,0.85,0.9] [--workers 2]
(≈ 4 minutes on 2 cores for a grid of five, on the token engines' default profile and mix)
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import yaml
from simrun import REPO, simulate

CATALOG = REPO / "adapter" / "catalog.yaml"
WEEK_1 = ("--start", "10h", "--duration", "158h")  # to day 7
WEEK_2 = ("--start", "7d")  # to the end
MAX_VIOLATION_SHARE = 0.01
MIN_FEWER = 0.5
MAX_EXTRA_GPU = 0.10


@dataclass(frozen=True)
class Run:
    violation_minutes: int
    minutes: int
    gpu_hours: float
    x_oracle: float

    @property
    def share(self) -> float:
        return self.violation_minutes / self.minutes if self.minutes else 0.0


def _simulate(window: tuple[str, ...], policy: str, catalog: Path, out: Path, workers: int) -> Run:
    t0 = time.perf_counter()
    doc = simulate(["--catalog", str(catalog), "--workers", str(workers), *window], out, policies=[policy])
    print(f"  {' '.join(window)} {policy} {catalog.name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    p = doc["policies"][0]
    return Run(int(p["slo_violation_minutes"]), int(p["minutes"]), float(p["gpu_hours"]), float(p["x_oracle"]))


def _versus(boosted: Run, reactive: Run) -> tuple[float, float]:
    """(share of the reactive violation minutes avoided, extra GPU-hours as a fraction)."""
    fewer = 1.0 - boosted.violation_minutes / reactive.violation_minutes if reactive.violation_minutes else 0.0
    return fewer, boosted.gpu_hours / reactive.gpu_hours - 1.0


def pick(grid: list[float], runs: dict[float, Run], reactive: Run) -> float:
    """The rule of the module docstring."""
    affordable = [q for q in grid if _versus(runs[q], reactive)[1] <= MAX_EXTRA_GPU]
    for q in sorted(affordable):
        fewer, _extra = _versus(runs[q], reactive)
        if runs[q].share <= MAX_VIOLATION_SHARE and fewer >= MIN_FEWER:
            return q
    pool = affordable or grid
    return min(pool, key=lambda q: (runs[q].violation_minutes, q))


def _row(label: str, run: Run, reactive: Run) -> str:
    fewer, extra = _versus(run, reactive)
    return (
        f"| {label} | {run.violation_minutes:,} ({100 * run.share:.2f} %) | {run.gpu_hours:,.0f} | "
        f"{run.x_oracle:.2f} | {100 * fewer:.0f} % fewer at {100 * extra:+.1f} % |"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grid", default="0.7,0.75,0.8,0.85,0.9", help="rise quantiles to try on week 1")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    grid = sorted(float(x) for x in args.grid.split(","))
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    base = yaml.safe_load(CATALOG.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        catalogs: dict[float, Path] = {}
        for q in grid:
            doc = yaml.safe_load(CATALOG.read_text())
            doc["forecast"]["rise_quantile"] = q
            catalogs[q] = Path(tmp) / f"rise-{q:g}.yaml"
            catalogs[q].write_text(yaml.safe_dump(doc, sort_keys=False))
        reactive_1 = _simulate(WEEK_1, "composite", CATALOG, Path(tmp) / "w1-composite.json", args.workers)
        week_1 = {
            q: _simulate(WEEK_1, "boosted", catalogs[q], Path(tmp) / f"w1-{q:g}.json", args.workers) for q in grid
        }
        chosen = pick(grid, week_1, reactive_1)
        reactive_2 = _simulate(WEEK_2, "composite", CATALOG, Path(tmp) / "w2-composite.json", args.workers)
        held_out = _simulate(WEEK_2, "boosted", catalogs[chosen], Path(tmp) / "w2-boosted.json", args.workers)
    model = base["forecast"].get("model")
    print(f"\nforecast model {model}, shipped rise_quantile {base['forecast'].get('rise_quantile')}")
    print("\n| week 1 | violation minutes | GPU-hours | x oracle | vs reactive |")
    print("|---|---:|---:|---:|---|")
    print(_row("reactive composite", reactive_1, reactive_1))
    for q in grid:
        print(_row(f"boosted, rise q {q:g}{' (picked)' if q == chosen else ''}", week_1[q], reactive_1))
    print("\n| week 2 (held out) | violation minutes | GPU-hours | x oracle | vs reactive |")
    print("|---|---:|---:|---:|---|")
    print(_row("reactive composite", reactive_2, reactive_2))
    print(_row(f"boosted, rise q {chosen:g}", held_out, reactive_2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
