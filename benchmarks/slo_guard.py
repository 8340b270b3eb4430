"""The example HPA's SLO guard: the boosted policy without it and with its targets at fractions of the SLO's bounds.

The example HPA (``apiservice-manifests/examples/vllm-hpa.yaml``) lists, beside the boosted composite, the guard:
Pods ``inference_ttft_p99_guard_seconds`` and ``inference_itl_p99_guard_seconds`` at 0.9 x the default SLO's bounds
(TTFT P99 2 s, ITL P99 100 ms). Each cell replays the boosted policy (``simulate --policy boosted``, which keeps the
manifest's guard) through copies of that HPA: without the guard (``none``) and with its two averageValues at each
``--fractions`` x the bounds (``adapter.sim.policies.guard_targets``), nothing else changed. The cells: every engine
profile x request mix on a window of the shared trace (as ``sim_generalization.py``: 2 days after the forecaster's
warm-up, the trace scaled so its peak needs 32 pods at the cell's knee) and, with ``--azure-code``, the vendored
one-hour Azure 2023 code trace with its own per-minute token counts on each profile. It prints per cell and
fraction the violation minutes (any bound), their share and GPU-hours as a multiple of the oracle.

Usage:
  python benchmarks/slo_guard.py [--profile NAME ...] [--mix NAME ...] [--days 2] [--fractions none,0.9,0.8,0.7]
      [--azure-code] [--json FILE] [--write-results]
(default grid with --azure-code: about 6 minutes on 2 idle cores)
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import results_page
import yaml
from simrun import HPA, REPO, TRACE, add_cell_arguments, cell_options, cells, simulate

from adapter.sim.policies import guard_targets
from adapter.sim.profiles import PROFILES
from adapter.sim.readings import GUARD_METRICS
from adapter.sim.slo import DEFAULT_SLO, parse_slo

AZURE_CODE = REPO / "adapter" / "data" / "traces" / "azure_llm_2023_code_1min.csv"
AZURE_COLUMNS = ("--time-col", "timestamp", "--value-col", "requests", "--count",
                 "--prompt-tokens-col", "input_tokens_sum", "--output-tokens-col", "output_tokens_sum")  # fmt: skip


def guarded_hpa(fraction: float | None, out: Path) -> Path:
    """The example HPA with the guard's targets at ``fraction`` x the default SLO's bounds (None: no guard)."""
    manifest = yaml.safe_load(HPA.read_text(encoding="utf-8"))
    metrics = manifest["spec"]["metrics"]
    guard = [m for m in metrics if m.get("pods", {}).get("metric", {}).get("name") in GUARD_METRICS]
    if len(guard) != len(GUARD_METRICS):
        raise SystemExit(f"{HPA} does not list the guard's metrics {GUARD_METRICS}")
    if fraction is None:
        manifest["spec"]["metrics"] = [m for m in metrics if m not in guard]
    else:
        targets = guard_targets(parse_slo(DEFAULT_SLO), fraction)
        for m in guard:
            m["pods"]["target"]["averageValue"] = f"{targets[m['pods']['metric']['name']]:g}"
    out.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return out


def _fractions(text: str) -> list[float | None]:
    out: list[float | None] = []
    for part in text.split(","):
        part = part.strip()
        try:
            out.append(None if part == "none" else float(part))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is neither 'none' nor a number") from None
        if out[-1] is not None and not 0 < out[-1] <= 1:  # type: ignore[operator]
            raise argparse.ArgumentTypeError(f"a fraction of the bound must be in (0, 1], got {part}")
    return out


def _label(fraction: float | None) -> str:
    return "no guard" if fraction is None else f"guard {fraction:g}"


def _cell(run: dict[str, Any]) -> str:
    minutes, total = int(run["slo_violation_minutes"]), int(run["minutes"])
    return f"{minutes:,} ({100 * minutes / max(total, 1):.2f} %) at {float(run['x_oracle']):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_cell_arguments(parser, days=2.0)
    parser.add_argument(
        "--fractions",
        type=_fractions,
        default=_fractions("none,0.9,0.8,0.7"),
        help="comma-separated guard fractions of the SLO's bounds, 'none' for no guard (default none,0.9,0.8,0.7)",
    )
    parser.add_argument(
        "--azure-code", action="store_true", help="also the one-hour Azure code trace with its own token mix"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write every run's simulate figures here")
    results_page.add_arguments(parser)
    args = parser.parse_args(argv)
    command = results_page.command_line(__file__, sys.argv[1:])
    with results_page.recording("slo_guard", args.write_results, command, args.results_file):
        return _run(args, command)


def _run(args: argparse.Namespace, command: str) -> int:
    print(f"command: {command}")
    started = time.perf_counter()
    head = " | ".join(_label(f) for f in args.fractions)
    figures: list[dict[str, Any]] = []
    window = ""
    rows: list[str] = []
    code_rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        hpas = {f: guarded_hpa(f, Path(tmp) / f"hpa-{_label(f).replace(' ', '-')}.yaml") for f in args.fractions}
        runs: list[tuple[str, str, list[str], Path, list[str]]] = [
            (profile, mix, cell_options(args, profile, mix), TRACE, rows) for profile, mix in cells(args)
        ]
        if args.azure_code:
            profiles = args.profile or list(PROFILES)
            runs += [
                (p, "the trace's own", ["--profile", p, "--workers", "1", *AZURE_COLUMNS], AZURE_CODE, code_rows)
                for p in profiles
            ]
        for profile, mix, options, trace, out in runs:
            cells_out = []
            for fraction, hpa in hpas.items():
                t0 = time.perf_counter()
                doc = simulate(options, Path(tmp) / "cell.json", policies=("boosted",), trace=trace, hpa=hpa)
                print(f"  {profile} x {mix} x {_label(fraction)}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                [run] = doc["policies"]
                cells_out.append(_cell(run))
                if trace != AZURE_CODE:
                    inputs = doc["inputs"]
                    window = f"{inputs['duration_s'] / 3_600:g} simulated hours from {inputs['start_s'] / 3_600:.2f} h"
                figures.append(
                    {"profile": profile, "mix": mix, "trace": trace.name, "guard_fraction": fraction, "run": run}
                )
            out.append(f"| {profile} | {mix} | " + " | ".join(cells_out) + " |")
    sep = "|---|---|" + "---:|" * len(args.fractions)
    if rows:
        print(f"\nthe shared trace, {window} into it; boosted policy: violation minutes (share) at x oracle\n")
        print(f"| profile | mix | {head} |\n{sep}")
        print("\n".join(rows))
    if code_rows:
        print(f"\n{AZURE_CODE.name} (its own per-minute token mix); boosted policy, as above\n")
        print(f"| profile | mix | {head} |\n{sep}")
        print("\n".join(code_rows))
    print(f"\nwall time {time.perf_counter() - started:.0f} s ({len(figures)} runs)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
