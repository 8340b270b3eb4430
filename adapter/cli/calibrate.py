"""``calibrate``: find where a Deployment's P99 stops meeting the SLO and propose the composite's targets.

Source: a running Deployment's history in Prometheus / VictoriaMetrics (``--prometheus-url``, ``--namespace``,
``--deployment``, ``--since``), or a simulated fleet of token-level vLLM engines swept through steady loads
(``--simulate`` with the ``simulate`` command's engine options). The SLO: P99 bounds on vLLM's TTFT / inter-token
/ e2e histograms (``--slo ttft=2s,itl=100ms``, the default: a load breaks it when any bound's P99 does), or, for a
backend's history, one e2e P99 bound on one histogram (``--slo-p99 0.8s [--histogram NAME]``). Output: a summary
on stdout (with the token mix and the KV-cache usage the history saw), ``--json`` (the report, with the load
bins), ``--catalog-out`` (the ``composites:`` entry to paste into your catalog) and ``--plot`` (PNG: per-pod
load vs the share of slow requests and vs each term, the knee and the safe point marked). Exit code 0 when
targets were proposed, 1 when the history never reached the knee, 2 on a user error (one line on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from adapter.cli.fleet_options import TRACE_LAYOUT_OPTIONS, add_trace_layout_arguments, load_trace_args, token_engine
from adapter.cli.series_input import CliError, parse_duration
from adapter.errors import AdapterError, ConfigError


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "calibrate", help="find the knee of a Deployment and propose the composite targets", description=__doc__
    )
    src = p.add_argument_group("history from Prometheus / VictoriaMetrics")
    src.add_argument("--prometheus-url", help="base URL of Prometheus or VictoriaMetrics")
    src.add_argument("--backend", default="prometheus", choices=["prometheus", "victoriametrics"])
    src.add_argument("--namespace", help="the Deployment's namespace")
    src.add_argument("--deployment", help="the Deployment (its pods are <deployment>-<hash>-<suffix>)")
    src.add_argument("--since", default="7d", help="how far back to read (default 7d)")
    src.add_argument("--end", type=float, default=None, help="unix time the history ends (default: now)")
    src.add_argument("--step", default="1m", help="resolution of the history (default 1m)")
    src.add_argument(
        "--window", default=None, help="replace every query's rate/latency window (default: the catalog's; e.g. 2m)"
    )
    src.add_argument(
        "--histogram",
        default=None,
        help="with --slo-p99: the latency histogram whose _bucket series decide it "
        "(default vllm:e2e_request_latency_seconds)",
    )
    sim = p.add_argument_group("or a simulated fleet (--simulate)")
    sim.add_argument(
        "--simulate",
        action="store_true",
        help="sweep a simulated fleet of token-level vLLM engines through steady loads (docs/simulation.md)",
    )
    sim.add_argument("--profile", default=None, help="the pods' engine profile (default llama3-8b-h100)")
    sim.add_argument("--mix", default=None, help="request mix (default azure-conversation)")
    sim.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="a trace CSV whose demand growth sets the cold-start headroom (the shared layout, or the options "
        "below as for simulate); its token columns give the mix of the sweep",
    )
    add_trace_layout_arguments(sim)
    cal = p.add_argument_group("what safe means")
    cal.add_argument(
        "--slo",
        default=None,
        help="P99 bounds on vLLM's TTFT / inter-token / e2e histograms, ttft=2s,itl=100ms[,e2e=30s] (the default); "
        "a load is over the SLO when any bound's P99 is",
    )
    cal.add_argument(
        "--slo-p99",
        default="0.8s",
        action=_Given,
        help="instead, for a backend's history: one e2e P99 bound on --histogram (e.g. 0.8s)",
    )
    cal.add_argument("--slo-quantile", type=float, default=0.99, help="the SLO's quantile (default 0.99)")
    cal.add_argument(
        "--cold-start",
        default="5m",
        help="model load + the HPA's delays: the demand growth over this long is the headroom "
        "(default 5m: 90-180 s load, 60 s stabilization, a 15 s sync, 30-60 s old metrics)",
    )
    cal.add_argument(
        "--growth-quantile",
        type=float,
        default=0.5,
        help="quantile of that growth to absorb without new pods (default 0.5; see docs/calibrate.md)",
    )
    cal.add_argument(
        "--tolerance",
        type=float,
        default=0.1,
        help="the composite reads 1 + this at the knee (default 0.1: the HPA controller's default tolerance; with "
        "the example HPA's scale-up tolerance 0.02 the rest is cold-start headroom, docs/calibrate.md)",
    )
    p.add_argument("--catalog", type=Path, default=None, help="metric catalog YAML (default: the embedded one)")
    p.add_argument("--composite", default=None, help="which composite (default: the forecast's base)")
    p.add_argument("--json", type=Path, default=None, help="write the report here")
    p.add_argument("--plot", type=Path, default=None, help="write a PNG here")
    p.add_argument("--catalog-out", type=Path, default=None, help="write the proposed composites: entry here")
    p.set_defaults(func=run, slo_p99_given=False)


class _Given(argparse.Action):
    """Stores the value and notes that the user gave the option (``<dest>_given``): ``--slo-p99`` picks the e2e
    form for a backend's history only when given."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:  # fmt: skip
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


