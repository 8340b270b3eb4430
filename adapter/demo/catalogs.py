"""The catalogs the demo and ``simulate --live`` serve: a catalog on a compressed clock, and the demo's composite on
token-level engines.

``scaled_catalog`` divides every time window of a catalog by the clock's speed, so the adapter's PromQL windows,
forecast step and caches cover the same *simulated* time as in a cluster. ``token_catalog`` adds vLLM's ITL P99
and the composite on it (docs/demo.md "The demo catalog").
"""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from adapter.catalog import DURATION, duration_seconds, parse_catalog
from adapter.sim.latency import SLO_QUANTILE, histogram_quantile
from adapter.sim.simulate import SimulationError
from adapter.sim.tokenfleet import TokenEngine
from adapter.sim.vllm_families import ITL_BUCKETS


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


# The demo's composite on token-level engines (docs/demo.md "The demo catalog"): the design's weights, the
# latency term on vLLM's ITL P99, the input that tracks load most nearly linearly below the knee and binds first
# on the default mix (docs/simulation.md "Which inputs read load on a real vLLM"). GPU and queue targets are what
# `python -m adapter calibrate --simulate --engine token` proposes on the default profile and mix: the GPU term is
# flat (100 % busy below the knee), the queue keeps 8 (it reads 0 below saturation). The ITL term's idle and
# target come from the same engine (``itl_bounds``), read through vLLM's ITL buckets as histogram_quantile reads
# them, with calibrate's rule: the load-tracking term is scaled so the whole composite reads 1.0 at the safe point.
ITL_METRIC = "inference_itl_p99_seconds"
ITL_DEFINITION: dict[str, Any] = {
    "help": "P99 of vllm:inter_token_latency_seconds over the window (histogram_quantile over the pod's buckets)",
    "query": "histogram_quantile(0.99, sum by (<<by>>, le) "
    "(rate(vllm:inter_token_latency_seconds_bucket{<<matchers>>}[<<window>>])))",
    "window": "2m",
    "layouts": ["target"],
    "reduce": "max",
    "objects": "mean",
}
GPU_WEIGHT, QUEUE_WEIGHT, ITL_WEIGHT = 0.4, 0.3, 0.3
QUEUE_TARGET = 8.0
HPA_TOLERANCE = 0.1  # the HPA controller's default --horizontal-pod-autoscaler-tolerance


def itl_bounds(engine: TokenEngine) -> tuple[float, float]:
    """(idle, target) of the ITL term. Both read the engine's ITL P99 as ``histogram_quantile(0.99)`` reads it
    over vLLM's ITL buckets: idle on an idle pod; the target so that, with the GPU term flat (1 when busy) and the
    queue at 0 below saturation, the composite reads 1.0 at the safe point ``knee / band`` (``calibrate``'s safe
    point, the band ``1 + tolerance / (1 - flat weight)``)."""
    model = engine.model()
    upper = np.asarray(ITL_BUCKETS, dtype=np.float64)
    band = 1.0 + HPA_TOLERANCE / (1.0 - GPU_WEIGHT)

    def read(rate: float) -> float:
        samples = model.at(rate).itl_s
        cumulative = np.append(np.searchsorted(samples, upper, side="right"), samples.size).astype(np.float64)
        return float(histogram_quantile(SLO_QUANTILE, upper, cumulative[None, :])[0])

    idle, safe = read(1e-3), read(engine.knee() / band)
    reading = (1.0 - GPU_WEIGHT) / ITL_WEIGHT  # what the ITL term must read at the safe point
    return idle, idle + (safe - idle) / reading


def token_catalog(doc: dict[str, Any], engine: TokenEngine) -> dict[str, Any]:
    """``doc`` with the ITL metric and the token-engine composite as ``llm_composite_load`` (a new document)."""
    idle, target = itl_bounds(engine)
    out = copy.deepcopy(doc)
    out.setdefault("metrics", {})[ITL_METRIC] = copy.deepcopy(ITL_DEFINITION)
    out.setdefault("composites", {})["llm_composite_load"] = {
        "help": f"{GPU_WEIGHT:g} x GPU P90/100 + {QUEUE_WEIGHT:g} x queue/{QUEUE_TARGET:g} + {ITL_WEIGHT:g} x "
        f"(ITL P99 - {idle:.4f})/({target:.4f} - {idle:.4f}) (demo, token engine)",
        "terms": [
            {"metric": "gpu_utilization_p90", "weight": GPU_WEIGHT, "target": 100, "idle": 0, "flat": True},
            {"metric": "inference_queue_depth", "weight": QUEUE_WEIGHT, "target": QUEUE_TARGET, "idle": 0},
            {"metric": ITL_METRIC, "weight": ITL_WEIGHT, "target": round(target, 4), "idle": round(idle, 4),
             "when_missing": "idle"},
        ],
        "objects": "mean",
    }  # fmt: skip
    return out
