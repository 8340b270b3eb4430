"""The example HPA's SLO guard: the boosted policy without it and with its targets at fractions of the SLO's bounds.

The example HPA (``apiservice-manifests/examples/vllm-hpa.yaml``) lists, beside the boosted composite, the guard:
Pods ``inference_ttft_p99_guard_seconds_boosted`` and ``inference_itl_p99_guard_seconds_boosted`` (the P99s at the
forecast's load: each P99 x the boost) at 0.9 x the default SLO's bounds (TTFT P99 2 s, ITL P99 100 ms). Each cell
replays the boosted policy (``simulate --policy boosted``, which keeps the manifest's guard) through copies of that
HPA: without the guard (``none``), with its two averageValues at each ``--guards`` fraction x the bounds
(``adapter.sim.policies.guard_targets``), and with ``present@F`` on the present P99s (``*_guard_seconds``) at F x
the bounds, nothing else changed. The cells: every engine profile x request mix on a window of the shared trace (as
``sim_generalization.py``: 2 days after the forecaster's warm-up, the trace scaled so its peak needs 32 pods at the
cell's knee) and, with ``--azure``, the vendored one-hour Azure 2023 code and conversation traces with their own
per-minute token counts on each profile. It prints per cell and guard the violation minutes (any bound), their
share and GPU-hours as a multiple of the oracle.

Usage:
  python benchmarks/slo_guard.py [--profile NAME ...] [--mix NAME ...] [--days 2]
      [--guards none,present@0.9,0.9,0.8] [--azure] [--json FILE] [--write-results]
(default grid with --azure: about 8 minutes on 2 idle cores)
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
from adapter.sim.readings import BOOSTED_GUARD_METRICS
from adapter.sim.slo import DEFAULT_SLO, parse_slo

TRACES = REPO / "adapter" / "data" / "traces"
AZURE = (TRACES / "azure_llm_2023_code_1min.csv", TRACES / "azure_llm_2023_conv_1min.csv")
AZURE_COLUMNS = ("--time-col", "timestamp", "--value-col", "requests", "--count",
                 "--prompt-tokens-col", "input_tokens_sum", "--output-tokens-col", "output_tokens_sum")  # fmt: skip

Guard = tuple[bool, float] | None  # (on the P99s at the forecast's load, fraction of the bounds); None: no guard


def guarded_hpa(guard: Guard, out: Path) -> Path:
    """The example HPA with the guard's targets at a fraction x the default SLO's bounds, on the boosted P99s (as
    shipped) or the present ones (None: no guard)."""
    manifest = yaml.safe_load(HPA.read_text(encoding="utf-8"))
    metrics = manifest["spec"]["metrics"]
    found = [m for m in metrics if m.get("pods", {}).get("metric", {}).get("name") in BOOSTED_GUARD_METRICS]
    if len(found) != len(BOOSTED_GUARD_METRICS):
        raise SystemExit(f"{HPA} does not list the guard's metrics {BOOSTED_GUARD_METRICS}")
    if guard is None:
        manifest["spec"]["metrics"] = [m for m in metrics if m not in found]
    else:
        boosted, fraction = guard
        targets = guard_targets(parse_slo(DEFAULT_SLO), fraction, boosted=boosted)
        for m, name in zip(found, targets, strict=True):  # both in (TTFT, ITL) order
            m["pods"]["metric"]["name"] = name
            m["pods"]["target"]["averageValue"] = f"{targets[name]:g}"
    out.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
    return out


def _guards(text: str) -> list[Guard]:
    out: list[Guard] = []
    for part in text.split(","):
        part = part.strip()
        if part == "none":
            out.append(None)
            continue
        present = part.startswith("present@")
        try:
            fraction = float(part.removeprefix("present@"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r} is neither 'none', a number nor present@NUMBER") from None
        if not 0 < fraction <= 1:
            raise argparse.ArgumentTypeError(f"a fraction of the bound must be in (0, 1], got {part}")
        out.append((not present, fraction))
    return out


def _label(guard: Guard) -> str:
    if guard is None:
        return "no guard"
    boosted, fraction = guard
    return f"guard {fraction:g}" if boosted else f"present {fraction:g}"


def _cell(run: dict[str, Any]) -> str:
    minutes, total = int(run["slo_violation_minutes"]), int(run["minutes"])
    return f"{minutes:,} ({100 * minutes / max(total, 1):.2f} %) at {float(run['x_oracle']):.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_cell_arguments(parser, days=2.0)
    parser.add_argument(
        "--guards",
        type=_guards,
        default=_guards("none,present@0.9,0.9,0.8"),
        help="comma-separated guards: 'none', F (the P99s at the forecast's load at F x the SLO's bounds, as "
        "shipped at 0.9) or present@F (the present P99s) (default none,present@0.9,0.9,0.8)",
    )
    parser.add_argument(
        "--azure", action="store_true", help="also the one-hour Azure code and conversation traces, their own mixes"
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
    head = " | ".join(_label(g) for g in args.guards)
    figures: list[dict[str, Any]] = []
    window = ""
    rows: list[str] = []
    azure_rows: dict[Path, list[str]] = {trace: [] for trace in AZURE}
    with tempfile.TemporaryDirectory() as tmp:
        hpas = {g: guarded_hpa(g, Path(tmp) / f"hpa-{_label(g).replace(' ', '-')}.yaml") for g in args.guards}
        runs: list[tuple[str, str, list[str], Path, list[str]]] = [
            (profile, mix, cell_options(args, profile, mix), TRACE, rows) for profile, mix in cells(args)
        ]
        if args.azure:
            profiles = args.profile or list(PROFILES)
            runs += [
                (p, "the trace's own", ["--profile", p, "--workers", "1", *AZURE_COLUMNS], trace, azure_rows[trace])
                for trace in AZURE
                for p in profiles
            ]
        for profile, mix, options, trace, out in runs:
            cells_out = []
            for guard, hpa in hpas.items():
                t0 = time.perf_counter()
                doc = simulate(options, Path(tmp) / "cell.json", policies=("boosted",), trace=trace, hpa=hpa)
                print(f"  {profile} x {mix} x {_label(guard)}: {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                [run] = doc["policies"]
                cells_out.append(_cell(run))
                if trace not in AZURE:
                    inputs = doc["inputs"]
                    window = f"{inputs['duration_s'] / 3_600:g} simulated hours from {inputs['start_s'] / 3_600:.2f} h"
                figures.append(
                    {"profile": profile, "mix": mix, "trace": trace.name, "guard": _label(guard), "run": run}
                )
            out.append(f"| {profile} | {mix} | " + " | ".join(cells_out) + " |")
    sep = "|---|---|" + "---:|" * len(args.guards)
    if rows:
        print(f"\nthe shared trace, {window} into it; boosted policy: violation minutes (share) at x oracle\n")
        print(f"| profile | mix | {head} |\n{sep}")
        print("\n".join(rows))
    for trace, trace_rows in azure_rows.items():
        if trace_rows:
            print(f"\n{trace.name} (its own per-minute token mix); boosted policy, as above\n")
            print(f"| profile | mix | {head} |\n{sep}")
            print("\n".join(trace_rows))
    print(f"\nwall time {time.perf_counter() - started:.0f} s ({len(figures)} runs)")
    if args.json is not None:
        args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
