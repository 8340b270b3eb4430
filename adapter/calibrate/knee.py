"""Pure: per-pod history in, the knee and the composite's proposed targets out.

Definitions (docs/calibrate.md):

* **load**: one pod's request rate (the forecast's load query, per pod), the x axis of everything here.
* **knee**: the highest per-pod load at which the P99 still meets the SLO, i.e. at most ``1 - q`` of the
  requests completed at that load took longer than the SLO (with TTFT / ITL / e2e bounds: longer than the bound
  whose share is the worst, ITL counted per output token; ``adapter.calibrate.history``). Requests are pooled
  per load bin (a fraction of 1 % needs hundreds of requests to mean anything), and a bin counts as "over" only
  when the next judged bin is over too, so one noisy bin does not end the search.
* **safe point**: the per-pod load the HPA should hold, ``knee / ((1 + growth) x band)``:
  ``growth`` is how much the Deployment's demand grows within one cold start (new pods load their model,
  the HPA waits for its stabilization window) at the ``growth_quantile`` of the history, so the pods already
  running absorb the growth until new ones are ready; ``band`` makes the composite act by the knee: the HPA
  does nothing while the composite is within its tolerance of 1 (10 % by default, kube-controller-manager
  ``--horizontal-pod-autoscaler-tolerance``), so the safe point is the load s at which the composite proposed
  for s reads 1 + tolerance at knee / (1 + growth) on the bins' own medians (``solve_safe``, by bisection: the
  targets scale with s), and never above knee / ((1 + growth) x (1 + tolerance / the share of the composite
  that is not flat)), the same for a composite linear in load and lower for one that bends over; where no
  s reads 1 + tolerance there, that one, with a warning when its composite reads less.
* **targets**: each term's ``idle`` and ``target`` so the term reads 0 at zero load and 1 at the safe point
  on the straight line through its values between half the safe point and the safe point. A term that is
  flat or saturating there (GPU utilization reads ~100 % whenever a pod is busy; a queue is empty until the
  batch is full; see ``MIN_RISE``, ``SATURATION_RATIO``; a history that never ran light enough to tell: a term
  already at ``SATURATED_SHARE`` of its highest reading) cannot track load: it keeps ``idle`` 0 and its
  value at the safe point as its target (a busy-pod presence term) or, when it reads 0 there or anywhere
  between half the safe point and the safe point (an integer queue count that first shows a request or two
  near the knee: a step, not a slope), its catalog target (an overload alarm). The terms that do track load
  then get targets that make the whole composite read exactly 1.0 at the safe point.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from adapter.catalog import MAX_ELASTICITY, MIN_ELASTICITY, Term
from adapter.forecast.boost import DEFAULT_MAX_BOOST, rise_quantile

F64 = npt.NDArray[np.float64]

DEFAULT_BINS = 40
DEFAULT_SLO_QUANTILE = 0.99
# kube-controller-manager --horizontal-pod-autoscaler-tolerance default (pkg/controller/podautoscaler/config).
HPA_TOLERANCE = 0.1
# Fewer requests than this in a load bin cannot tell a 1 % tail from noise (at 1 %, 5 expected slow requests).
MIN_BIN_REQUESTS = 500.0
# A term tracks load between half the safe point and the safe point when it rises there by at least 2 % of its
# value (more than measurement noise: GPU utilization pinned at 100 % does not) and has not saturated, i.e. its
# slope there is at least half its slope below half the safe point (a duty cycle flattens as it nears 100 %;
# a latency's slope grows with the batch).
MIN_RISE = 0.02
SATURATION_RATIO = 0.5
# A history with too few bins below half the safe point gives no saturation verdict; a term reading at least this
# share of its highest bin median at the safe point is then saturated there (a duty cycle at 99 % of the 100 % it
# reaches past the knee), not tracking load.
SATURATED_SHARE = 0.97
# Boosts at which a term's elasticity is fitted (evenly from 1.1 to the forecast's max_boost); at least half of
# them must fall within the measured bins.
ELASTICITY_POINTS = 10
# The safe point's search: bisection steps (2^-40 of the range) and the lowest safe point tried, as a share of the
# knee (a composite that reads 1 + tolerance only past 4 x its safe point gains too little to scale on).
# GAIN_STEP: the relative load step of the reported gain's central difference.
SAFE_ITERATIONS = 40
MIN_SAFE_SHARE = 0.25
GAIN_STEP = 0.05


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


@dataclass(frozen=True)
class TermProposal:
    metric: str
    weight: float
    idle: float
    target: float
    tracks_load: bool
    value_at_safe: float
    note: str
    flat: bool = False  # a presence term (reads its target at any busy load): the catalog's ``flat: true``
    when_missing: str = "omit_pod"  # the catalog term's, carried into the proposed snippet
    elasticity: float = 1.0  # how the term grows with the load below the safe point (``elasticity``)


@dataclass(frozen=True)
class Calibration:
    """What ``calibrate`` found and proposes. ``knee_rps`` is None when the SLO was never missed."""

    slo_s: float
    slo_quantile: float
    knee_rps: float | None
    max_load_rps: float
    growth: float
    band: float
    safe_rps: float | None
    bins: tuple[LoadBin, ...]
    terms: tuple[TermProposal, ...] = ()
    composite_at_safe: float | None = None
    warnings: tuple[str, ...] = field(default_factory=tuple)
    slo_label: str | None = None  # the SLO in words when it is not an e2e P99 bound (e.g. TTFT and ITL bounds)
    gain: float | None = None  # d ln composite / d ln load at the safe point (the proposed terms on the bins)

    @property
    def slo_text(self) -> str:
        """The SLO as the report states it: ``slo_label``, or ``P99 <= <slo_s> s``."""
        return self.slo_label or f"P99 <= {self.slo_s:g} s"

    @property
    def marked_flat(self) -> frozenset[str]:
        """The terms the proposed catalog marks ``flat: true``: the flat ones, when some term tracks load (with
        none, there is nothing for the boost to scale, and the catalog refuses a composite of flat terms only)."""
        if not any(p.tracks_load for p in self.terms):
            return frozenset()
        return frozenset(p.metric for p in self.terms if p.flat)


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


def _line(
    bins: Sequence[LoadBin], metric: str, low: float, high: float, min_bins: int = 2
) -> tuple[float, float] | None:
    """(intercept, slope) of the least-squares line through the bins' medians in [low, high]."""
    pts = [(b.load, b.terms.get(metric, math.nan)) for b in bins if low <= b.load <= high]
    pts = [(x, y) for x, y in pts if math.isfinite(y)]
    if len(pts) < max(min_bins, 2):
        return None
    x = np.array([p[0] for p in pts])
    y = np.array([p[1] for p in pts])
    if float(np.ptp(x)) <= 0:
        return None
    slope, intercept = np.polyfit(x, y, 1)
    return float(intercept), float(slope)


