"""The HPA what-if report on the vendored ServeGen trace, and the long closed-loop run against the real server.

Two parts, each printing figures (nothing here is a timed test):

``offline``  every comparison policy on the 14-day ServeGen trace scaled so its peak needs 32 pods at the knee of
             the default engine and mix (a fleet of roughly 5-40 pods), through ``python -m adapter simulate``:
             the Markdown table for docs/results.md, the issue's goal evaluated, and the wall time. Extra
             ``--policy`` flags add rows (e.g. ``boosted:fourier_ar``, ``composite@0.7``).
``live``     ``simulate --live`` for ``--hours`` simulated hours (default 5) at ``--speed`` (default 20, so
             5 h take ~16 wall minutes): simulated fleet -> real Prometheus -> ``adapter serve`` -> the HPA
             model over HTTP -> the fleet. Prints whether a fresh HPA model replaying what the live HPA read
             decides the same at every sync, and the live run next to the offline engine on the same span.

The figures are in docs/results.md.

Usage:
  python benchmarks/simulate_report.py offline [--days 14] [--policy NAME ...] [--out DIR]
  python benchmarks/simulate_report.py live [--hours 5] [--speed 20] [--policy boosted] [--start 6h] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACE = Path("adapter") / "data" / "traces" / "servegen_language_m_mid_10min.csv"  # vendored; from the repo root
HPA = Path("apiservice-manifests") / "examples" / "vllm-hpa.yaml"


def _command(extra: list[str]) -> list[str]:
    return [sys.executable, "-m", "adapter", "simulate", "--trace", str(TRACE), "--hpa", str(HPA), *extra]


def _show(cmd: list[str]) -> str:
    shown = ["python", *cmd[1:]]
    return " ".join(shlex.quote(c) for c in shown)


def offline(args: argparse.Namespace) -> int:
    out: Path = args.out
    extra = ["--json", str(out / "simulate.json"), "--plot", str(out / "simulate.png")]
    if args.days is not None:
        extra += ["--days", str(args.days)]
    for name in args.policy or []:
        extra += ["--policy", name]
    cmd = _command(extra)
    print(f"$ {_show(cmd)}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO)
    if done.returncode:
        return done.returncode
    print(f"\nwall time {time.perf_counter() - started:.0f} s")
    doc = json.loads((out / "simulate.json").read_text())
    goal = doc.get("goal")
    if goal:
        checks = ", ".join(f"{k} {v}" for k, v in goal["checks"].items())
        vs_comp = goal["slo_minutes_vs_composite"]
        print(
            f"goal ({goal['boosted_policy']}): {100 * goal['slo_minutes_share']:.2f} % of minutes in violation, "
            f"{'-' if goal['x_oracle'] is None else format(goal['x_oracle'], '.2f')} x oracle GPU-hours, "
            f"violation minutes {'-' if vs_comp is None else format(vs_comp, '.2f')} x and GPU-hours "
            f"{goal['gpu_hours_vs_composite']:.3f} x the reactive composite's: {checks} "
            f"=> {'met' if goal['met'] else 'not met'}"
        )
        base = goal.get("gpu_baseline")
        if base:
            print(
                f"vs gpu-utilization-only: {base['slo_minutes']} violation minutes there; boosted uses "
                f"{base['gpu_hours_share']:.2f} x its GPU-hours "
                f"(SLO at least as good: {base['at_most_its_slo_minutes']})"
            )
    for p in doc["policies"]:
        if p.get("forecast"):
            f = p["forecast"]
            print(
                f"{p['policy']}: {f['fits']} fits ({f['fit_seconds']:.1f} s), reasons {f['reasons']}, "
                f"mean boost {f['mean_boost']:.3f}, "
                f"boost > 1 at {100 * f['boosted_sync_share']:.0f} % of syncs"
            )
    return 0


def live(args: argparse.Namespace) -> int:
    out: Path = args.out
    extra = [
        "--live",
        "--policy",
        args.policy,
        "--start",
        args.start,
        "--duration",
        f"{args.hours:g}h",
        "--speed",
        f"{args.speed:g}",
        "--json",
        str(out / "simulate-live.json"),
        "--plot",
        str(out / "simulate-live.png"),
    ]
    cmd = _command(extra)
    print(f"$ {_show(cmd)}", flush=True)
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=REPO)
    print(f"\nwall time {time.perf_counter() - started:.0f} s")
    if (out / "simulate-live.json").exists():
        doc = json.loads((out / "simulate-live.json").read_text())
        cmp = doc["offline_comparison"]
        print(
            f"syncs {doc['syncs']}, failed reads {doc['read_errors']}, late syncs {doc['late_syncs']}, "
            f"replay matches: {doc['replay']['matches']} ({doc['replay']['mismatch_count']} mismatches); "
            f"replicas live vs offline: mean |diff| {cmp['replicas_mean_abs_diff']:.2f}, "
            f"correlation {cmp['replicas_correlation']}"
        )
        minutes = ", ".join(f"{k} {v['live']} vs {v['offline']}" for k, v in cmp.get("violation_minutes", {}).items())
        print(f"violation minutes live vs offline: {minutes}")
    return done.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    sub = parser.add_subparsers(dest="part", required=True)
    p_off = sub.add_parser("offline")
    p_off.add_argument("--days", type=float, default=None, help="default: the whole trace (14 days)")
    p_off.add_argument("--policy", action="append", help="default: the five comparison policies")
    p_live = sub.add_parser("live")
    p_live.add_argument("--hours", type=float, default=5.0)
    p_live.add_argument("--speed", type=float, default=20.0)
    p_live.add_argument("--policy", default="boosted")
    p_live.add_argument("--start", default="6h", help="where in the trace the fleet starts (default 6h)")
    for p in (p_off, p_live):
        p.add_argument(
            "--out",
            type=Path,
            default=Path(tempfile.gettempdir()) / "llm-hpa-simulate",
            help="where the JSON and PNG go (default: <tmp>/llm-hpa-simulate)",
        )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    return offline(args) if args.part == "offline" else live(args)


if __name__ == "__main__":
    sys.exit(main())
