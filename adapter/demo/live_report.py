"""A live run beside the offline model (``simulate --live``): the offline twin, the comparison, the JSON, the lines
it prints and the PNG.

``offline_twin`` runs the offline engine over the live run's span from the same initial replicas and physics;
``compare`` sets the two side by side (replicas sync by sync, and each run's summary: violation minutes, per stated
bound, GPU-hours, x oracle). The figures are not identical: live values lag by the scrape interval
and the server's PromQL windows, and the live fleet advances in clock ticks, not trace windows. What must be
identical is the replay (``adapter.demo.autoscaler.replay``), the check that decides the exit code.

matplotlib is imported only by ``write_live_plot`` (Agg backend).
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from adapter.catalog import Catalog
from adapter.demo.live import LiveResult
from adapter.sim.policies import Policy
from adapter.sim.simulate import PolicyRun, SimulationConfig, run_policy
from adapter.sim.trace import ScaledTrace

_BOUND_LABELS = {"ttft": "TTFT min", "itl": "ITL min", "e2e": "e2e min"}


def offline_twin(
    policy: Policy, trace: ScaledTrace, config: SimulationConfig, live: LiveResult, catalog: Catalog
) -> PolicyRun:
    """The offline engine over the live run's span, from the same initial replicas and physics; the values the live
    HPA reads are about one scrape interval old, so that is the twin's ``metric_delay_s`` (rounded to whole syncs)."""
    scrape_sim_s = live.scrape_interval_s * live.speed
    twin = replace(
        config,
        start_s=live.start_s,
        duration_s=float(live.sync_t.size) * config.sync_period_s,
        initial_replicas=live.initial_replicas,
        metric_delay_s=round(scrape_sim_s / config.sync_period_s) * config.sync_period_s,
    )
    return run_policy(policy, trace, twin, catalog)


def compare(live: LiveResult, offline: PolicyRun) -> dict[str, Any]:
    """Side-by-side figures of a live run and the offline engine on the same span: replicas at every sync, and
    the violation minutes of each stated bound (``violation_minutes``: ``{bound: {"live": n, "offline": n}}``)."""
    n = min(live.sync_t.size, offline.sync_t.size)
    a = live.sync_desired[:n].astype(np.float64)
    b = offline.sync_desired[:n].astype(np.float64)
    corr = float(np.corrcoef(a, b)[0, 1]) if n > 1 and a.std() > 0 and b.std() > 0 else None
    minutes: dict[str, dict[str, Any]] = {}
    for bound in ("slo", *(live.slo if live.sync_ttft.size else ())):  # and per stated bound
        key = f"{bound}_violation_minutes"
        minutes[bound] = {"live": live.summary.get(key), "offline": offline.summary.get(key)}
    return {
        "syncs": n,
        "replicas_mean_abs_diff": float(np.mean(np.abs(a - b))) if n else None,
        "replicas_correlation": corr,
        "same_replicas_share": float(np.mean(a == b)) if n else None,
        "replicas_max": {"live": int(a.max()) if n else None, "offline": int(b.max()) if n else None},
        "violation_minutes": minutes,
        "live": live.summary,
        "offline": offline.summary,
    }


def _finite(values: Any) -> list[float | None]:
    return [None if not math.isfinite(float(v)) else round(float(v), 4) for v in values]


def live_document(
    policy: Policy, live: LiveResult, comparison: dict[str, Any], inputs: dict[str, Any]
) -> dict[str, Any]:
    """The JSON written by ``simulate --live``."""
    series: dict[str, Any] = {
        "t": live.sync_t.tolist(),
        "arrival_rps": live.sync_rate.round(3).tolist(),
        "live_replicas": live.sync_desired.tolist(),
        "live_ready": live.sync_ready.tolist(),
        "live_metric": _finite(live.sync_usage),
    }
    if live.sync_ttft.size:
        series["live_ttft_p99_s"] = _finite(live.sync_ttft)
        series["live_itl_p99_s"] = _finite(live.sync_itl)
    return {
        "mode": "live",
        "policy": policy.name,
        "description": policy.description,
        "inputs": inputs,
        "speed": live.speed,
        "wall_s": live.wall_s,
        "syncs": len(live.records),
        "read_errors": live.read_errors,
        "late_syncs": live.late_syncs,
        "replay": {
            "matches": live.replay.matches,
            "mismatches": list(live.replay.mismatches[:20]),
            "mismatch_count": len(live.replay.mismatches),
        },
        "live": live.summary,
        "offline_comparison": comparison,
        "series": series,
    }