def _positive_throughout(bins: Sequence[LoadBin], metric: str, low: float, high: float) -> bool:
    """True when every bin in [low, high] with a value for ``metric`` reads above 0."""
    vals = [b.terms.get(metric, math.nan) for b in bins if low <= b.load <= high]
    vals = [v for v in vals if math.isfinite(v)]
    return bool(vals) and min(vals) > 0


def _highest(bins: Sequence[LoadBin], metric: str) -> float:
    """The highest of the bins' medians of ``metric`` (NaN when no bin has a value)."""
    vals = [v for b in bins if math.isfinite(v := b.terms.get(metric, math.nan))]
    return max(vals) if vals else math.nan


def _measured(bins: Sequence[LoadBin], metric: str, load: float) -> float | None:
    """The bins' median of ``metric`` at ``load``, interpolated linearly between the neighbouring bins."""
    pts = sorted((b.load, b.terms.get(metric, math.nan)) for b in bins)
    pts = [(x, y) for x, y in pts if math.isfinite(y)]
    if not pts or not pts[0][0] <= load <= pts[-1][0]:
        return None
    return float(np.interp(load, [p[0] for p in pts], [p[1] for p in pts]))


def fit_elasticity(
    bins: Sequence[LoadBin], metric: str, idle: float, safe: float, max_boost: float = DEFAULT_MAX_BOOST
) -> float | None:
    """The ``elasticity`` e of a term (``Term.elasticity``) that best reads the term at ``b`` times the load from
    its reading at ``safe / b``, for the boosts b from 1.1 to ``max_boost``: the least-squares slope through 0
    of ``ln(n(safe) / n(safe / b))`` on ``ln b``, ``n`` the term's measured value above ``idle`` (bin medians,
    interpolated). So the boosted composite at ``safe / b`` reads what the composite reads at ``safe``: the HPA
    holding it at 1 runs ``b`` times the pods. Rounded to 0.01 and kept within the catalog's bounds; None when
    the bins do not cover the range or the term reads its idle there."""
    top = _measured(bins, metric, safe)
    if top is None or top <= idle or max_boost <= 1.1:
        return None
    xs, ys = [], []
    for b in np.linspace(1.1, max_boost, ELASTICITY_POINTS):
        low = _measured(bins, metric, safe / b)
        if low is None or low <= idle:
            continue
        xs.append(math.log(b))
        ys.append(math.log((top - idle) / (low - idle)))
    if len(xs) < ELASTICITY_POINTS // 2:
        return None
    x, y = np.asarray(xs), np.asarray(ys)
    e = float(x @ y / (x @ x))
    return round(min(max(e, MIN_ELASTICITY), MAX_ELASTICITY), 2)


