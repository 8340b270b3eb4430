"""What the simulator benchmarks share: the shared trace, the example HPA, and one ``simulate`` run.

``calibrate_fleets.py``, ``rise_quantile_cv.py``, ``information_bound.py`` and ``sim_generalization.py`` each
replay the shared trace through ``python -m adapter simulate`` in a child process (its ``--workers`` fork their own)
and read its JSON. ``calibrate_fleets.py`` and ``sim_generalization.py`` run a grid of token-engine cells (engine
profile x request mix) on one window of the trace: ``add_cell_arguments``, ``cells``, ``cell_options`` and the row
helpers below.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACE = REPO / "adapter" / "data" / "traces" / "servegen_language_m_mid_10min.csv"
HPA = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"
if str(REPO) not in sys.path:  # this checkout's adapter, not an installed one
    sys.path.insert(0, str(REPO))

from adapter.sim.mix import MIXES  # noqa: E402
from adapter.sim.profiles import PROFILES  # noqa: E402


def simulate(
    args: Sequence[str], out: Path, *, policies: Sequence[str], trace: Path = TRACE, hpa: Path = HPA
) -> dict[str, Any]:
    """``python -m adapter simulate --trace TRACE --hpa HPA ARGS --json OUT --policy P ...`` on this checkout (HPA:
    the example's by default); the JSON document it wrote. A failed run ends the benchmark with simulate's own
    message."""
    cmd = [sys.executable, "-m", "adapter", "simulate", "--trace", str(trace), "--hpa", str(hpa), *args]
    cmd += ["--json", str(out), *(x for p in policies for x in ("--policy", p))]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        raise SystemExit(f"simulate failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    doc: dict[str, Any] = json.loads(out.read_text())
    return doc


def add_cell_arguments(parser: argparse.ArgumentParser, *, days: float) -> None:
    """``--profile``, ``--mix`` (each repeatable; default: every one), ``--days``, ``--start`` and ``--workers``."""
    parser.add_argument(
        "--profile", action="append", choices=sorted(PROFILES), help="engine profile (repeatable; default: all)"
    )
    parser.add_argument("--mix", action="append", choices=sorted(MIXES), help="request mix (repeatable; default: all)")
    parser.add_argument(
        "--days", type=float, default=days, help=f"simulated days per run (default {days:g}; 0: to the trace's end)"
    )
    parser.add_argument("--start", default="auto", help="simulate --start (default auto: after the forecast warm-up)")
    parser.add_argument("--workers", type=int, default=2, help="simulate --workers (default 2)")


def cells(args: argparse.Namespace) -> list[tuple[str, str]]:
    """Every (profile, mix) asked for, profiles outermost, in registry order unless given."""
    return list(itertools.product(args.profile or list(PROFILES), args.mix or list(MIXES)))


def cell_options(args: argparse.Namespace, profile: str, mix: str) -> list[str]:
    """``simulate`` options of one cell: token engines of ``profile`` serving ``mix``, on the window of ``args``."""
    return [
        *("--profile", profile, "--mix", mix),
        *("--start", args.start, "--workers", str(args.workers)),
        *(("--days", f"{args.days:g}") if args.days else ()),
    ]


RUN_HEAD = "violation minutes (any) | TTFT | ITL | GPU-hours | x oracle | x static peak"


def run_cells(run: dict[str, Any]) -> str:
    """One policy's ``RUN_HEAD`` cells from its entry in ``simulate``'s JSON."""
    minutes, total = int(run["slo_violation_minutes"]), int(run["minutes"])
    x_static = run.get("x_static_peak")
    return (
        f"{minutes:,} ({100 * minutes / max(total, 1):.1f} %) | {int(run.get('ttft_violation_minutes') or 0):,} | "
        f"{int(run.get('itl_violation_minutes') or 0):,} | {float(run['gpu_hours']):,.0f} | "
        f"{_ratio(run.get('x_oracle'))} | {_ratio(x_static)}"
    )


def static_cells(doc: dict[str, Any]) -> str:
    """``RUN_HEAD`` cells of the static fleet sized for the window's busiest minute at the knee (always on; no
    violation by construction), from ``simulate``'s JSON inputs."""
    static, oracle = doc["inputs"].get("static_peak_gpu_hours"), doc["inputs"].get("oracle_gpu_hours")
    x = float(static) / float(oracle) if static is not None and oracle else None
    return f"0 | 0 | 0 | {'-' if static is None else f'{float(static):,.0f}'} | {_ratio(x)} | {_ratio(1.0)}"


def _ratio(x: Any) -> str:
    return "-" if x is None else f"{float(x):.2f}"
