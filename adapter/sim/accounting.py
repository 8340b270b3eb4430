"""The figures of a run, offline or live: the SLO rule per minute and the summary every report shows.

A minute violates the SLO when more than 1 % of its requests (dropped ones included) took longer than
the SLO, i.e. its P99 is above it. GPU-hours count every pod that exists (loading, pending and draining
pods hold or wait for their GPUs too). ``oracle_gpu_hours`` is the clairvoyant's bound: in every minute
exactly ``ceil(arrivals / knee)`` pods that start instantly, each carrying at most ``knee`` requests/s,
the per-pod load at which the P99 still meets the SLO (``adapter.sim.tokenfleet.TokenEngine.knee``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adapter.sim.latency import SLO_QUANTILE

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
MINUTE_S = 60.0


def violated_minutes(completions: _F64, over_slo: _F64, dropped: _F64) -> npt.NDArray[np.bool_]:
    """Per minute: True when more than 1 - SLO_QUANTILE of the minute's requests missed the SLO."""
    served = completions + dropped
    bad = np.maximum(over_slo, 0.0) + dropped
    with np.errstate(invalid="ignore", divide="ignore"):
        fraction = np.where(served > 0, bad / np.where(served > 0, served, 1.0), 0.0)
    out: npt.NDArray[np.bool_] = fraction > 1.0 - SLO_QUANTILE + 1e-12
    return out


def oracle_pods(arrivals_per_s: _F64, knee_rps: float) -> _I64:
    """Pods the clairvoyant runs in each minute: ``ceil(rate / knee)`` (0 without load)."""
    if not knee_rps > 0:
        raise ValueError("the knee must be positive")
    out: _I64 = np.ceil(np.maximum(arrivals_per_s, 0.0) / knee_rps - 1e-9).astype(np.int64)
    return out


def oracle_gpu_hours(arrivals_per_s: _F64, knee_rps: float, gpus_per_pod: int) -> float:
    """GPU-hours of the clairvoyant over minutes with these mean arrival rates."""
    return float(oracle_pods(arrivals_per_s, knee_rps).sum()) * MINUTE_S / 3600.0 * gpus_per_pod


def static_peak_gpu_hours(arrivals_per_s: _F64, knee_rps: float | _F64, gpus_per_pod: int) -> float:
    """GPU-hours of a static fleet sized for the peak: the most pods any minute needs at its knee (``knee_rps``, a
    scalar or a positive one per minute), all of them on in every minute. The yardstick public LLM autoscaling
    write-ups quote (llm-d's latency-SLO recipe: 5.93 average replicas against a static 8)."""
    knees = np.broadcast_to(np.asarray(knee_rps, dtype=np.float64), np.shape(arrivals_per_s))
    if knees.size and not np.all(knees > 0):
        raise ValueError("the knee must be positive")
    pods = np.ceil(np.maximum(arrivals_per_s, 0.0) / np.where(knees > 0, knees, 1.0) - 1e-9)
    peak = float(pods.max()) if pods.size else 0.0
    return peak * pods.size * MINUTE_S / 3600.0 * gpus_per_pod


@dataclass(frozen=True)
class RunTotals:
    """What a run accumulated, per minute (``completions``, ``over_slo``, ``dropped``, ``pod_seconds``) and
    per sync (``desired``: replicas after each decision), with its scale events and peak queue."""

    completions: _F64
    over_slo: _F64
    dropped: _F64
    pod_seconds: _F64
    desired: _I64
    scale_ups: int
    scale_downs: int
    peak_queue: float
    gpus_per_pod: int


def frontier_cost(points: Sequence[tuple[float, float]], share: float) -> float | None:
    """The cost at violation share ``share`` on a trade-off curve of ``(violation share, cost)`` points (one
    policy at several targets: dearer targets violate less), linear between the two points next in cost
    that bracket ``share``; None when no pair brackets it (outside the measured range)."""
    ordered = sorted(points, key=lambda p: p[1])
    for (s0, c0), (s1, c1) in zip(ordered, ordered[1:], strict=False):
        if s0 != s1 and min(s0, s1) <= share <= max(s0, s1):
            return c0 + (c1 - c0) * (share - s0) / (s1 - s0)
    return None


def summarize(totals: RunTotals, *, oracle_gpu_hours: float | None = None) -> dict[str, float | int | str | None]:
    """The summary of a run (the keys of the report's table and JSON), the same offline and live."""
    violated = violated_minutes(totals.completions, totals.over_slo, totals.dropped)
    pod_hours = float(totals.pod_seconds.sum()) / 3600.0
    gpu_hours = pod_hours * totals.gpus_per_pod
    served = totals.completions + totals.dropped
    bad = np.maximum(totals.over_slo, 0.0) + totals.dropped
    total = float(served.sum())
    desired = totals.desired if totals.desired.size else np.zeros(1, dtype=np.int64)
    ratio = gpu_hours / oracle_gpu_hours if oracle_gpu_hours and oracle_gpu_hours > 0 else None
    return {
        "slo_violation_minutes": int(violated.sum()),
        "minutes": int(violated.size),
        "gpu_hours": gpu_hours,
        "pod_hours": pod_hours,
        "oracle_gpu_hours": oracle_gpu_hours,
        "x_oracle": ratio if ratio is None or math.isfinite(ratio) else None,
        "scale_events": totals.scale_ups + totals.scale_downs,
        "scale_ups": totals.scale_ups,
        "scale_downs": totals.scale_downs,
        "peak_queue": float(totals.peak_queue),
        "mean_replicas": float(desired.mean()),
        "max_replicas": int(desired.max()),
        "min_replicas": int(desired.min()),
        "requests": total,
        "dropped": float(totals.dropped.sum()),
        "over_slo_fraction": float(bad.sum() / total) if total > 0 else 0.0,
    }
