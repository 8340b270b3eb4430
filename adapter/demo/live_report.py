"""What ``simulate --live`` prints and plots: the replay verdict and the live run against the offline engine.

matplotlib is imported only by ``write_live_plot`` (Agg backend).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapter.demo.live import LiveResult
from adapter.sim.simulate import PolicyRun


def live_lines(live: LiveResult, offline: PolicyRun, comparison: dict[str, Any]) -> list[str]:
    """The lines ``simulate --live`` prints: the replay verdict and live vs offline figures."""
    s, o = live.summary, offline.summary
    lines = [
        f"live {live.policy}: {len(live.records)} syncs in {live.wall_s:.0f} s wall (x{live.speed:g}), "
        f"{live.read_errors} failed reads, replay {'matches' if live.replay.matches else 'DIFFERS'} "
        f"({len(live.replay.mismatches)} mismatches)",
        f"{'':8s} {'SLO min':>8s} {'GPU-h':>8s} {'x oracle':>9s} {'events':>7s} {'mean rep':>9s}",
    ]
    for name, fig in (("live", s), ("offline", o)):
        x = fig.get("x_oracle")
        lines.append(
            f"{name:8s} {fig['slo_violation_minutes']:>8} {float(fig['gpu_hours'] or 0):8.1f} "
            f"{'-' if x is None else f'{float(x):.2f}':>9s} "
            f"{fig['scale_events']:>7} {float(fig['mean_replicas'] or 0):9.1f}"
        )
    lines.append(
        f"replicas: mean |live - offline| {comparison['replicas_mean_abs_diff']:.2f}, "
        f"correlation {comparison['replicas_correlation']}"
    )
    return lines


def write_live_plot(live: LiveResult, offline: PolicyRun, path: Path) -> None:
    """PNG of the live run's replicas against the offline engine's, with the arrival rate."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    hours = (live.sync_t - live.sync_t[0]) / 3600.0
    fig, (ax_load, ax_rep) = plt.subplots(2, 1, figsize=(12, 6.5), sharex=True, gridspec_kw={"height_ratios": [1, 2]})
    ax_load.plot(hours, live.sync_rate, color="black", linewidth=0.8)
    ax_load.set_ylabel("arrivals (req/s)")
    ax_rep.plot(hours, live.sync_desired, drawstyle="steps-post", label="live (real Prometheus + adapter)")
    n = min(hours.size, offline.sync_desired.size)
    ax_rep.plot(hours[:n], offline.sync_desired[:n], drawstyle="steps-post", linestyle="--", label="offline engine")
    ax_rep.set_ylabel("replicas")
    ax_rep.set_xlabel("simulated hours")
    ax_rep.legend(loc="upper left")
    ax_load.set_title(
        f"{live.policy}: closed loop at x{live.speed:g}; replay "
        f"{'matches' if live.replay.matches else 'DIFFERS'} at every sync"
    )
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
