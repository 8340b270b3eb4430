"""The catalogs the demo and ``simulate --live`` serve: the embedded one (or ``--catalog``) on a compressed clock.

``scaled_catalog`` divides every time window of a catalog by the clock's speed, so the adapter's PromQL windows,
forecast step and caches cover the same *simulated* time as in a cluster.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from adapter.catalog import DURATION, duration_seconds, parse_catalog
from adapter.sim.simulate import SimulationError


def _scaled_duration(text: str, speed: float, where: str) -> tuple[str, float]:
    if not DURATION.match(text):
        raise SimulationError(f"{where}: {text!r} is not a duration")
    wall = duration_seconds(text) / speed
    return f"{max(1, round(wall * 1000))}ms", wall


def scaled_catalog(doc: dict[str, Any], speed: float, scrape_interval_s: float) -> dict[str, Any]:
    """A copy of a catalog document whose time windows cover the same *simulated* time at ``speed``.

    Every metric ``window``, the forecast's ``window``, ``step`` and ``forget_after``, the answer cache's
    ``cache_ttl_seconds`` and the value store's ``refresh``, ``max_staleness`` and ``idle`` are divided by
    ``speed`` (durations written in ms). Raises ``SimulationError``
    when a PromQL window would hold fewer than four scrapes (``rate()`` needs two samples): lower ``speed``
    or the scrape interval.
    """
    out: dict[str, Any] = json.loads(json.dumps(doc))

    def need_scrapes(wall: float, where: str) -> None:
        if wall < 4 * scrape_interval_s:
            raise SimulationError(
                f"{where} becomes {wall:.2f} s of wall time at speed {speed:g}, under four scrapes of "
                f"{scrape_interval_s:g} s: lower --speed or --scrape-interval"
            )

    for name, metric in (out.get("metrics") or {}).items():
        if isinstance(metric, dict) and metric.get("window"):
            metric["window"], wall = _scaled_duration(str(metric["window"]), speed, f"metrics.{name}.window")
            need_scrapes(wall, f"metrics.{name}.window")
    forecast = out.get("forecast")
    if isinstance(forecast, dict):
        for key, default in (("window", None), ("step", "5m"), ("forget_after", "1h")):
            text = forecast.get(key, default)
            if text is None:
                continue
            forecast[key], wall = _scaled_duration(str(text), speed, f"forecast.{key}")
            if key in ("window", "step"):
                need_scrapes(wall, f"forecast.{key}")
    out["cache_ttl_seconds"] = float(out.get("cache_ttl_seconds", 0) or 0) / speed
    store = out.get("store")
    if isinstance(store, dict):  # the value store's refresh, staleness and idle time (defaults: 15s, 2x, 1h)
        for key, default in (("refresh", "15s"), ("max_staleness", None), ("idle", "1h")):
            text = store.get(key, default)
            if text is not None:
                store[key], _ = _scaled_duration(str(text), speed, f"store.{key}")
    parse_catalog(out)  # fail here, not in the server's log
    return out


def catalog_document(path: Path | None) -> dict[str, Any]:
    """The catalog YAML as a document: ``path``, or the embedded ``adapter/catalog.yaml``."""
    if path is None:
        text = resources.files("adapter").joinpath("catalog.yaml").read_text(encoding="utf-8")
    else:
        text = Path(path).read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    if not isinstance(doc, dict):
        raise SimulationError("the catalog is not a YAML mapping")
    return doc
