"""The simulator's report: a table, a JSON document and a PNG of replicas and load over time.

Pure apart from ``write_json``/``write_plot`` writing their file. matplotlib is imported only by
``write_plot`` (Agg backend), so the rest of the simulator never pays for it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from adapter.sim.simulate import PolicyRun, SimulationResult

# Issue 10's acceptance, evaluated on every result that has the policies it compares.
GOAL_SLO_MINUTES_SHARE = 0.01  # boosted: at most 1 % of minutes in SLO violation
GOAL_ORACLE_MULTIPLE = 1.25  # boosted: at most 1.25x the clairvoyant's GPU-hours
GOAL_FEWER_THAN_COMPOSITE = 0.5  # boosted: at least 50 % fewer violation minutes than the reactive composite
GOAL_GPU_HOURS_MARGIN = 0.10  # ... at most +10 % GPU-hours
SERIES_STEP_S = 300.0


def _find(runs: Sequence[PolicyRun], name: str) -> PolicyRun | None:
    for run in runs:
        if run.policy == name:
            return run
    return None


def goal(result: SimulationResult, boosted: str | None = None) -> dict[str, Any] | None:
    """Issue 10's acceptance evaluated on this result, or None when composite or a boosted policy is missing.

    ``boosted`` names the boosted policy to judge (default: ``boosted``, else the first ``boosted:...``).
    ``checks`` holds each criterion; ``met`` is all of them. With a ``gpu`` run, the GPU-utilization-only
    baseline's figures are compared too (informative: not part of ``met``).
    """
    runs = result.runs
    if boosted is None:
        candidates = [r.policy for r in runs if r.policy == "boosted"]
        candidates += [r.policy for r in runs if r.policy.startswith("boosted:") and "@" not in r.policy]
        boosted = candidates[0] if candidates else None
    b = _find(runs, boosted) if boosted else None
    comp = _find(runs, "composite")
    if b is None or comp is None:
        return None

    def figure(run: PolicyRun, key: str) -> float:
        return float(run.summary[key] or 0.0)

    ratio = figure(b, "gpu_hours") / figure(comp, "gpu_hours") if figure(comp, "gpu_hours") > 0 else math.inf
    minutes_b, minutes_c = figure(b, "slo_violation_minutes"), figure(comp, "slo_violation_minutes")
    total = figure(b, "minutes")
    x_oracle = b.summary.get("x_oracle")
    checks = {
        "slo_minutes_at_most_1pct": minutes_b <= GOAL_SLO_MINUTES_SHARE * total,
        "gpu_hours_at_most_1.25x_oracle": x_oracle is not None and float(x_oracle) <= GOAL_ORACLE_MULTIPLE,
        "half_the_composites_slo_minutes": minutes_b <= (1.0 - GOAL_FEWER_THAN_COMPOSITE) * minutes_c
        if minutes_c > 0
        else minutes_b == 0,
        "gpu_hours_within_10pct_of_composite": ratio <= 1.0 + GOAL_GPU_HOURS_MARGIN,
    }
    out: dict[str, Any] = {
        "boosted_policy": b.policy,
        "slo_minutes_share": minutes_b / total if total else 0.0,
        "x_oracle": x_oracle,
        "gpu_hours_vs_composite": ratio,
        "slo_minutes_vs_composite": minutes_b / minutes_c if minutes_c > 0 else None,
        "checks": checks,
        "met": all(checks.values()),
    }
    gpu = _find(runs, "gpu")
    if gpu is not None and figure(gpu, "gpu_hours") > 0:
        out["gpu_baseline"] = {
            "slo_minutes": int(figure(gpu, "slo_violation_minutes")),
            "gpu_hours_share": figure(b, "gpu_hours") / figure(gpu, "gpu_hours"),
            "at_most_its_slo_minutes": minutes_b <= figure(gpu, "slo_violation_minutes"),
        }
    return out


def table(result: SimulationResult) -> str:
    """A Markdown table of the headline figures, one row per policy in run order, then the oracle."""
    head = (
        "| policy | HPA metric | SLO-violation minutes | GPU-hours | x oracle | scale events | peak queue | "
        "mean replicas | dropped requests |"
    )
    rows = [head, "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for run in result.runs:
        s = run.summary
        minutes = int(s["slo_violation_minutes"] or 0)
        total = int(s["minutes"] or 0)
        share = 100.0 * minutes / total if total else 0.0
        gpu_hours, peak = float(s["gpu_hours"] or 0), float(s["peak_queue"] or 0)
        mean, dropped = float(s["mean_replicas"] or 0), float(s["dropped"] or 0)
        x = s.get("x_oracle")
        rows.append(
            f"| {run.policy} | {run.description} | {minutes} ({share:.1f} %) | {gpu_hours:,.0f} | "
            f"{'-' if x is None else f'{float(x):.2f}'} | "
            f"{s['scale_events']} | {peak:,.0f} | {mean:.1f} | {dropped:,.0f} |"
        )
    oracle = result.inputs.get("oracle_gpu_hours")
    if oracle is not None:
        knee = float(result.inputs.get("knee_rps_per_pod") or 0.0)  # type: ignore[arg-type]
        rows.append(
            f"| oracle | clairvoyant: pods start instantly, {knee:.1f} req/s each (P99 = SLO) | 0 (0.0 %) | "
            f"{float(oracle):,.0f} | 1.00 | - | - | - | 0 |"  # type: ignore[arg-type]
        )
    static = result.inputs.get("static_peak_gpu_hours")
    if static is not None and oracle:
        rows.append(
            f"| static peak | always the pods the busiest minute needs at the knee | 0 (0.0 %) | "
            f"{float(static):,.0f} | {float(static) / float(oracle):.2f} | - | - | - | 0 |"  # type: ignore[arg-type]
        )
    return "\n".join(rows)


def _binned(t: np.ndarray, values: np.ndarray, start: float, step: float, bins: int) -> list[float | None]:
    idx = np.clip(((t - start) // step).astype(np.int64), 0, bins - 1)
    sums = np.bincount(idx, weights=values.astype(np.float64), minlength=bins)
    counts = np.bincount(idx, minlength=bins)
    return [None if c == 0 else round(float(v / c), 4) for v, c in zip(sums, counts, strict=True)]


def to_json(result: SimulationResult, *, series_step_s: float = SERIES_STEP_S) -> dict[str, Any]:
    """The whole result as JSON-able data: inputs, per-policy figures, the goal, and time series
    binned to ``series_step_s`` (mean arrival rate and replicas; SLO-violation minutes per bin)."""
    start = float(result.inputs["start_s"])  # type: ignore[arg-type]
    end = float(result.inputs["end_s"])  # type: ignore[arg-type]
    bins = max(1, math.ceil((end - start) / series_step_s))
    first = result.runs[0]
    series: dict[str, Any] = {
        "step_s": series_step_s,
        "t": [start + i * series_step_s for i in range(bins)],
        "arrival_rps": _binned(first.sync_t, first.sync_rate, start, series_step_s, bins),
        "replicas": {r.policy: _binned(r.sync_t, r.sync_desired, start, series_step_s, bins) for r in result.runs},
        "slo_violation_minutes": {
            r.policy: [
                int(v)
                for v in np.bincount(
                    np.clip(((r.minute_t - start) // series_step_s).astype(np.int64), 0, bins - 1),
                    weights=r.minute_violated.astype(np.float64),
                    minlength=bins,
                )
            ]
            for r in result.runs
        },
    }
    return {
        "inputs": result.inputs,
        "policies": [
            {"policy": r.policy, "description": r.description, **r.summary, "forecast": r.forecast} for r in result.runs
        ],
        "goal": goal(result),
        "runtime_s": result.runtime_s,
        "series": series,
    }


def write_json(result: SimulationResult, path: Path) -> None:
    """Write ``to_json(result)`` to ``path`` (indented, trailing newline)."""
    path.write_text(json.dumps(to_json(result), indent=2) + "\n", encoding="utf-8")


def _hourly(t: np.ndarray, values: np.ndarray, start: float, bins: int, how: str = "mean") -> np.ndarray:
    idx = np.clip(((t - start) // 3600.0).astype(np.int64), 0, bins - 1)
    sums = np.bincount(idx, weights=values.astype(np.float64), minlength=bins)
    if how == "sum":
        return sums
    counts = np.bincount(idx, minlength=bins)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def _busiest_window(run: PolicyRun, hours: float) -> tuple[float, float]:
    """The ``hours``-long span (on sync times) around the steepest rise of the arrival rate."""
    t, rate = run.sync_t, run.sync_rate
    span = hours * 3600.0
    if t[-1] - t[0] <= span:
        return float(t[0]), float(t[-1])
    lag = max(1, int(3600.0 // max(float(t[1] - t[0]), 1.0)))
    rise = rate[lag:] - rate[:-lag]
    centre = float(t[int(np.argmax(rise)) + lag])
    lo = min(max(centre - span / 2.0, float(t[0])), float(t[-1]) - span)
    return lo, lo + span


def write_plot(result: SimulationResult, path: Path, *, title: str | None = None) -> None:
    """PNG of replicas and load over time for every policy.

    Top: arrival rate and the pods it needs at 100 % of capacity. Then replicas per policy and the minutes
    per hour each spent above the SLO (hourly means when the run is longer than two days: 15 s steps over
    weeks would be a solid block). Bottom: six hours around the steepest rise at full resolution.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    start = float(result.inputs["start_s"])  # type: ignore[arg-type]
    end = float(result.inputs["end_s"])  # type: ignore[arg-type]
    physics: dict[str, Any] = result.inputs["physics"]  # type: ignore[assignment]
    # A pod saturates at a rate that depends on the mix: the default mix's is the "capacity".
    capacity = float(physics["saturation_rps_per_pod"])
    bounds: dict[str, float] = result.inputs.get("slo") or {}  # type: ignore[assignment]
    slo_text = ", ".join(f"{k.upper()} P99 <= {v:g} s" for k, v in bounds.items())
    runs = result.runs
    first = runs[0]
    colors = plt.get_cmap("tab10")
    long_run = end - start > 2 * 86_400.0
    fig, axes = plt.subplots(4, 1, figsize=(14, 12), gridspec_kw={"height_ratios": [1.0, 1.8, 1.2, 1.8]})
    ax_load, ax_rep, ax_slo, ax_zoom = axes
    unit, label = (86_400.0, "days") if long_run else (3600.0, "hours")
    bins = max(1, int(np.ceil((end - start) / 3600.0)))
    hours_x = np.arange(bins) * 3600.0 / unit
    ax_load.plot((first.sync_t - start) / unit, first.sync_rate, color="black", linewidth=0.6)
    ax_load.set_ylabel("arrivals (req/s)")
    ax_load.set_title(title or f"HPA what-if: replicas per policy (SLO: {slo_text}; pod capacity {capacity:g} req/s)")
    if long_run:
        ax_rep.plot(
            hours_x,
            _hourly(first.sync_t, first.sync_rate, start, bins) / capacity,
            color="grey",
            linestyle=":",
            linewidth=1.0,
            label="load / capacity",
        )
    else:
        ax_rep.plot(
            (first.sync_t - start) / unit,
            first.sync_rate / capacity,
            color="grey",
            linestyle=":",
            linewidth=1.0,
            label="load / capacity",
        )
    for i, run in enumerate(runs):
        color = colors(i % 10)
        if long_run:
            ax_rep.plot(
                hours_x,
                _hourly(run.sync_t, run.sync_desired, start, bins),
                color=color,
                linewidth=0.9,
                label=run.policy,
            )
        else:
            ax_rep.plot(
                (run.sync_t - start) / unit,
                run.sync_desired,
                drawstyle="steps-post",
                color=color,
                linewidth=0.9,
                label=run.policy,
            )
        per_hour = _hourly(run.minute_t, run.minute_violated, start, bins, how="sum")
        ax_slo.plot(hours_x, per_hour, color=color, linewidth=0.8, drawstyle="steps-post", label=run.policy)
    ax_rep.set_ylabel("replicas (hourly mean)" if long_run else "replicas")
    ax_rep.legend(loc="upper left", fontsize=8, ncol=4)
    ax_slo.set_ylabel("minutes/hour\nP99 > SLO")
    ax_slo.set_ylim(-2, 62)
    ax_slo.set_xlabel(f"{label} since the start of the run")
    lo, hi = _busiest_window(first, 6.0)
    for i, run in enumerate(runs):
        keep = (run.sync_t >= lo) & (run.sync_t <= hi)
        ax_zoom.plot(
            (run.sync_t[keep] - lo) / 3600.0,
            run.sync_desired[keep],
            drawstyle="steps-post",
            color=colors(i % 10),
            linewidth=0.9,
            label=run.policy,
        )
    keep = (first.sync_t >= lo) & (first.sync_t <= hi)
    ax_zoom.plot(
        (first.sync_t[keep] - lo) / 3600.0,
        first.sync_rate[keep] / capacity,
        color="grey",
        linestyle=":",
        linewidth=1.0,
        label="load / capacity",
    )
    ax_zoom.set_ylabel("replicas")
    ax_zoom.set_xlabel(f"hours from {(lo - start) / 3600.0:.1f} h (six hours around the steepest rise)")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
