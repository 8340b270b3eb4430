"""``explain``: print, pod by pod, how the adapter gets from the backend's series to the value the HPA sees.

Runs the adapter's own provider against the backend (same catalog, same PromQL, same numerics), so the
values printed are the values the API serves. With ``--hpa`` it also runs the HPA model on them. The
forecast is fit once on the spot (the server keeps its own in memory; ``GET /explain`` shows that one).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import TYPE_CHECKING

from adapter.query.backend import add_backend_arguments

if TYPE_CHECKING:
    from adapter.explain import Explanation
    from adapter.hpa.spec import HPASpec
    from adapter.settings import Settings

# How long to wait for a pod source that syncs in the background (the Kubernetes watch).
_POD_SOURCE_SYNC_S = 15.0


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``explain`` subcommand (``func=run``)."""
    p = subparsers.add_parser(
        "explain",
        help="show, per pod, the PromQL, raw GPU samples, terms, boost and "
        "the value the HPA receives (and its desired replicas)",
    )
    p.add_argument("--config", default=None, help="metric catalog YAML (default: the embedded catalog)")
    p.add_argument("--namespace", required=True)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--selector", help="label selector of the pods, as the HPA's scale target has it")
    which.add_argument("--deployment", help="a Deployment name: its pods, and its value as an Object metric")
    p.add_argument("--metric", required=True, help="the metric name the HPA asks for")
    p.add_argument(
        "--hpa",
        default=None,
        metavar="HPA.yaml",
        help="an autoscaling/v2 HPA manifest: also show the replicas it would want",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of tables")
    p.add_argument(
        "--pod-source",
        choices=["prometheus", "kubernetes"],
        default="prometheus",
        help="pods from kube-state-metrics series (default) or from the Kubernetes API",
    )
    p.add_argument("--kubeconfig", default=None)
    add_backend_arguments(p, query_timeout_default=10.0)
    p.set_defaults(func=run)


async def _explain(settings: Settings, args: argparse.Namespace, hpa: HPASpec | None) -> Explanation:
    import time

    from adapter.app import make_pod_source
    from adapter.explain import explain
    from adapter.forecast_service import ForecastService
    from adapter.provider.prometheus import PrometheusProvider
    from adapter.query.client import open_backend

    async with open_backend(settings) as client:
        pods = make_pod_source(settings, client, time.time)
        await pods.start()
        forecasts = None
        if settings.catalog.forecast is not None:
            forecasts = ForecastService(settings.catalog.forecast, settings.catalog, client)
        try:
            deadline = time.monotonic() + _POD_SOURCE_SYNC_S
            while not pods.ready() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            provider = PrometheusProvider(settings.catalog, client, pods, time.time, forecasts)
            return await explain(
                provider,
                namespace=args.namespace,
                metric=args.metric,
                selector=args.selector,
                deployment=args.deployment,
                hpa=hpa,
                refresh_forecast=True,
            )
        finally:
            if forecasts is not None:
                await forecasts.close()
            await pods.close()


def run(args: argparse.Namespace) -> int:
    """Explain and print; 0 on success, 1 when the adapter would answer an error (message on stderr)."""
    from rich.console import Console

    from adapter.catalog import load_catalog
    from adapter.errors import AdapterError
    from adapter.explain import renderables
    from adapter.hpa.spec import load_hpa
    from adapter.query.backend import backend_settings
    from adapter.settings import Settings

    settings = Settings(
        **backend_settings(args),
        catalog=load_catalog(args.config),
        pod_source=args.pod_source,
        kubeconfig=args.kubeconfig,
    )
    hpa = load_hpa(args.hpa) if args.hpa else None  # a bad manifest is a ConfigError: exit 2 in __main__
    try:
        ex = asyncio.run(_explain(settings, args, hpa))
    except AdapterError as err:
        print(f"error: {err.message}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(ex.to_json(), indent=2))
    else:
        console = Console()
        for item in renderables(ex):
            console.print(item)
    return 0