def live_lines(live: LiveResult, offline: PolicyRun, comparison: dict[str, Any]) -> list[str]:
    """The lines ``simulate --live`` prints: the replay verdict and live vs offline figures."""
    s, o = live.summary, offline.summary
    bounds = [b for b in comparison["violation_minutes"] if b != "slo"]
    extra = "".join(f" {_BOUND_LABELS.get(b, b):>9s}" for b in bounds)
    lines = [
        f"live {live.policy}: {len(live.records)} syncs in {live.wall_s:.0f} s wall (x{live.speed:g}), "
        f"{live.read_errors} failed reads, replay {'matches' if live.replay.matches else 'DIFFERS'} "
        f"({len(live.replay.mismatches)} mismatches)",
        f"{'':8s} {'SLO min':>8s}{extra} {'GPU-h':>8s} {'x oracle':>9s} {'events':>7s} {'mean rep':>9s}",
    ]
    for name, fig in (("live", s), ("offline", o)):
        x = fig.get("x_oracle")
        per_bound = "".join(f" {fig.get(f'{b}_violation_minutes', '-')!s:>9s}" for b in bounds)
        lines.append(
            f"{name:8s} {fig['slo_violation_minutes']:>8}{per_bound} {float(fig['gpu_hours'] or 0):8.1f} "
            f"{'-' if x is None else f'{float(x):.2f}':>9s} "
            f"{fig['scale_events']:>7} {float(fig['mean_replicas'] or 0):9.1f}"
        )
    lines.append(
        f"replicas: mean |live - offline| {comparison['replicas_mean_abs_diff']:.2f}, "
        f"correlation {comparison['replicas_correlation']}"
    )
    return lines


def write_live_plot(live: LiveResult, offline: PolicyRun, path: Path) -> None:
    """PNG of the live run's replicas against the offline engine's, with the arrival rate, and on token engines
    the worst pod's TTFT and ITL P99 against their bounds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = (live.sync_t - live.sync_t[0]) / 3600.0
    token = bool(live.sync_ttft.size)
    rows, ratios = (3, [1, 2, 1.2]) if token else (2, [1, 2])
    fig, axes = plt.subplots(rows, 1, figsize=(12, 6.5 + 2 * token), sharex=True, gridspec_kw={"height_ratios": ratios})
    ax_load, ax_rep = axes[0], axes[1]
    ax_load.plot(hours, live.sync_rate, color="black", linewidth=0.8)
    ax_load.set_ylabel("arrivals (req/s)")
    ax_rep.plot(hours, live.sync_desired, drawstyle="steps-post", label="live (real Prometheus + adapter)")
    n = min(hours.size, offline.sync_desired.size)
    ax_rep.plot(hours[:n], offline.sync_desired[:n], drawstyle="steps-post", linestyle="--", label="offline engine")
    ax_rep.set_ylabel("replicas")
    ax_rep.legend(loc="upper left")
    if token:
        ax_lat = axes[2]
        for values, bound, label, color in (
            (live.sync_ttft, live.slo.get("ttft"), "TTFT P99", "tab:red"),
            (live.sync_itl, live.slo.get("itl"), "ITL P99", "tab:purple"),
        ):
            ax_lat.plot(hours, values, color=color, linewidth=0.9, label=f"worst pod {label}")
            if bound is not None:
                ax_lat.axhline(bound, color=color, linestyle=":", linewidth=0.9, label=f"{label} bound")
        ax_lat.set_yscale("log")
        ax_lat.set_ylabel("seconds")
        ax_lat.legend(loc="upper left", fontsize="small", ncol=2)
    axes[-1].set_xlabel("simulated hours")
    ax_load.set_title(
        f"{live.policy}: closed loop at x{live.speed:g}; replay "
        f"{'matches' if live.replay.matches else 'DIFFERS'} at every sync"
    )
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