def _token_slo(args: argparse.Namespace) -> Any:
    """The TTFT/ITL/e2e bounds of the token form (``SloBounds``), None for the e2e form of a backend's history
    (``--slo-p99``); ``ValueError``/``CliError`` for a bad or contradictory SLO."""
    from adapter.sim.slo import DEFAULT_SLO, parse_slo

    if args.simulate:
        if args.slo_p99_given or args.histogram is not None:
            raise CliError("--slo-p99 and --histogram read a backend's history; --simulate takes --slo")
    else:
        if args.slo is not None and (args.slo_p99_given or args.histogram is not None):
            raise CliError("give --slo (TTFT/ITL/e2e bounds) or --slo-p99 with --histogram (one e2e bound), not both")
        if args.slo_p99_given:
            return None
        if args.histogram is not None:
            raise CliError("--histogram goes with --slo-p99 (the e2e form); --slo reads vLLM's own histograms")
    return parse_slo(args.slo or DEFAULT_SLO)


def _history(args: argparse.Namespace, catalog: Any, terms: Any, slo_s: float) -> Any:
    from adapter.calibrate.history import knee_sweep, open_backend, read_history, simulated_history

    if args.simulate:
        from adapter.sim.config import Deployment, FleetConfig
        from adapter.sim.simulate import latency_window

        _token_slo(args)  # an e2e-form option is refused, not ignored
        trace = None
        if args.trace is not None:
            trace = load_trace_args(args)
        elif any(getattr(args, name) for name in TRACE_LAYOUT_OPTIONS):
            raise CliError("the trace layout options (--value-col, --count, token columns ...) need --trace")
        engine = token_engine(args, trace)
        config = engine.fleet_config(
            deployment=Deployment(), load_delay_s=FleetConfig.load_delay_s, drain_timeout_s=120.0, seed=0
        )
        pods, levels, top = knee_sweep(engine)
        demand, demand_step = None, 60.0
        if trace is not None:
            demand = np.asarray(trace.rates, dtype=np.float64)
            demand = np.where(trace.good_mask, demand, np.nan)
            demand_step = trace.step_s
        return simulated_history(
            engine,
            config,
            terms,
            deployment_load=demand,
            deployment_step_s=demand_step,
            latency_window_s=latency_window(catalog),
            pods=pods,
            levels=levels,
            top=top,
        )
    missing = [
        f"--{n.replace('_', '-')}" for n in ("prometheus_url", "namespace", "deployment") if not getattr(args, n)
    ]
    if missing:
        raise CliError(f"give {', '.join(missing)} (or --simulate)")
    bounds = _token_slo(args)
    if bounds is None and args.histogram is None:
        args.histogram = "vllm:e2e_request_latency_seconds"
    step = parse_duration(args.step)
    end = args.end if args.end is not None else time.time()
    start = end - parse_duration(args.since)
    if args.window is not None:
        parse_duration(args.window)

    async def read() -> Any:
        async with open_backend(args.prometheus_url, backend=args.backend) as client:
            return await read_history(
                client,
                catalog,
                terms,
                namespace=args.namespace,
                deployment=args.deployment,
                start=start,
                end=end,
                step_s=step,
                slo_s=None if bounds is not None else slo_s,
                slo=bounds,
                window=args.window,
                histogram=args.histogram or "vllm:e2e_request_latency_seconds",
            )

    return asyncio.run(read())


def run(args: argparse.Namespace) -> int:
    """0: targets proposed; 1: the knee was not reached; 2: a user error (one line on stderr)."""
    from adapter.calibrate.calibration import calibrate
    from adapter.calibrate.report import catalog_snippet, summary, to_dict, write_plot
    from adapter.calibrate.workload import observed_workload
    from adapter.catalog import load_catalog
    from adapter.forecast.boost import DEFAULT_MAX_BOOST

    try:
        catalog = load_catalog(args.catalog)
        name = args.composite or (catalog.forecast.base if catalog.forecast else None)
        if name is None or name not in catalog.composites:
            raise CliError(f"no composite {name!r} in the catalog; give --composite")
        terms = catalog.composites[name].terms
        slo_s = parse_duration(args.slo_p99)
        if not 0.5 <= args.slo_quantile < 1 or not 0 <= args.growth_quantile <= 1 or args.tolerance < 0:
            raise CliError("--slo-quantile must be in [0.5, 1), --growth-quantile in [0, 1], --tolerance >= 0")
        history = _history(args, catalog, terms, slo_s)
        if history.load.size == 0:
            raise CliError("no history: no pod of the Deployment had load, latency buckets and the terms' series")
        label = None
        token_slo = _token_slo(args)
        if token_slo is not None:
            label = ", ".join(f"{k.upper()} P99 <= {v:g} s" for k, v in token_slo.stated.items())
        cal = calibrate(
            history,
            terms,
            slo_s=slo_s,
            slo_label=label,
            slo_quantile=args.slo_quantile,
            cold_start_s=parse_duration(args.cold_start),
            growth_quantile=args.growth_quantile,
            tolerance=args.tolerance,
            max_boost=catalog.forecast.max_boost if catalog.forecast is not None else DEFAULT_MAX_BOOST,
        )
    except (CliError, ConfigError, AdapterError, ValueError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    workload = observed_workload(history, cal)
    sys.stdout.write(summary(cal, composite=name, workload=workload))
    snippet = catalog_snippet(cal, composite=name)
    if snippet:
        sys.stdout.write("\n" + snippet)
    if args.json is not None:
        report = to_dict(cal, composite=name, workload=workload)
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    if args.catalog_out is not None and snippet:
        args.catalog_out.write_text(snippet, encoding="utf-8")
    if args.plot is not None:
        write_plot(cal, args.plot, composite=name)
    return 0 if cal.knee_rps is not None else 1