def propose_terms(
    bins: Sequence[LoadBin], terms: Sequence[Term], safe: float, max_boost: float = DEFAULT_MAX_BOOST
) -> tuple[list[TermProposal], float]:
    """Per-term (idle, target) for the safe point, and the composite's reading there (1.0 unless no term
    tracks load). See the module docstring for the rule.

    The reading is the composite of the *measured* values at the safe point (each term's bin medians,
    interpolated), not of the fitted lines: a term that curves upwards towards the knee (the P99) reads
    more there than its line says, and a term kept as an alarm (the queue) may already read a little. The
    lines only give each tracking term's ``idle``; its target makes up what the others read at the safe point.
    """
    total_w = sum(t.weight for t in terms)
    fixed_sum = 0.0  # what the flat and alarm terms read at the safe point (weighted)
    track_w = 0.0
    rough: list[tuple[Term, float, float, bool, bool, str]] = []  # term, idle, at safe, tracks, flat, note
    for t in terms:
        line = _line(bins, t.metric, 0.5 * safe, safe)
        if line is None:  # too few bins in the upper half: use everything below the safe point
            line = _line(bins, t.metric, 0.0, safe)
        if line is None:
            rough.append((t, t.idle, t.target, False, False, "no data below the safe point: catalog values kept"))
            continue
        intercept, slope = line
        low = _line(bins, t.metric, 0.0, 0.5 * safe, min_bins=3)  # history that never ran light: no verdict
        fitted = intercept + slope * safe
        measured = _measured(bins, t.metric, safe)
        at_safe = measured if measured is not None else fitted
        rises = slope > 0 and slope * 0.5 * safe >= MIN_RISE * fitted
        if low is not None:
            saturating = low[1] > 0 and slope < SATURATION_RATIO * low[1]
        else:
            saturating = at_safe >= SATURATED_SHARE * _highest(bins, t.metric)
        # A term that still reads 0 in part of the fit range (a queue that first shows a request or two just
        # below the safe point: integer counts, a step, not a slope) is an alarm, not a load signal: scaled
        # to 1.0 at the safe point, one waiting request would add most of a pod's worth of composite.
        stepwise = not _positive_throughout(bins, t.metric, 0.5 * safe, safe)
        if at_safe > 0 and rises and not saturating and not stepwise:
            idle = min(max(intercept, 0.0), at_safe)
            rough.append((t, idle, at_safe, True, False, "tracks load"))
            track_w += t.weight / total_w
        elif at_safe > 0 and not stepwise:
            # Flat: its typical value near the safe point (not the line's extrapolation, which may pass 100 %).
            near = [
                b.terms[t.metric]
                for b in bins
                if 0.5 * safe <= b.load <= safe and math.isfinite(b.terms.get(t.metric, math.nan))
            ]
            level = float(np.median(near)) if near else at_safe
            rough.append((t, 0.0, level, False, True, "flat below the knee (saturated): reads 1 whenever busy"))
            fixed_sum += (t.weight / total_w) * at_safe / level
        else:
            rough.append(
                (
                    t,
                    t.idle,
                    t.target,
                    False,
                    False,
                    "0 in part of the range below the safe point: catalog target kept (overload alarm)",
                )
            )
            if measured is not None and t.target > t.idle:
                fixed_sum += (t.weight / total_w) * max(measured - t.idle, 0.0) / (t.target - t.idle)
    # Make the composite read 1.0 at the safe point: the tracking terms make up what the others do not.
    scale = (1.0 - fixed_sum) / track_w if track_w > 0 else 1.0
    out = []
    composite = fixed_sum
    for t, idle, at_safe, tracks, flat, note in rough:
        elasticity = 1.0
        if tracks and scale > 0:
            target = idle + (at_safe - idle) / scale
            composite += (t.weight / total_w) * scale
            fitted_e = fit_elasticity(bins, t.metric, idle, safe, max_boost)
            elasticity = fitted_e if fitted_e is not None else 1.0
        else:
            target = at_safe if flat else t.target
        out.append(
            TermProposal(
                metric=t.metric,
                weight=t.weight,
                idle=idle,
                target=target,
                tracks_load=tracks,
                value_at_safe=at_safe,
                note=note,
                flat=flat,
                when_missing=t.when_missing,
                elasticity=elasticity,
            )
        )
    return out, composite


