"""``demo``: a simulated GPU/vLLM fleet + a real local Prometheus + the adapter, all on 127.0.0.1."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``demo`` subcommand (``func=run``)."""
    p = subparsers.add_parser(
        "demo",
        help="run a simulated vLLM fleet, a local Prometheus and the adapter; print kubectl commands",
    )
    p.add_argument("--pods", type=int, default=4, help="replicas of the demo Deployment (default 4)")
    # Defaults that live in DemoOptions are passed as None here, so parsing stays free of heavy imports.
    p.add_argument(
        "--speed",
        type=float,
        default=None,
        help="clock compression: simulated seconds per wall second, for the trace, the fleet, the HPA and "
        "the adapter's windows (default 60: an hour a minute)",
    )
    p.add_argument("--port", type=int, default=0, help="the adapter's port on 127.0.0.1 (default: a free one)")
    p.add_argument("--exporter-port", type=int, default=0, help="the fleet exporter's port (default: free)")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: run until Ctrl-C)",
    )
    p.add_argument(
        "--scrape-interval",
        type=float,
        default=None,
        help="Prometheus scrape interval in wall seconds, 0.1-5 (default 0.5); every window of the catalog "
        "must still hold 4 scrapes at --speed",
    )
    p.add_argument("--namespace", default="llm-demo")
    p.add_argument("--deployment", default="llama-3-8b")
    p.add_argument(
        "--load",
        type=float,
        default=1.0,
        help="trace peak as a multiple of the fleet's capacity (default 1.0)",
    )
    p.add_argument(
        "--start-hour",
        type=float,
        default=6.0,
        help="simulated time of day to start at, on the first trace day with the forecaster's history before it",
    )
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="ServeGen-layout trace CSV (default: the vendored ServeGen trace, package data)",
    )
    p.add_argument(
        "--exported-layout-node",
        default=None,
        metavar="NODE",
        help="emit NODE's DCGM series with exported_pod/exported_namespace labels "
        "(as Prometheus stores them with honorLabels: false), e.g. gpu-node-1",
    )
    p.add_argument(
        "--profile", default="llama3-8b-h100", help="engine profile of the pods (default llama3-8b-h100; its GPUs)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--autoscale",
        action="store_true",
        help="run the HPA model against the adapter (the design's HPA) so replicas follow the load",
    )
    p.add_argument(
        "--plot",
        type=Path,
        default=None,
        metavar="FILE",
        help="where to write the PNG of the run on exit (default: a timestamped file in the temp dir)",
    )
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the timeline the plot shows (one sample per wall second) as JSON on exit",
    )
    p.add_argument(
        "--no-backfill",
        dest="backfill",
        action="store_false",
        help="start Prometheus empty (the forecast then waits for its history, hours of simulated time)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo with the parsed flags; returns the process exit code."""
    import logging

    from adapter.demo.run import DemoOptions, run_demo
    from adapter.errors import ConfigError

    # The demo polls Prometheus and the adapter; per-request INFO lines would bury its status output.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))

    extra: dict[str, float] = {}
    if args.speed is not None:
        extra["speed"] = args.speed
    if args.scrape_interval is not None:
        extra["scrape_interval_s"] = args.scrape_interval
    try:
        options = DemoOptions(
            pods=args.pods,
            port=args.port,
            exporter_port=args.exporter_port,
            duration=args.duration,
            namespace=args.namespace,
            deployment=args.deployment,
            load=args.load,
            start_hour=args.start_hour,
            trace_path=args.trace,
            exported_layout_node=args.exported_layout_node,
            seed=args.seed,
            profile=args.profile,
            autoscale=args.autoscale,
            plot_path=args.plot,
            json_path=args.json,
            backfill=args.backfill,
            **extra,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return run_demo(options)
