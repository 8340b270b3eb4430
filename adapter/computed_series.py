"""The series ``/metrics`` computes from memory at scrape time, written as exposition text directly.

Per pod: the composite as last read and each term's value and contribution (``PodEntry``, kept by
``observability.py``); per workload the forecast service keeps: load, forecast, boost, the forecast's state and
its accuracy (``forecast/accuracy.py``); per value-store key: data age, refresh duration, failing; the store's
events and each namespace's share. Written here rather than through prometheus_client's generic writer, which
validates and escapes every label name of every sample: measured, that made a 1,000-pod scrape about 6x slower
(benchmarks/metrics_scrape.py).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from adapter.aggregate import CompositeValue
from adapter.exposition import escape_label_value, label_pairs
from adapter.forecast.accuracy import ForecastAccuracy
from adapter.forecast_service import ForecastService, ForecastState, WorkloadKey
from adapter.shares import MAX_NAMESPACES
from adapter.store import Store

PREFIX = "llm_hpa_adapter_"
OTHER = "other"


def selector_id(selector: object) -> str:
    """The ``selector`` label of a store key: "" for no metricLabelSelector, else the first 12 hex digits of
    the SHA-256 of its text (stable across replicas and restarts). The text itself (up to 16 KiB, chosen by
    whoever asks) never goes into /metrics: with one key per distinct selector it made every scrape a payload."""
    text = str(selector)
    return hashlib.sha256(text.encode()).hexdigest()[:12] if text else ""


def workload_label(deployments: Sequence[str]) -> str:
    """The ``workload`` label of a workload: its Deployments joined with commas (usually just one)."""
    return ",".join(deployments)


@dataclass(frozen=True, slots=True)
class PodEntry:
    """The latest composite of one pod as last read (with its terms): what the pod series show."""

    namespace: str
    pod: str
    workload: str
    metric: str
    composite: CompositeValue
    updated: float
    labels: str  # the rendered label pairs, made once per pod rather than once per read or scrape


def series_labels(**pairs: str) -> str:
    """Rendered label pairs, in the order given."""
    return label_pairs(pairs.items())


# (name, type, help) of every computed family, in exposition order. Counters are named with _total.
_FAMILIES = (
    (
        "pod_composite",
        "gauge",
        "The composite the adapter computed for the pod (before any forecast boost; 1.0 = every term at its target)",
    ),
    ("pod_term_value", "gauge", "A composite term's metric value for the pod"),
    ("pod_term_contribution", "gauge", "A term's share of the pod's composite: weight x value / target"),
    ("pod_series", "gauge", "Pods with a computed composite (live entries)"),
    ("forecast_workloads", "gauge", "Workloads being forecast (at most the catalog's forecast.max_workloads)"),
    (
        "forecast_workloads_refused_total",
        "counter",
        "New workloads not forecast (boost 1) because forecast.max_workloads was reached",
    ),
    ("workload_load", "gauge", "The workload's latest load (requests/s)"),
    ("workload_load_forecast", "gauge", "Peak forecast load over the horizon (requests/s)"),
    ("workload_boost", "gauge", "The boost applied to the workload now (1 = none)"),
    ("forecast_age_seconds", "gauge", "Seconds since the end of the history the latest forecast was fit on"),
    ("forecast_stale", "gauge", "1 if the workload's forecast is too old to be used"),
    ("store_keys", "gauge", "Keys the value store keeps and refreshes in the background"),
    (
        "store_data_age_seconds",
        "gauge",
        "Age of the data the store serves for the key: seconds since the evaluation it came from",
    ),
    ("store_refresh_duration_seconds", "gauge", "How long the key's latest successful refresh took"),
    ("store_refresh_failing", "gauge", "1 if the key's latest refresh failed"),
    (
        "store_events_total",
        "counter",
        "Store events: hit (answered from memory), miss (first request, direct query), overflow (past max_keys or "
        "max_keys_per_namespace, direct query), refused (429: loads_per_namespace spent), evicted (an inactive key "
        "made room), reload (an inactive, expired key asked again), stale (refused: older than max_staleness), "
        "refresh, failure, dropped (idle)",
    ),
    (
        "store_namespace_keys",
        "gauge",
        "Keys the value store keeps for the namespace (its share: max_keys_per_namespace)",
    ),
    (
        "store_namespace_loads_total",
        "counter",
        "Backend queries spent on a namespace's store keys: refresh (background) or direct (a request's own load)",
    ),
    (
        "namespace_share_exceeded_total",
        "counter",
        "A namespace past its share of a shared budget, by budget: store_keys (served by direct query), store_loads "
        "(429), forecast_workloads and forecast_sets (not forecast: boost 1, 429 for the forecast and the boost)",
    ),
    (
        "forecast_info",
        "gauge",
        "The model selected for the workload and the forecast's state (ok, pending, or why the boost is 1)",
    ),
    ("forecast_error_ratio", "summary", "WAPE of each forecast over its horizon, scored once the real load is known"),
    (
        "forecast_under_forecasts_total",
        "counter",
        "Scored forecasts whose peak fell short of the real peak over the horizon",
    ),
    ("forecast_last_error_ratio", "gauge", "WAPE of the latest scored forecast"),
)


_EVENTS = {
    "hits": "hit",
    "misses": "miss",
    "overflow": "overflow",
    "refused": "refused",
    "evicted": "evicted",
    "reloads": "reload",
    "stale": "stale",
    "refreshes": "refresh",
    "failures": "failure",
    "dropped": "dropped",
}


def computed_text(
    pods: Sequence[PodEntry],
    service: ForecastService | None,
    workloads: Mapping[WorkloadKey, ForecastState | None],
    accuracy: ForecastAccuracy[WorkloadKey],
    store: Store[Any, Any] | None,
    now: float,
) -> str:
    """The per-pod, per-workload and per-store-key series, from memory, as exposition text (no I/O):
    ``pods`` live, ``workloads`` those ``service`` keeps."""
    lines: dict[str, list[str]] = {name: [] for name, _, _ in _FAMILIES}

    def add(family: str, labels: str, value: float, suffix: str = "") -> None:
        if math.isfinite(value):
            lines[family].append(f"{PREFIX}{family}{suffix}{{{labels}}} {value!r}")

    for e in pods:
        add("pod_composite", e.labels, e.composite.value)
        for t in e.composite.terms:
            with_term = f'{e.labels},term="{escape_label_value(t.metric)}"'
            add("pod_term_value", with_term, t.raw)
            add("pod_term_contribution", with_term, t.contribution)
    lines["pod_series"].append(f"{PREFIX}pod_series {float(len(pods))!r}")

    if service is not None:
        lines["forecast_workloads"].append(f"{PREFIX}forecast_workloads {float(len(service.workloads()))!r}")
        lines["forecast_workloads_refused_total"].append(
            f"{PREFIX}forecast_workloads_refused_total {float(service.refused)!r}"
        )
    for key, state in workloads.items():
        assert service is not None
        wl = series_labels(namespace=key.namespace, workload=workload_label(key.deployments))
        boost, reason = service.boost(key)
        add("workload_boost", wl, boost)
        model = state.model if state is not None else ""
        add("forecast_info", f'{wl},model="{escape_label_value(model)}",reason="{escape_label_value(reason)}"', 1.0)
        if state is not None:
            add("workload_load", wl, state.current)
            if state.peak is not None:
                add("workload_load_forecast", wl, state.peak)
            add("forecast_age_seconds", wl, now - state.step_ts)
            add("forecast_stale", wl, 1.0 if reason == "stale" else 0.0)
        acc = accuracy.get(key)
        if acc is not None:
            add("forecast_error_ratio", wl, float(acc.evaluated), "_count")
            add("forecast_error_ratio", wl, acc.error_sum, "_sum")
            add("forecast_under_forecasts_total", wl, float(acc.under))
            add("forecast_last_error_ratio", wl, acc.last_error)
    if store is not None:
        lines["store_keys"].append(f"{PREFIX}store_keys {float(len(store))!r}")
        for ks in store.keys():
            if not isinstance(ks.key, tuple) or len(ks.key) != 3:
                continue
            namespace, metric, selector = ks.key
            labels = series_labels(namespace=namespace, metric=metric, selector=selector_id(selector))
            if ks.age_s is not None:
                add("store_data_age_seconds", labels, ks.age_s)
                add("store_refresh_duration_seconds", labels, ks.refresh_seconds)
            add("store_refresh_failing", labels, 1.0 if ks.error else 0.0)
        counters = store.counters
        for f in fields(counters):
            lines["store_events_total"].append(
                f'{PREFIX}store_events_total{{event="{_EVENTS[f.name]}"}} {float(getattr(counters, f.name))!r}'
            )
        held = sorted(store.namespace_keys().items(), key=lambda kv: (-kv[1], kv[0]))
        for namespace, n in held[:MAX_NAMESPACES]:  # the namespaces holding the most, the rest as "other"
            add("store_namespace_keys", series_labels(namespace=namespace), float(n))
        if len(held) > MAX_NAMESPACES:
            add("store_namespace_keys", series_labels(namespace=OTHER), float(sum(n for _, n in held[MAX_NAMESPACES:])))
        for (kind, namespace), n in sorted(store.loads.counts.items()):
            add("store_namespace_loads_total", series_labels(namespace=namespace, kind=kind), float(n))
    for shares in (store.shares if store is not None else None, service.shares if service is not None else None):
        for (budget, namespace), n in sorted((shares.counts if shares is not None else {}).items()):
            add("namespace_share_exceeded_total", series_labels(budget=budget, namespace=namespace), float(n))
    out = []
    for name, kind, help_text in _FAMILIES:
        out.append(f"# HELP {PREFIX}{name} {help_text}\n# TYPE {PREFIX}{name} {kind}\n")
        if lines[name]:
            out.append("\n".join(lines[name]) + "\n")
    return "".join(out)
