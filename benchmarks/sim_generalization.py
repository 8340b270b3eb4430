"""The shipped HPA and catalog, not recalibrated, on engine profiles and request mixes they were not set on.

Every cell replays one window of the shared 14-day trace (default: 2 days after the forecaster's warm-up, as
``simulate --start auto`` does) through token-level vLLM engines of one profile (``adapter/sim/profiles.py``)
serving one request mix (``adapter/sim/mix.py``), with the shipped example HPA
(``apiservice-manifests/examples/vllm-hpa.yaml``) and the embedded catalog, for the reactive and the boosted
composite: ``python -m adapter simulate --profile P --mix M`` with simulate's defaults (SLO ``ttft=2s,itl=100ms``,
the trace scaled so its peak needs 32 pods at the knee of the mix). It prints per cell the knee (the largest
per-pod load of the mix at which every bound holds), violation minutes (any bound, TTFT, ITL), GPU-hours, GPU-hours
as a multiple of the oracle (pods start instantly and each carries the knee load) and of the static fleet sized for
the window's busiest minute (always on), which is printed as a row of its own. Nothing is tuned here: the figures
show how far the shipped defaults carry; ``calibrate_fleets.py`` recalibrates each cell.

Usage:
  python benchmarks/sim_generalization.py [--profile NAME ...] [--mix NAME ...] [--days 2] [--start auto]
      [--workers 2] [--json FILE] [--write-results]
(default grid, 2 profiles x 3 mixes x 2 days: about 3 minutes on 2 idle cores; ``--days 0`` replays the whole
trace, ≈ 15 minutes)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import results_page
from simrun import RUN_HEAD, add_cell_arguments, cell_options, cells, run_cells, simulate, static_cells

POLICIES = ("composite", "boosted")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_cell_arguments(parser, days=2.0)
    parser.add_argument("--json", type=Path, default=None, help="also write every cell's simulate figures here")
    results_page.add_arguments(parser)
    args = parser.parse_args(argv)
    command = results_page.command_line(__file__, sys.argv[1:])
    with results_page.recording("sim_generalization", args.write_results, command, args.results_file):
        return _run(args, command)


def _run(args: argparse.Namespace, command: str) -> int:
    print(f"command: {command}")
    started = time.perf_counter()
    rows: list[str] = []
    figures = []
    window = ""
    with tempfile.TemporaryDirectory() as tmp:
        for profile, mix in cells(args):
            t0 = time.perf_counter()
            doc = simulate(cell_options(args, profile, mix), Path(tmp) / "cell.json", policies=POLICIES)
            print(f"  {profile} x {mix}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            inputs = doc["inputs"]
            knee = float(inputs["knee_rps_per_pod"])
            slo = ", ".join(f"{k} {v:g} s" for k, v in inputs["slo"].items())
            window = (
                f"{inputs['duration_s'] / 3_600:g} simulated hours from {inputs['start_s'] / 3_600:.2f} h into the "
                f"trace; P99 bounds {slo}"
            )
            cell = f"| {profile} | {mix} | {knee:.2f}"
            rows += [f"{cell} | {run['policy']} | {run_cells(run)} |" for run in doc["policies"]]
            rows.append(f"{cell} | static peak | {static_cells(doc)} |")
            figures.append(
                {
                    "profile": profile,
                    "mix": mix,
                    "inputs": inputs,
                    "policies": [{k: v for k, v in r.items() if k != "forecast"} for r in doc["policies"]],
                }
            )
    print(f"\n{window}; the shipped example HPA and catalog\n")
    print(f"| profile | mix | knee (req/s per pod) | policy | {RUN_HEAD} |")
    print("|---|---|---:|---|" + "---:|" * len(RUN_HEAD.split(" | ")))
    print("\n".join(rows))
    print(f"\nwall time {time.perf_counter() - started:.0f} s ({len(figures)} cells)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