def composite_reading(
    bins: Sequence[LoadBin], props: Sequence[TermProposal], load: float, *, total_w: float | None = None
) -> float:
    """What the composite of ``props`` reads at ``load`` on the bins' medians (interpolated): each term
    ``max(value - idle, 0) / (target - idle)`` (``adapter.aggregate``), weighted; a term without a value there
    reads 0."""
    total = total_w if total_w is not None else sum(p.weight for p in props)
    out = 0.0
    for p in props:
        value = _measured(bins, p.metric, load)
        if value is None or not p.target > p.idle:
            continue
        out += (p.weight / total) * max(value - p.idle, 0.0) / (p.target - p.idle)
    return out


def composite_gain(
    bins: Sequence[LoadBin], props: Sequence[TermProposal], safe: float, step: float = GAIN_STEP
) -> float | None:
    """d ln composite / d ln load at ``safe`` (central difference over ``safe`` x (1 +- ``step``) on the bins):
    1 for a composite proportional to load, the non-flat share for a flat term plus linear ones; None when the
    composite reads 0 on either side."""
    up = composite_reading(bins, props, safe * (1.0 + step))
    down = composite_reading(bins, props, safe / (1.0 + step))
    if not (up > 0 and down > 0):
        return None
    return math.log(up / down) / (2.0 * math.log(1.0 + step))


def solve_safe(
    bins: Sequence[LoadBin],
    terms: Sequence[Term],
    top: float,
    tolerance: float,
    max_boost: float = DEFAULT_MAX_BOOST,
) -> tuple[float, bool]:
    """The safe point s in (0, ``top``] at which the composite proposed for s (``propose_terms``) reads
    1 + ``tolerance`` at ``top``, by bisection on s (the targets scale with s); (s, True), or (``top``, False)
    when no s between ``MIN_SAFE_SHARE`` x ``top`` and ``top`` brackets it (no term tracks load; a composite
    that never gains enough)."""
    goal = 1.0 + tolerance
    total_w = sum(t.weight for t in terms)

    def excess(s: float) -> float | None:
        props, at_safe = propose_terms(bins, terms, s, max_boost)
        if not any(p.tracks_load for p in props) or abs(at_safe - 1.0) > 1e-6:
            return None
        return composite_reading(bins, props, top, total_w=total_w) - goal

    hi, lo = top, top * MIN_SAFE_SHARE
    f_hi, f_lo = excess(hi), excess(lo)
    if f_hi is None or f_lo is None or f_lo < 0:
        return top, False
    if f_hi >= 0:
        return hi, True
    for _ in range(SAFE_ITERATIONS):
        mid = 0.5 * (lo + hi)
        f_mid = excess(mid)
        if f_mid is None:
            return top, False
        if f_mid >= 0:
            lo = mid
        else:
            hi = mid
    return lo, True


