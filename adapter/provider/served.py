"""What the catalog provider serves, resolved once when it is built: one ``Served`` record per served metric.

The request path dispatches on these records (its kind, window, combine rule, terms) and never matches a
metric's name against the catalog again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from adapter.catalog import BOOST_METRIC, FORECAST_METRIC, Catalog, Combine, Term
from adapter.provider.base import DEPLOYMENTS, RESOURCES

Kind = Literal["metric", "composite", "boosted", "forecast", "boost"]


@dataclass(frozen=True, slots=True)
class Served:
    """One served metric: the request path dispatches on this record and never matches the metric's name
    against the catalog again."""

    name: str
    kind: Kind
    resources: tuple[str, ...]  # the API resources it is served for
    base: str  # what is read from the backend: itself, what a boosted metric boosts; "" for forecast and boost
    window_s: int | None
    combine: Combine  # how an object's pods combine (the base's rule for the boosted composite)
    names: tuple[str, ...] = ()  # the catalog metrics a read queries (itself, or the composite's terms)
    terms: tuple[Term, ...] = ()  # a composite's terms (the base's for the boosted composite)
    flat: frozenset[str] = frozenset()  # the boosted composite's flat terms (``aggregate.at_load``)
    # Its terms' elasticities other than 1 (``aggregate.at_load``): the catalog's ``CompositeDef.elasticities``.
    elasticity: Mapping[str, float] = field(default_factory=dict, hash=False)
    # A boosted metric of ``forecast.also``: (idle, elasticity) of ``aggregate.boost_value`` (``Catalog.boost_rule``).
    rule: tuple[float, float] = (0.0, 1.0)


def resolve(catalog: Catalog, forecasting: bool) -> dict[str, Served]:
    """Every metric the provider serves, by name: catalog metrics and composites on every resource, and with a
    forecast section and a forecast service the boosted composite and the boosted metrics of ``forecast.also``
    (pods, Deployments), the forecast and the boost (Deployments)."""
    every = tuple(RESOURCES)
    out: dict[str, Served] = {}
    for name in catalog.names():  # discovery lists them in this order
        if name in catalog.metrics:
            mdef = catalog.metrics[name]
            out[name] = Served(name, "metric", every, name, mdef.window_seconds, mdef.objects, (name,))
            continue
        cdef = catalog.composites[name]
        windows = [w for t in cdef.terms if (w := catalog.metrics[t.metric].window_seconds) is not None]
        names = tuple(dict.fromkeys(t.metric for t in cdef.terms))
        window = max(windows) if windows else None
        out[name] = Served(
            name,
            "composite",
            every,
            name,
            window,
            cdef.objects,
            names,
            cdef.terms,
            cdef.flat_metrics,
            cdef.elasticities,
        )
    if catalog.forecast is not None and forecasting:
        base = out[catalog.forecast.base]
        boosted = catalog.forecast.boosted
        out[boosted] = Served(
            boosted,
            "boosted",
            ("pods", DEPLOYMENTS),
            base.name,
            base.window_s,
            base.combine,
            base.names,
            base.terms,
            base.flat,
            base.elasticity,
        )
        for boosted_name, name in catalog.forecast.boosted_bases.items():
            if name != base.name:  # a metric of ``forecast.also``, read at boost x the load (``boost_value``)
                plain = out[name]
                out[boosted_name] = Served(
                    boosted_name,
                    "boosted",
                    ("pods", DEPLOYMENTS),
                    name,
                    plain.window_s,
                    plain.combine,
                    plain.names,
                    rule=catalog.boost_rule(boosted_name),
                )
        out[FORECAST_METRIC] = Served(FORECAST_METRIC, "forecast", (DEPLOYMENTS,), "", None, "max")
        out[BOOST_METRIC] = Served(BOOST_METRIC, "boost", (DEPLOYMENTS,), "", None, "max")
    return out
