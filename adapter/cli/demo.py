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
    p.add_argument(
        "--gpus-per-pod", type=int, default=2, choices=[1, 2, 4, 8], help="GPUs each pod holds (default 2)"
    )
    # Defaults that live in DemoOptions are passed as None here, so parsing stays free of heavy imports.
    p.add_argument(
        "--speed",
        type=float,
        default=None,
        help="trace compression: simulated seconds per wall second (default 288: a day in 5 minutes)",
    )
    p.add_argument(
        "--port", type=int, default=0, help="the adapter's port on 127.0.0.1 (default: a free one)"
    )
    p.add_argument("--exporter-port", type=int, default=0, help="the fleet exporter's port (default: free)")
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="stop after this many seconds (default: run until Ctrl-C)",
    )
    p.add_argument("--scrape-interval", type=float, default=2.0, help="Prometheus scrape interval, 2-5 s")
    p.add_argument("--namespace", default="llm-demo")
    p.add_argument("--deployment", default="llama-3-8b")
    p.add_argument("--capacity", type=float, default=10.0, help="requests/s one pod serves when saturated")
    p.add_argument(
        "--load",
        type=float,
        default=1.0,
        help="trace peak as a multiple of the fleet's capacity (default 1.0)",
    )
    p.add_argument("--start-hour", type=float, default=6.0, help="simulated time of day to start at")
    p.add_argument(
        "--trace",
        type=Path,
        default=None,
        help="ServeGen trace CSV (default: shared/data/traces, else a synthetic day)",
    )
    p.add_argument(
        "--exported-layout-node",
        default=None,
        metavar="NODE",
        help="emit NODE's DCGM series with exported_pod/exported_namespace labels "
        "(as Prometheus stores them with honorLabels: false), e.g. gpu-node-1",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--autoscale",
        action="store_true",
        help="run the HPA model against the adapter (the design's HPA) so replicas follow the load",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo with the parsed flags; returns the process exit code."""
    import logging

    from adapter.demo.run import DemoOptions, run_demo
    from adapter.errors import ConfigError

    # The demo polls Prometheus and the adapter; per-request INFO lines would bury its status output.
    logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger().level))

    extra = {} if args.speed is None else {"speed": args.speed}
    try:
        options = DemoOptions(
            pods=args.pods,
            gpus_per_pod=args.gpus_per_pod,
            port=args.port,
            exporter_port=args.exporter_port,
            duration=args.duration,
            scrape_interval_s=args.scrape_interval,
            namespace=args.namespace,
            deployment=args.deployment,
            capacity_rps=args.capacity,
            load=args.load,
            start_hour=args.start_hour,
            trace_path=args.trace,
            exported_layout_node=args.exported_layout_node,
            seed=args.seed,
            autoscale=args.autoscale,
            **extra,
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    return run_demo(options)