def safe_point(
    bins: Sequence[LoadBin],
    terms: Sequence[Term],
    top: float,
    tolerance: float,
    max_boost: float = DEFAULT_MAX_BOOST,
) -> float:
    """The safe point for the knee ``top`` (less the growth headroom): where the composite proposed for it reads
    1 + ``tolerance`` at ``top`` (``solve_safe``), so the HPA acts no later than there, but never above the flat
    share's rule ``top / (1 + tolerance / max(1 - flat share, 0.25))``, which is exact for a composite linear in
    load and leaves one that curves upwards (an ITL P99 with elasticity > 1) reading more than 1 + tolerance at
    the knee; that rule where no safe point reads 1 + tolerance there."""
    props, _ = propose_terms(bins, terms, top / (1.0 + tolerance), max_boost)
    total_w = sum(t.weight for t in terms)
    flat = sum(p.weight / total_w for p in props if p.flat)
    linear = top / (1.0 + tolerance / max(1.0 - flat, 0.25))
    measured, solved = solve_safe(bins, terms, top, tolerance, max_boost)
    return min(measured, linear) if solved else linear


def calibrate(
    history: History,
    terms: Sequence[Term],
    *,
    slo_s: float,
    slo_quantile: float = DEFAULT_SLO_QUANTILE,
    cold_start_s: float = 300.0,
    growth_quantile: float = 0.5,
    tolerance: float = HPA_TOLERANCE,
    bins: int = DEFAULT_BINS,
    min_requests: float = MIN_BIN_REQUESTS,
    slo_label: str | None = None,
    max_boost: float = DEFAULT_MAX_BOOST,
) -> Calibration:
    """Knee, safe point and proposed targets from ``history`` (see the module docstring); each tracking term's
    elasticity for boosts up to ``max_boost`` (``fit_elasticity``)."""
    table = load_bins(history, bins=bins)
    warnings: list[str] = []
    max_load = max((b.load for b in table), default=0.0)
    knee = find_knee(table, slo_quantile=slo_quantile, min_requests=min_requests)
    growth = demand_growth(
        history.deployment_load,
        step_s=history.demand_step_s or history.step_s,
        horizon_s=cold_start_s,
        quantile=growth_quantile,
    )
    if knee is None:
        warnings.append(
            (f"the P99 never exceeded the SLO ({slo_s:g} s)" if slo_label is None else f"no bound of {slo_label} broke")
            + f" up to {max_load:.3g} req/s per pod: "
            "the knee is above that; run the fleet hotter (a load test) or calibrate a simulation"
        )
        return Calibration(
            slo_s=slo_s,
            slo_label=slo_label,
            slo_quantile=slo_quantile,
            knee_rps=None,
            max_load_rps=max_load,
            growth=growth,
            band=1.0,
            safe_rps=None,
            bins=tuple(table),
            warnings=tuple(warnings),
        )
    top = knee / (1.0 + growth)
    safe = safe_point(table, terms, top, tolerance, max_boost)
    band = top / safe
    props, composite = propose_terms(table, terms, safe, max_boost)
    if not any(p.tracks_load for p in props):
        warnings.append(
            "no term tracks load below the knee: the composite cannot read 1.0 at the safe point; "
            f"it reads {composite:.3g} there (use that as the HPA's averageValue)"
        )
    at_top = composite_reading(table, props, top, total_w=sum(t.weight for t in terms))
    if any(p.tracks_load for p in props) and at_top < (1.0 + tolerance) * (1.0 - 1e-3):
        warnings.append(
            f"no safe point makes the proposed composite read {1.0 + tolerance:.3g} (1 + tolerance) at "
            f"{top:.4g} req/s per pod (the knee / (1 + growth)): the band {band:.3g} assumes the non-flat terms "
            f"are linear in load; the composite reads {at_top:.3g} there, and the HPA may sit within its "
            "tolerance while the SLO is missed"
        )
    gain = composite_gain(table, props, safe)
    return Calibration(
        slo_s=slo_s,
        slo_label=slo_label,
        slo_quantile=slo_quantile,
        knee_rps=knee,
        max_load_rps=max_load,
        growth=growth,
        band=band,
        safe_rps=safe,
        bins=tuple(table),
        terms=tuple(props),
        composite_at_safe=composite,
        warnings=tuple(warnings),
        gain=gain,
    )
