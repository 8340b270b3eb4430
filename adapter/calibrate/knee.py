"""Pure: per-pod history in, its load bins and the knee out.

Definitions (docs/calibrate.md):

* **load**: one pod's request rate (the forecast's load query, per pod), the x axis of everything here.
* **knee**: the highest per-pod load at which the P99 still meets the SLO, i.e. at most ``1 - q`` of the
  requests completed at that load took longer than the SLO (with TTFT / ITL / e2e bounds: longer than the bound
  whose share is the worst, ITL counted per output token; ``adapter.calibrate.history``). Requests are pooled
  per load bin (a fraction of 1 % needs hundreds of requests to mean anything), and a bin counts as "over" only
  when the next judged bin is over too, so one noisy bin does not end the search.

The safe point and the targets proposed there: ``adapter.calibrate.proposal``; the two together:
``adapter.calibrate.calibration``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from adapter.forecast.boost import rise_quantile

F64 = npt.NDArray[np.float64]

DEFAULT_BINS = 40
DEFAULT_SLO_QUANTILE = 0.99
# Fewer requests than this in a load bin cannot tell a 1 % tail from noise (at 1 %, 5 expected slow requests).
MIN_BIN_REQUESTS = 500.0


@dataclass(frozen=True)
class History:
    """Flattened per-(pod, step) observations plus the Deployment's total load on the step grid.

    ``requests`` and ``over_slo`` are request rates (requests/s completed, and of those slower than the
    SLO: ``requests`` x the worst stated bound's share) over the step's window; ``terms`` holds each
    composite metric's value per row (NaN = no data).
    """

    load: F64
    requests: F64
    over_slo: F64
    terms: Mapping[str, F64]
    deployment_load: F64
    step_s: float
    demand_step_s: float = 0.0  # the step of ``deployment_load``; 0 = ``step_s``
    # What the pods saw, per row (None: the history has no such series): prompt and output tokens/s
    # (vLLM's token counters) and the KV-cache usage (0..1).
    prompt_tokens: F64 | None = None
    output_tokens: F64 | None = None
    kv_usage: F64 | None = None

    def __post_init__(self) -> None:
        n = self.load.shape[0]
        if self.requests.shape[0] != n or self.over_slo.shape[0] != n:
            raise ValueError("load, requests and over_slo must have one row per observation")
        for name, values in {**self.terms, **self.observed}.items():
            if values.shape[0] != n:
                raise ValueError(f"{name}: one value per observation expected")

    @property
    def observed(self) -> dict[str, F64]:
        """The per-row series of what the pods saw that the history has, by the name the report uses."""
        pairs = (
            ("prompt_tokens_per_s", self.prompt_tokens),
            ("output_tokens_per_s", self.output_tokens),
            ("kv_cache_usage", self.kv_usage),
        )
        return {k: v for k, v in pairs if v is not None}


@dataclass(frozen=True)
class LoadBin:
    """One per-pod load bin: mean load, requests pooled, the fraction over the SLO, median of each term, and of
    what the pods saw (``observed``: prompt and output tokens per request pooled, the KV usage's median)."""

    load: float
    rows: int
    requests: float
    over_fraction: float
    terms: dict[str, float]
    observed: dict[str, float] = field(default_factory=dict)


def load_bins(history: History, *, bins: int = DEFAULT_BINS) -> list[LoadBin]:
    """Equal-width per-pod load bins from 0 to the highest load seen; empty bins are left out."""
    ok = np.isfinite(history.load) & np.isfinite(history.requests) & (history.requests > 0)
    if not np.any(ok):
        return []
    top = float(np.max(history.load[ok]))
    if not top > 0:
        return []
    edges = np.linspace(0.0, top, bins + 1)
    which = np.clip(np.searchsorted(edges, history.load, side="right") - 1, 0, bins - 1)
    out = []
    for b in range(bins):
        rows = ok & (which == b)
        if not np.any(rows):
            continue
        req = history.requests[rows] * history.step_s
        over = np.clip(history.over_slo[rows], 0.0, history.requests[rows]) * history.step_s
        medians = {}
        for name, values in history.terms.items():
            v = values[rows]
            v = v[np.isfinite(v)]
            medians[name] = float(np.median(v)) if v.size else math.nan
        total = float(req.sum())
        observed = {}
        for name, values in history.observed.items():
            v = values[rows]
            good = np.isfinite(v)
            if name == "kv_cache_usage":
                observed[name] = float(np.median(v[good])) if np.any(good) else math.nan
            else:  # pooled: tokens over the requests of the rows that have the counter
                n = float(history.requests[rows][good].sum())
                observed[name.replace("_per_s", "_per_request")] = float(v[good].sum()) / n if n > 0 else math.nan
        out.append(
            LoadBin(
                load=float(np.mean(history.load[rows])),
                rows=int(rows.sum()),
                requests=total,
                over_fraction=float(over.sum()) / total if total > 0 else math.nan,
                terms=medians,
                observed=observed,
            )
        )
    return out


def find_knee(
    bins: Sequence[LoadBin], *, slo_quantile: float = DEFAULT_SLO_QUANTILE, min_requests: float = MIN_BIN_REQUESTS
) -> float | None:
    """The per-pod load where the pooled fraction over the SLO crosses ``1 - slo_quantile`` (linear between
    the last good bin and the first of two consecutive bad ones); None when it never does."""
    limit = 1.0 - slo_quantile
    judged = [b for b in bins if b.requests >= min_requests and math.isfinite(b.over_fraction)]
    for i, b in enumerate(judged):
        if b.over_fraction <= limit:
            continue
        nxt = judged[i + 1] if i + 1 < len(judged) else None
        if nxt is not None and nxt.over_fraction <= limit:
            continue  # one noisy bin
        if i == 0:
            return b.load  # over the SLO at the lowest load seen: the knee is at most here
        prev = judged[i - 1]
        span = b.over_fraction - prev.over_fraction
        frac = (limit - prev.over_fraction) / span if span > 0 else 0.0
        return prev.load + frac * (b.load - prev.load)
    return None


def demand_growth(deployment_load: F64, *, step_s: float, horizon_s: float, quantile: float) -> float:
    """The ``quantile`` over time of (peak demand within the next ``horizon_s``) / (demand now) - 1, >= 0:
    the forecast boost's own ``rise_quantile`` over a cold start (0 without enough history)."""
    # At least one step: a history coarser than the cold start (10-minute windows) says how demand moves
    # between windows, and a window's rate can arrive all at once.
    k = max(1, math.ceil(horizon_s / step_s - 1e-9))
    if horizon_s <= 0:
        return 0.0
    return rise_quantile(np.asarray(deployment_load, dtype=np.float64), k, quantile) or 0.0
