"""``simulate``: replay a load trace through the HPA v2 model and compare scaling policies.

Offline (default): every policy on the same trace and the same fleet physics, each HPA synced every 15 s
of simulated time; prints a table and writes the figures as JSON (and a PNG with ``--plot``). With
``--live``: one policy in a closed loop against the real server (simulated fleet -> /metrics -> a local
Prometheus -> ``python -m adapter serve`` -> the HPA model over HTTP -> replicas back to the fleet), on a
compressed timescale, followed by an offline replay of what the HPA read (see ``adapter.demo.live``).

The trace: the shared ServeGen CSVs are read as they are (``--trace FILE``); any other CSV needs
``--value-col`` and ``--time-col`` (the same conventions as ``backtest``: seconds or ISO-8601 times,
``--time-unit min`` for a column in minutes, ``--index-step 1m`` for an index or, without ``--time-col``,
the row number; a numeric column that looks like minutes or an index is refused, never read as seconds;
``--count`` when the column counts requests per row). The trace is rescaled so that its peak needs
``--peak-pods`` pods (default 32: a fleet of roughly 5-40 pods on the shared trace).

The pods are token-level vLLM engines (``adapter.sim.engine`` / ``adapter.sim.steady``, docs/simulation.md):
``--profile`` names the engine (model, GPUs, step costs fitted to published vLLM figures), ``--mix`` the request
mix, or a trace's per-row token sums give each window its own (``--prompt-tokens-col COL --output-tokens-col COL
--count``); ``--slo ttft=2s,itl=100ms`` (the default) bounds P99 TTFT and ITL, and a minute violates the SLO when
any bound is broken. ``--peak-pods`` counts pods at the knee of the mix. ``--live`` runs the same engines against
the real server.

The replay starts at ``--start``; ``auto`` (the default) starts at the trace's beginning, or, when a
policy boosts, after the forecaster's history span (at most a quarter of the trace), which is fed to the
forecaster as history. Every user error is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path
from typing import Any

from adapter.cli.fleet_options import add_trace_layout_arguments, load_trace_args, token_engine

_DEFAULT_PEAK_PODS = 32.0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``simulate`` subcommand (``func=run``)."""
    p = subparsers.add_parser(
        "simulate",
        help="replay a load trace through the HPA model and compare scaling policies",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    src = p.add_argument_group("trace")
    src.add_argument("--trace", type=Path, required=True, help="CSV with the request rate over time")
    add_trace_layout_arguments(src)
    src.add_argument(
        "--peak-pods",
        type=float,
        default=None,
        help=f"scale the trace so its peak needs this many pods at the knee of the mix (default "
        f"{_DEFAULT_PEAK_PODS:g})",
    )
    src.add_argument("--peak-rps", type=float, default=None, help="or: scale the trace peak to this rate")
    src.add_argument(
        "--start",
        default="auto",
        help="start this far into the trace, e.g. 0, 6h or 2d (default auto: after the forecast's warm-up)",
    )
    src.add_argument("--duration", default=None, help="simulate this long, e.g. 5h or 14d (default: all)")
    src.add_argument("--days", type=float, default=None, help="shorthand for --duration <days>d")
    hpa = p.add_argument_group("autoscaler")
    hpa.add_argument("--hpa", type=Path, required=True, help="autoscaling/v2 HPA manifest (behavior, bounds)")
    hpa.add_argument(
        "--policy",
        action="append",
        default=None,
        metavar="NAME",
        help="cpu, gpu, queue, composite, boosted[:MODEL], hpa; any but hpa may end in @TARGET "
        "(repeatable; default: the five comparison policies); clairvoyant[:LEAD]@REQ_PER_POD is a "
        "bound, not a product: its HPA reads the trace's true peak demand over the next LEAD",
    )
    hpa.add_argument("--min-pods", type=int, default=None, help="override spec.minReplicas")
    hpa.add_argument("--max-pods", type=int, default=None, help="override spec.maxReplicas")
    hpa.add_argument(
        "--catalog",
        type=Path,
        default=None,
        help="metric catalog YAML (composite terms, forecast); default: the embedded one",
    )
    fleet = p.add_argument_group("fleet physics (the same for every policy)")
    fleet.add_argument(
        "--profile",
        default=None,
        help="the token-level vLLM engine of every pod: model, GPUs, step costs (default llama3-8b-h100; "
        "docs/simulation.md)",
    )
    fleet.add_argument(
        "--mix", default=None, help="request mix of a trace without token columns (default azure-conversation)"
    )
    fleet.add_argument("--load-time", default="90s..180s", help="model-load delay range of a new pod")
    fleet.add_argument("--drain-timeout", default="120s", help="terminationGracePeriod of a deleted pod")
    fleet.add_argument(
        "--initial-pods",
        type=int,
        default=None,
        help="ready pods at the start (default: the starting load at the knee, where P99 = SLO)",
    )
    fleet.add_argument(
        "--metric-delay",
        default="30s",
        help="age of the values the HPA reads, a multiple of 15 s (default 30s: dcgm-exporter + scrape); 0 for none",
    )
    fleet.add_argument(
        "--warm-gpus", type=int, default=None, help="GPUs the cluster has at once (default: always a free GPU)"
    )
    fleet.add_argument(
        "--node-provision", default="3m..7m", help="delay of an added GPU node with --warm-gpus (default 3m..7m)"
    )
    fleet.add_argument("--max-gpus", type=int, default=None, help="GPUs the cluster can grow to (--warm-gpus)")
    fleet.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--slo",
        default=None,
        help="P99 bounds, e.g. ttft=2s,itl=100ms (the default) or e2e=30s; a minute violates the SLO when any "
        "bound is broken",
    )
    p.add_argument("--workers", type=int, default=0, help="processes for the policies (default: CPUs)")
    p.add_argument("--json", required=True, type=Path, help="write the figures here")
    p.add_argument("--plot", type=Path, help="also write a PNG of replicas and load over time")
    live = p.add_argument_group("closed loop against the real server (--live)")
    live.add_argument("--live", action="store_true", help="run one policy against a real Prometheus + adapter")
    live.add_argument(
        "--speed", type=float, default=20.0, help="simulated seconds per wall second in --live (default 20)"
    )
    live.add_argument("--scrape-interval", default="500ms", help="Prometheus scrape interval in --live (wall)")
    p.set_defaults(func=run)


