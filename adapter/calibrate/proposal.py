"""Pure: the safe point and the composite's targets proposed there, from the per-pod load bins of
``adapter.calibrate.knee`` (docs/calibrate.md).

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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from adapter.aggregate import normalize
from adapter.calibrate.knee import LoadBin
from adapter.catalog import MAX_ELASTICITY, MIN_ELASTICITY, Term
from adapter.forecast.boost import DEFAULT_MAX_BOOST

# kube-controller-manager --horizontal-pod-autoscaler-tolerance default (pkg/controller/podautoscaler/config).
HPA_TOLERANCE = 0.1
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
                fixed_sum += (t.weight / total_w) * normalize(t, measured)
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
        out += (p.weight / total) * normalize(p, value)
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
