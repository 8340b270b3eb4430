"""How many pods a boost b buys: the boosted composite's fixed point against the reactive one, per engine profile.

The HPA settles where the served value is 1 per pod. For each engine profile (``adapter.sim.profiles``, the default
mix and SLO) the simulated fleet ``calibrate --simulate`` sweeps (``adapter.calibrate.history.simulated_history``:
token-level engines read through the ``Observer``, vLLM's histogram buckets and the catalog's latency window, as
``simulate`` reads them) is held at 60 steady per-pod loads up to 1.2 x the knee. Each term's median per load gives
the composite the catalog computes (``adapter.aggregate.fuse``). ``L1`` is the per-pod load at which it reads 1
(what the reactive composite holds), ``Lb`` the one at which the boosted composite at boost b reads 1
(``adapter.aggregate.at_load``, the server's and the simulator's rule); ``L1 / Lb`` is the pods bought. The
design's invariant is ``L1 / Lb = b``. Each catalog is measured with its terms' elasticities as written and, for
comparison, with every elasticity 1 (the proportional rule); ``calibrate`` fits an elasticity for the same sweep
(``adapter.calibrate.proposal.fit_elasticity`` at the load where the composite reads 1, ``max_boost`` 2).

    python benchmarks/boost_pods.py [--profile NAME ...] [--catalog FILE] [--write-results]

About 5 s per profile.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import results_page

from adapter.aggregate import CompositeValue, PodValue, at_load, fuse
from adapter.calibrate.history import simulated_history
from adapter.calibrate.knee import MIN_BIN_REQUESTS, LoadBin
from adapter.calibrate.proposal import fit_elasticity
from adapter.catalog import CompositeDef, load_catalog
from adapter.sim.config import FleetConfig
from adapter.sim.mix import DEFAULT_MIX, mix
from adapter.sim.profiles import PROFILES
from adapter.sim.slo import DEFAULT_SLO, parse_slo
from adapter.sim.tokenfleet import TokenEngine

BOOSTS = (1.1, 1.25, 1.5, 2.0)
LEVELS = 60
TOP = 1.2  # x the knee


def sweep(profile: str, composite: CompositeDef) -> tuple[float, list[tuple[float, dict[str, float]]]]:
    """(knee, [(per-pod load, {metric: median reading})]) of the profile's steady sweep."""
    engine = TokenEngine(PROFILES[profile], mix(DEFAULT_MIX), parse_slo(DEFAULT_SLO))
    base = FleetConfig(capacity_rps=1.0)
    config = engine.fleet_config(
        deployment=base.deployment, load_delay_s=base.load_delay_s, drain_timeout_s=120.0, seed=0
    )
    knee = engine.knee()
    pods = max(2, math.ceil(MIN_BIN_REQUESTS / (0.5 * knee * 60.0)))
    history = simulated_history(
        engine,
        config,
        composite.terms,
        pods=pods,
        levels=LEVELS,
        top=TOP * knee / engine.model().saturation_rps,
    )
    rows = []
    for load in np.unique(history.load):
        at = history.load == load
        rows.append((float(load), {m: float(np.nanmedian(v[at])) for m, v in history.terms.items()}))
    return knee, rows


def crossing(loads: list[float], values: list[float]) -> float:
    """The first load at which ``values`` reaches 1 (linear between sweep points); NaN if it never does."""
    for i, v in enumerate(values):
        if v >= 1.0:
            if i == 0:
                return loads[0]
            return float(np.interp(1.0, [values[i - 1], v], [loads[i - 1], loads[i]]))
    return math.nan


def bought(composite: CompositeDef, rows: list[tuple[float, dict[str, float]]]) -> tuple[float, list[float]]:
    """(L1, pods bought at each of BOOSTS) for ``composite`` on the sweep ``rows``."""
    loads = [load for load, _ in rows]
    pods: list[CompositeValue] = []
    for _, reading in rows:
        components = {t.metric: {"p": PodValue(reading[t.metric], 0.0, 1)} for t in composite.terms}
        pods.append(fuse(composite.terms, components)["p"])
    l1 = crossing(loads, [cv.value for cv in pods])
    out = []
    for b in BOOSTS:
        lb = crossing(loads, [at_load(cv, composite.flat_metrics, b, composite.elasticities) for cv in pods])
        out.append(l1 / lb)
    return l1, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--profile", action="append", choices=sorted(PROFILES), help="default: every profile")
    parser.add_argument("--catalog", type=Path, default=None, help="default: the embedded catalog")
    results_page.add_arguments(parser)
    args = parser.parse_args(argv)
    command = results_page.command_line(__file__, sys.argv[1:] if argv is None else argv)
    with results_page.recording("boost_pods", args.write_results, command, args.results_file):
        return _run(args, command)


def _run(args: argparse.Namespace, command: str) -> int:
    print(f"command: {command}")
    catalog = load_catalog(args.catalog)
    if catalog.forecast is None:
        raise SystemExit("the catalog has no forecast section: there is no boosted composite")
    composite = catalog.composites[catalog.forecast.base]
    proportional = dataclasses.replace(
        composite, terms=tuple(dataclasses.replace(t, elasticity=1.0) for t in composite.terms)
    )
    head = " | ".join(f"b = {b:g}" for b in BOOSTS)
    print(f"| profile | elasticities | L1 (x knee) | {head} |")
    print("|---|---|---:|" + "---:|" * len(BOOSTS))
    fitted: list[str] = []
    for profile in args.profile or sorted(PROFILES):
        knee, rows = sweep(profile, composite)
        variants = [("as in the catalog", composite)]
        if composite.elasticities:
            variants.append(("all 1 (proportional)", proportional))
        for label, comp in variants:
            l1, pods = bought(comp, rows)
            cells = " | ".join(f"{p:.2f}" for p in pods)
            print(f"| {profile} | {label} | {l1:.3g} ({l1 / knee:.2f}) | {cells} |")
        l1, _ = bought(composite, rows)
        bins = [LoadBin(load, 1, 0.0, 0.0, reading) for load, reading in rows]
        for t in composite.terms:
            e = None if t.flat else fit_elasticity(bins, t.metric, t.idle, l1)
            if e is not None:  # flat terms, and alarms reading their idle below L1, get none
                fitted.append(f"| {profile} | {t.metric} | {e:g} |")
    print()
    print("| profile | term | elasticity calibrate fits at L1 (the catalog's idle) |")
    print("|---|---|---:|")
    print("\n".join(fitted))
    return 0


if __name__ == "__main__":
    sys.exit(main())