def _load_range(text: str, option: str = "--load-time") -> tuple[float, float]:
    from adapter.cli.series_input import parse_duration

    low, sep, high = text.partition("..")
    a = parse_duration(low)
    b = parse_duration(high) if sep else a
    if b < a:
        raise ValueError(f"{option} {text!r}: the range must go from low to high")
    return a, b


def _delay(text: str) -> float:
    from adapter.cli.series_input import parse_duration

    return 0.0 if text.strip() in ("0", "0s") else parse_duration(text)


def run(args: argparse.Namespace) -> int:
    """Run the simulate command: 0 on success, 2 (one line on stderr) on a user error, 1 if --live failed."""
    import logging

    from adapter.cli.series_input import CliError, parse_duration
    from adapter.errors import ConfigError
    from adapter.sim.simulate import SimulationError

    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))
    try:
        return _run(args, parse_duration)
    except (CliError, ConfigError, SimulationError, ValueError, OSError) as exc:
        print(f"simulate: error: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, parse_duration: Any) -> int:
    from dataclasses import replace

    from adapter.catalog import load_catalog
    from adapter.hpa.spec import HPASpecError, load_hpa
    from adapter.sim.config import Deployment
    from adapter.sim.lifecycle import GpuPool
    from adapter.sim.policies import POLICY_NAMES, build_policies
    from adapter.sim.report import table, write_json, write_plot
    from adapter.sim.simulate import SimulationConfig, simulate
    from adapter.sim.trace import ScaledTrace

    catalog = load_catalog(args.catalog)
    try:
        base = load_hpa(args.hpa)
    except HPASpecError as exc:
        raise ValueError(f"{args.hpa}: {exc}") from None
    if args.min_pods is not None or args.max_pods is not None:
        base = replace(
            base,
            min_replicas=args.min_pods if args.min_pods is not None else base.min_replicas,
            max_replicas=args.max_pods if args.max_pods is not None else base.max_replicas,
        )
    names = args.policy or (["boosted"] if args.live else list(POLICY_NAMES))
    policies = build_policies(names, base, catalog)
    deployment = Deployment(name=base.scale_target.name or "llm", namespace=base.namespace)
    load_delay, drain_timeout = _load_range(args.load_time), parse_duration(args.drain_timeout)
    trace = load_trace_args(args)
    engine = token_engine(args, trace)
    fleet = engine.fleet_config(
        deployment=deployment, load_delay_s=load_delay, drain_timeout_s=drain_timeout, seed=args.seed
    )
    # A token engine's safe load is its knee, well below saturation for most mixes: the peak needs
    # --peak-pods pods at the knee (at saturation when no load meets the SLO).
    capacity = engine.knee() or fleet.capacity_rps
    if args.peak_rps is not None and args.peak_pods is not None:
        raise ValueError("give --peak-pods or --peak-rps, not both")
    peak = args.peak_rps if args.peak_rps is not None else (args.peak_pods or _DEFAULT_PEAK_PODS) * capacity
    scaled = ScaledTrace(trace, peak_rps=peak)
    offset = _start_offset(args.start, policies, trace.duration_s, parse_duration)
    if args.days is not None and args.duration is not None:
        raise ValueError("give --duration or --days, not both")
    duration = (
        args.days * 86_400.0 if args.days is not None else (parse_duration(args.duration) if args.duration else None)
    )
    sync = 15.0
    start = math.floor((trace.start_s + offset) / sync) * sync
    pool = None
    if args.warm_gpus is not None:
        pool = GpuPool(
            warm_gpus=args.warm_gpus,
            node_provision_s=_load_range(args.node_provision, "--node-provision"),
            max_gpus=args.max_gpus,
        )
    elif args.max_gpus is not None:
        raise ValueError("--max-gpus needs --warm-gpus")
    config = SimulationConfig(
        fleet=fleet,
        engine=engine,
        start_s=start,
        duration_s=duration,
        initial_replicas=args.initial_pods,
        metric_delay_s=_delay(args.metric_delay),
        pool=pool,
    )
    if args.live:
        from adapter.demo.live import LiveOptions

        if len(policies) != 1:
            raise ValueError("--live runs exactly one policy: pass one --policy")
        if policies[0].lead_s is not None:
            raise ValueError("--live cannot run the clairvoyant policy: it reads the future from the trace")
        if duration is None:
            raise ValueError("--live needs --duration (it runs in wall time, compressed by --speed)")
        options = LiveOptions(
            speed=args.speed,
            scrape_interval_s=parse_duration(args.scrape_interval),
            catalog_path=args.catalog,
        )
        return _run_live(policies[0], scaled, config, catalog, options, json_path=args.json, plot_path=args.plot)
    workers = args.workers or min(os.cpu_count() or 1, len(policies))

    def progress(name: str) -> None:
        print(f"simulate: {name} done", file=sys.stderr, flush=True)

    result = simulate(policies, scaled, config, catalog, workers=workers, progress=progress)
    write_json(result, args.json)
    if args.plot is not None:
        write_plot(result, args.plot)
    print(table(result))
    hours = float(result.inputs["duration_s"]) / 3600.0  # type: ignore[arg-type]
    print(
        f"\n{hours:g} simulated hours, {len(policies)} polic{'ies' if len(policies) > 1 else 'y'}, "
        f"{result.runtime_s:.0f} s "
        f"({workers} worker{'s' if workers > 1 else ''})"
    )
    return 0


def _start_offset(text: str, policies: Any, trace_s: float, parse_duration: Any) -> float:
    """Seconds into the trace the replay starts: ``--start``, or for ``auto`` the longest history span of
    a boosted policy's forecaster (capped at a quarter of the trace), 0 when no policy boosts."""
    from adapter.sim.forecasting import history_span_s

    value = text.strip()
    if value in ("0", ""):
        return 0.0
    if value != "auto":
        return float(parse_duration(value))
    spans = [history_span_s(p.forecast) for p in policies if p.forecast is not None]
    return min(max(spans), trace_s / 4.0) if spans else 0.0


def _run_live(
    policy: Any, trace: Any, config: Any, catalog: Any, options: Any, *, json_path: Path, plot_path: Path | None
) -> int:
    """``simulate --live``: run, replay, compare, write JSON (and PNG); 0 when the replay matches, else 1."""
    import json
    from dataclasses import replace

    from adapter.demo.live import run_live
    from adapter.demo.live_report import compare, live_document, live_lines, offline_twin, write_live_plot
    from adapter.demo.servers import DevServerError

    def say(text: str) -> None:
        print(text, file=sys.stderr, flush=True)

    options = replace(options, log=say)
    try:
        live = run_live(policy, trace, config, options)
    except DevServerError as exc:
        say(f"simulate --live: {exc}")
        return 1
    offline = offline_twin(policy, trace, config, live, catalog)
    comparison = compare(live, offline)
    inputs = {
        "start_s": live.start_s,
        "duration_s": config.duration_s,
        "trace_peak_rps": trace.peak_rps,
        "initial_replicas": live.initial_replicas,
        "physics": config.engine.describe(),
        "slo": live.slo,
        "scrape_interval_s": options.scrape_interval_s,
    }
    json_path.write_text(json.dumps(live_document(policy, live, comparison, inputs), indent=2) + "\n", encoding="utf-8")
    if plot_path is not None:
        write_live_plot(live, offline, plot_path)
    print("\n".join(live_lines(live, offline, comparison)))
    return 0 if live.replay.matches else 1
