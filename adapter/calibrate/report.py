"""``calibrate``'s outputs: a JSON report, a text summary, the catalog snippet to paste, and a PNG.

Pure apart from ``write_plot`` (matplotlib is imported only there, Agg backend).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from adapter.calibrate.calibration import Calibration
from adapter.calibrate.workload import Workload


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def to_dict(cal: Calibration, *, composite: str, workload: Workload | None = None) -> dict[str, Any]:
    """Everything ``calibrate`` found, JSON-ready (NaN becomes null); ``workload``: the mix and KV usage seen."""
    return {
        "composite": composite,
        "slo_p99_s": cal.slo_s if cal.slo_label is None else None,
        "slo": cal.slo_text,
        "slo_quantile": cal.slo_quantile,
        "knee_rps_per_pod": _num(cal.knee_rps),
        "max_load_rps_per_pod": cal.max_load_rps,
        "growth_within_cold_start": cal.growth,
        "hpa_band": cal.band,
        "safe_rps_per_pod": _num(cal.safe_rps),
        "composite_at_safe": _num(cal.composite_at_safe),
        "composite_gain": _num(cal.gain),
        "terms": [
            {
                "metric": p.metric,
                "weight": p.weight,
                "idle": p.idle,
                "target": p.target,
                "tracks_load": p.tracks_load,
                "flat": p.flat,
                "elasticity": p.elasticity,
                "value_at_safe": _num(p.value_at_safe),
                "note": p.note,
            }
            for p in cal.terms
        ],
        "bins": [
            {
                "load_rps": b.load,
                "rows": b.rows,
                "requests": b.requests,
                "over_slo_fraction": _num(b.over_fraction),
                "terms": {k: _num(v) for k, v in b.terms.items()},
                "observed": {k: _num(v) for k, v in b.observed.items()},
            }
            for b in cal.bins
        ],
        "workload": None if workload is None else workload.to_dict(),
        "warnings": list(cal.warnings),
    }


def catalog_snippet(cal: Calibration, *, composite: str) -> str:
    """The ``composites:`` entry to put in the catalog (YAML), or '' when there is nothing to propose."""
    if not cal.terms:
        return ""
    lines = ["composites:", f"  {composite}:", "    terms:"]
    for p in cal.terms:
        extra = ", when_missing: idle" if p.when_missing == "idle" else ""
        extra += ", flat: true" if p.metric in cal.marked_flat else ""
        extra += f", elasticity: {p.elasticity:g}" if p.elasticity != 1.0 and p.metric not in cal.marked_flat else ""
        lines.append(
            f"      - {{metric: {p.metric}, weight: {p.weight:g}, target: {p.target:.4g}, idle: {p.idle:.4g}{extra}}}"
        )
    return "\n".join(lines) + "\n"


def summary(cal: Calibration, *, composite: str, workload: Workload | None = None) -> str:
    """A few lines for the terminal."""
    out = []
    if cal.knee_rps is None:
        out.append(f"knee: not reached ({cal.slo_text} up to {cal.max_load_rps:.3g} req/s per pod)")
    else:
        where = f"P99 = {cal.slo_s:g} s there" if cal.slo_label is None else f"the last load within {cal.slo_text}"
        out.append(f"knee: {cal.knee_rps:.4g} req/s per pod ({where})")
        out.append(
            f"safe point: {cal.safe_rps:.4g} req/s per pod = knee / ((1 + growth {cal.growth:.3g}) "
            f"x HPA band {cal.band:.3g})"
        )
        out.append(f"{composite} at the safe point with the proposed targets: {cal.composite_at_safe:.3g}")
        if cal.gain is not None:
            out.append(f"{composite} gain there: {cal.gain:.3g} % per 1 % of per-pod load")
        for p in cal.terms:
            grows = f", elasticity {p.elasticity:g}" if p.tracks_load else ""
            out.append(f"  {p.metric}: idle {p.idle:.4g}, target {p.target:.4g}{grows} ({p.note})")
    if workload is not None:
        out.extend(workload.lines())
    out.extend(f"warning: {w}" for w in cal.warnings)
    return "\n".join(out) + "\n"


def write_plot(cal: Calibration, path: Path, *, composite: str) -> None:
    """Per-pod load vs the share of requests over the SLO and vs each term, knee and safe point marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({k for b in cal.bins for k in b.terms})
    if any(math.isfinite(b.observed.get("kv_cache_usage", math.nan)) for b in cal.bins):
        names.append("kv_cache_usage")  # what the pods saw, no term of the composite: no target drawn
    fig, axes = plt.subplots(1 + len(names), 1, figsize=(8, 2.4 * (1 + len(names))), sharex=True)
    axes = list(axes) if len(names) else [axes]
    loads = [b.load for b in cal.bins]
    axes[0].plot(loads, [100 * b.over_fraction for b in cal.bins], "o-", ms=3)
    axes[0].axhline(100 * (1 - cal.slo_quantile), color="grey", ls=":", label=f"{100 * (1 - cal.slo_quantile):g} %")
    axes[0].set_ylabel(f"% > {cal.slo_s:g} s" if cal.slo_label is None else "% over a bound")
    axes[0].set_yscale("symlog", linthresh=0.1)
    axes[0].set_ylim(bottom=0)
    by_metric = {p.metric: p for p in cal.terms}
    for ax, name in zip(axes[1:], names, strict=True):
        ax.plot(loads, [b.terms.get(name, b.observed.get(name, math.nan)) for b in cal.bins], "o-", ms=3)
        ax.set_ylabel(name, fontsize=7)
        p = by_metric.get(name)
        # Past the knee a queue and the latency explode; scale the axis to the region that matters.
        upto = cal.knee_rps if cal.knee_rps is not None else math.inf
        seen = [b.terms.get(name, b.observed.get(name, math.nan)) for b in cal.bins if b.load <= upto]
        seen = [v for v in seen if math.isfinite(v)]
        top = max([*seen, p.target if p is not None else 0.0], default=0.0)
        if top > 0:
            ax.set_ylim(0, 1.3 * top)
        if p is not None:
            ax.axhline(p.target, color="tab:green", ls="--", lw=0.8, label=f"target {p.target:.3g}")
            ax.axhline(p.idle, color="tab:grey", ls=":", lw=0.8, label=f"idle {p.idle:.3g}")
            ax.legend(fontsize=7, loc="upper left")
    for ax in axes:
        if cal.knee_rps is not None:
            ax.axvline(cal.knee_rps, color="tab:red", lw=1)
        if cal.safe_rps is not None:
            ax.axvline(cal.safe_rps, color="tab:green", lw=1)
    knee = "not reached" if cal.knee_rps is None else f"{cal.knee_rps:.3g}"
    safe = "-" if cal.safe_rps is None else f"{cal.safe_rps:.3g}"
    axes[0].set_title(f"{composite}: knee {knee} req/s per pod (red), safe point {safe} (green)", fontsize=9)
    axes[-1].set_xlabel("per-pod load (requests/s)")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
