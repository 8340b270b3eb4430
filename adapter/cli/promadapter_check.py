"""``promadapter-check``: read a prometheus-adapter configuration file and say what it would serve.

Loads the file as ``serve`` will (``adapter.promadapter.config``): every error names its rule and field (exit 2).
With ``--prometheus-url`` it also lists the series once per distinct ``seriesQuery``, as discovery does, and
prints the custom metrics (``RESOURCE/METRIC``) and external metrics the rules would serve. Read-only: it sends
the backend ``/api/v1/series`` requests and nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapter.errors import ConfigError
from adapter.promadapter.discovery import (
    DEFAULT_RELIST_INTERVAL_S,
    MAX_AGE_FLAG,
    RELIST_INTERVAL_FLAG,
    RelistSettings,
    flag_seconds,
)
from adapter.query.backend import add_backend_arguments

if TYPE_CHECKING:
    from adapter.promadapter.config import AdapterConfig
    from adapter.promadapter.registry import Registry


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``promadapter-check`` subcommand (``func=run``)."""
    p = subparsers.add_parser(
        "promadapter-check",
        help="read a prometheus-adapter config file: its errors by rule and field, and with --prometheus-url "
        "the metrics its rules would serve",
    )
    p.add_argument("file", help="the YAML prometheus-adapter's --config reads (its ConfigMap's config.yaml)")
    p.add_argument(
        RELIST_INTERVAL_FLAG,
        dest="relist_interval",
        default=f"{DEFAULT_RELIST_INTERVAL_S:g}s",
        help="how far back discovery looks unless --metrics-max-age says otherwise (prometheus-adapter's default 10m)",
    )
    p.add_argument(MAX_AGE_FLAG, dest="max_age", default="0s", help="how far back discovery looks (0: the interval)")
    p.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_backend_arguments(p, required_url=False)
    p.set_defaults(func=run)


def _summary(config: AdapterConfig, registry: Registry | None) -> dict[str, Any]:
    from adapter.promadapter.registry import by_series_query

    out: dict[str, Any] = {
        "rules": [r.where for r in config.rules],
        "externalRules": [r.where for r in config.external_rules],
        "discoveryQueries": list(by_series_query(config.rules + config.external_rules)),
        "warnings": list(config.warnings),
    }
    if registry is not None:
        out["custom"] = [m.name for m in sorted(registry.custom, key=lambda m: m.name)]
        out["external"] = sorted(registry.external)
    return out


async def _discover(args: argparse.Namespace, config: AdapterConfig, relist: RelistSettings) -> Registry:
    from adapter.promadapter.discovery import list_all
    from adapter.promadapter.registry import discover
    from adapter.query.backend import backend_settings
    from adapter.query.client import open_backend
    from adapter.settings import Settings

    settings = Settings(**backend_settings(args))
    async with open_backend(settings) as client:
        queries = [r.series_query for r in config.rules + config.external_rules]
        answers = await list_all(client, queries, now=time.time(), relist=relist)
    return discover(config, answers)


def run(args: argparse.Namespace) -> int:
    """Load, report; with a URL, discover and list. Exit 0 when the file loads (and discovery answered)."""
    from adapter.errors import AdapterError
    from adapter.promadapter.config import parse_config

    relist = RelistSettings(
        flag_seconds(RELIST_INTERVAL_FLAG, args.relist_interval), flag_seconds(MAX_AGE_FLAG, args.max_age)
    )
    try:
        text = Path(args.file).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{args.file}: {exc}") from None
    config = parse_config(text)
    registry = None
    if args.prometheus_url:
        try:
            registry = asyncio.run(_discover(args, config, relist))
        except AdapterError as err:
            print(f"error: discovery failed: {err.message}", file=sys.stderr)
            return 1
    summary = _summary(config, registry)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for warning in summary["warnings"]:
        print(f"warning: {warning}", file=sys.stderr)
    print(
        f"{len(config.rules)} rules, {len(config.external_rules)} external rules, "
        f"{len(summary['discoveryQueries'])} discovery queries"
    )
    for query in summary["discoveryQueries"]:
        print(f"  discovery: {query}")
    if registry is not None:
        print(f"custom.metrics.k8s.io: {len(summary['custom'])} metrics")
        for name in summary["custom"]:
            print(f"  {name}")
        print(f"external.metrics.k8s.io: {len(summary['external'])} metrics")
        for name in summary["external"]:
            print(f"  {name}")
    return 0
