"""Pure: the calibration as a whole: the knee (``adapter.calibrate.knee``), the safe point and the targets
proposed there (``adapter.calibrate.proposal``), and the warnings that go with them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from adapter.calibrate.knee import (
    DEFAULT_BINS,
    DEFAULT_SLO_QUANTILE,
    MIN_BIN_REQUESTS,
    History,
    LoadBin,
    demand_growth,
    find_knee,
    load_bins,
)
from adapter.calibrate.proposal import (
    HPA_TOLERANCE,
    TermProposal,
    composite_gain,
    composite_reading,
    propose_terms,
    safe_point,
)
from adapter.catalog import Term
from adapter.forecast.boost import DEFAULT_MAX_BOOST


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
