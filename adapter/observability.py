"""The adapter's own ``/metrics``: self-metrics and the series it computes.

``create_app`` builds one ``Observability`` per app: its self-metrics live on a prometheus_client registry
of its own (nothing global, nothing at import); the computed series are rendered from memory at scrape
time (``computed_series.py``; ``exposition()`` joins the two). It is plugged
into the edges through small hooks, each a plain method:

- ``upstream_query(backend, endpoint, seconds, outcome)``: ``PromClient``'s observer;
- ``request(route, version, code, seconds)`` and ``unknown_metric(metric, resource)``: the HTTP middleware;
- ``composite_read(namespace, metric, values, scope_pods)``: ``provider/values.py``, every composite read;
- ``fitted``, ``history_pulled``, ``failed``: ``ForecastService``;
- ``watch_forecasts(service)``: per-workload series are read from the service's memory at scrape time;
- ``watch_store(store)``: the value store's keys (age of the data served, refresh duration) and counters,
  read from its memory at scrape time (at most the store's ``max_keys`` keys, ``max_keys_per_namespace`` per
  namespace). A key's ``selector`` label is ``selector_id`` of its metricLabelSelector, never its text;
- ``namespace_share_exceeded_total{budget, namespace}``: the store's and the forecast service's share events,
  ``store_namespace_keys{namespace}`` and ``store_namespace_loads_total{namespace, kind}``: what each namespace
  holds and costs (``adapter/shares.py``; at most ``MAX_NAMESPACES`` namespaces by name, the rest ``other``);
- ``rule_modes(modes)``: ``promadapter_rule_mode{rule, resource, mode}`` 1 per prometheus-adapter rule and
  resource, ``mode`` ``stored`` or ``direct`` (``RulesProvider.mode_table``, set after each discovery).

No label value is text a tenant chose beyond a Kubernetes name (namespace, pod, Deployment: DNS names of at
most 253 characters). Cardinality is bounded by construction: label values are either fixed sets (route,
version, outcome, model, reason, stage), catalog names, or live objects that expire: a pod's series disappear
``pod_ttl_s`` after its last read (and at once when a read of its scope no longer returns it), at most
``max_pods`` (pod, composite) pairs are kept (the least recently read is dropped first); workload series exist
only for the workloads the forecast service currently keeps. Names a client asks for that the catalog does not
know are counted under their own label only for the first ``max_unknown_names`` of them, then as "other".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from adapter.aggregate import CompositeValue
from adapter.catalog import Catalog
from adapter.computed_series import OTHER, PREFIX, PodEntry, computed_text, series_labels
from adapter.forecast.accuracy import ForecastAccuracy
from adapter.forecast_service import ForecastService, ForecastState, WorkloadKey, deployment_of
from adapter.provider.base import RESOURCE_ALIASES
from adapter.store import Store

# Request latency: the HPA's client gives up after 30 s-ish; most answers are a few ms.
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
UPSTREAM_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
FIT_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
MAX_NAME = 128  # longest unknown metric name counted under its own label
# PromClient outcomes that mean no answer came back (others: ok, error, http_NNN, a bounded set of codes).
_UNREACHABLE = ("unreachable", "timeout")


class Observability:
    """Every metric the adapter exports, on ``self.registry`` (one per app)."""

    def __init__(
        self,
        *,
        clock: Callable[[], float] = time.time,
        pod_ttl_s: float = 120.0,
        max_pods: int = 20_000,
        max_unknown_names: int = 50,
    ) -> None:
        self.clock = clock
        self.pod_ttl_s = pod_ttl_s
        self.max_pods = max_pods
        self.max_unknown_names = max_unknown_names
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            PREFIX + "requests",
            "HTTP requests answered, by route, API version and status code",
            ["route", "version", "code"],
            registry=r,
        )
        self.request_seconds = Histogram(
            PREFIX + "request_duration_seconds",
            "Time to answer an HTTP request, by route and API version",
            ["route", "version"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )
        self.unknown_metrics = Counter(
            PREFIX + "unknown_metric_requests",
            "Requests for a metric name the catalog does not serve",
            ["metric", "resource"],
            registry=r,
        )
        self.upstream_queries = Counter(
            PREFIX + "upstream_queries",
            "Queries sent to the metrics backend, by outcome (ok, timeout, "
            "unreachable, error, http_NNN, partial, too_big, too_many_series, parse_budget, pool_wedged, undecodable)",
            ["backend", "endpoint", "outcome"],
            registry=r,
        )
        self.upstream_seconds = Histogram(
            PREFIX + "upstream_query_duration_seconds",
            "Latency of backend queries",
            ["backend", "endpoint"],
            buckets=UPSTREAM_BUCKETS,
            registry=r,
        )
        self.upstream_reachable = Gauge(
            PREFIX + "upstream_reachable",
            "1 if the latest backend query got an HTTP answer, 0 if it timed out or could not connect",
            ["backend"],
            registry=r,
        )
        self.upstream_last_success = Gauge(
            PREFIX + "upstream_last_success_timestamp_seconds",
            "Unix time of the latest backend query that succeeded",
            ["backend"],
            registry=r,
        )
        self.catalog_rules = Gauge(
            PREFIX + "catalog_rules", "Rules in the loaded metric catalog, by kind", ["kind"], registry=r
        )
        self.rule_mode = Gauge(
            PREFIX + "promadapter_rule_mode",
            "1 per prometheus-adapter rule and resource it serves, labelled how it is answered (stored or direct)",
            ["rule", "resource", "mode"],
            registry=r,
        )
        self.catalog_loaded = Gauge(
            PREFIX + "catalog_loaded_timestamp_seconds", "Unix time the metric catalog in use was loaded", registry=r
        )
        self.boost_flat_share = Gauge(
            PREFIX + "boost_flat_share",
            "Weight share of the boosted composite's flat terms, which the boost raises only up to their target: "
            "with them saturated, served = composite + (boost - 1) x (composite - flat share)",
            registry=r,
        )
        self.fit_seconds = Histogram(
            PREFIX + "forecast_fit_duration_seconds",
            "Time one forecast fit took",
            ["model"],
            buckets=FIT_BUCKETS,
            registry=r,
        )
        self.fits = Counter(
            PREFIX + "forecast_fits",
            "Forecast fits, by model and outcome (ok, or why the boost degraded to 1)",
            ["model", "reason"],
            registry=r,
        )
        self.forecast_failures = Counter(
            PREFIX + "forecast_failures",
            "Forecast refreshes that failed: history (backend), fit (numerics), loop (a bug in the refresh loop)",
            ["stage"],
            registry=r,
        )
        for stage in ("history", "fit", "loop"):
            self.forecast_failures.labels(stage)  # present at 0 so rate() works from the first failure
        self.rejected = Counter(
            PREFIX + "series_rejected",
            "Series or pods refused while reducing per pod: untrusted (a pod label from a "
            "target the layout does not trust), negative (a metric that cannot be), "
            "extreme_value, bad_timestamp",
            ["metric", "reason"],
            registry=r,
        )
        self._unknown_names: set[str] = set()
        self._pods: dict[tuple[str, str, str], PodEntry] = {}
        self._accuracy: ForecastAccuracy[WorkloadKey] = ForecastAccuracy()
        self._forecasts: ForecastService | None = None
        self._store: Store[Any, Any] | None = None

    # -- exposition --------------------------------------------------------------------------------
    def exposition(self) -> bytes:
        """The Prometheus text format (0.0.4): the self-metrics of ``registry``, then the computed series
        (``computed_series.py``)."""
        pods = self.pods()
        known = self._known_workloads()
        computed = computed_text(pods, self._forecasts, known, self._accuracy, self._store, self.clock())
        return generate_latest(self.registry) + computed.encode()

    # -- catalog -----------------------------------------------------------------------------------
    def catalog_in_use(self, catalog: Catalog, loaded_at: float | None = None) -> None:
        """Note the catalog the app serves: its rule counts and when it was loaded."""
        self.catalog_rules.labels("metric").set(len(catalog.metrics))
        self.catalog_rules.labels("composite").set(len(catalog.composites))
        self.catalog_rules.labels("forecast").set(len(catalog.forecast_names()))
        self.catalog_loaded.set(self.clock() if loaded_at is None else loaded_at)
        self.boost_flat_share.set(catalog.boost_flat_share)

    # -- HTTP --------------------------------------------------------------------------------------
    def rule_modes(self, modes: Sequence[tuple[str, str, str]]) -> None:
        """The prometheus-adapter rules' (rule, resource, mode) after a discovery: the gauge holds these only."""
        self.rule_mode.clear()
        for rule, resource, mode in modes:
            self.rule_mode.labels(rule=rule, resource=resource, mode=mode).set(1)

    def request(self, route: str, version: str, code: int, seconds: float) -> None:
        """One HTTP request answered (route and version are bounded labels: routes/observability.py)."""
        self.requests.labels(route, version, str(code)).inc()
        self.request_seconds.labels(route, version).observe(seconds)

    def unknown_metric(self, metric: str, resource: str) -> None:
        """A client asked for a metric the catalog does not serve ("my HPA says metric not found"). A name
        longer than ``MAX_NAME`` is counted as "other": no catalog name is that long, and the label must not
        carry kilobytes of a client's text into every scrape."""
        if metric not in self._unknown_names:
            if len(self._unknown_names) >= self.max_unknown_names or len(metric) > MAX_NAME:
                metric = OTHER
            else:
                self._unknown_names.add(metric)
        self.unknown_metrics.labels(metric, resource if resource in _RESOURCES else OTHER).inc()

    # -- backend -----------------------------------------------------------------------------------
    def series_rejected(self, metric: str, counts: Mapping[str, int]) -> None:
        for reason, n in counts.items():
            self.rejected.labels(metric, reason).inc(n)

    def upstream_query(self, backend: str, endpoint: str, seconds: float, outcome: str) -> None:
        """``PromClient``'s observer: one backend query and how it ended."""
        self.upstream_queries.labels(backend, endpoint, outcome).inc()
        self.upstream_seconds.labels(backend, endpoint).observe(seconds)
        if outcome in _UNREACHABLE:
            self.upstream_reachable.labels(backend).set(0)
        elif outcome == "ok" or outcome.startswith("http_"):
            self.upstream_reachable.labels(backend).set(1)  # it answered, even if with an error
        if outcome == "ok":
            self.upstream_last_success.labels(backend).set(self.clock())

    # -- computed per-pod series -------------------------------------------------------------------
    def composite_read(
        self, namespace: str, metric: str, values: Mapping[str, CompositeValue], scope_pods: Iterable[str] | None
    ) -> None:
        """A composite was read for ``namespace``: keep each pod's value and terms for the pod series.

        Pods of ``scope_pods`` (the pods the read was about) that got no value have no data any more:
        their series are dropped now rather than left showing an old value until they expire.
        """
        now = self.clock()
        for pod in scope_pods or ():
            if pod not in values:
                self._pods.pop((namespace, pod, metric), None)
        entries = self._pods
        for pod, cv in values.items():
            key = (namespace, pod, metric)
            old = entries.pop(key, None)  # re-inserted at the end: the dict's order is least recently read first
            if old is None:
                workload = deployment_of(pod)
                labels = series_labels(namespace=namespace, workload=workload, pod=pod, metric=metric)
            else:
                workload, labels = old.workload, old.labels
            entries[key] = PodEntry(namespace, pod, workload, metric, cv, now, labels)
        while len(self._pods) > self.max_pods:
            del self._pods[next(iter(self._pods))]

    def pods(self) -> list[PodEntry]:
        """The live pod entries (expired ones are dropped here)."""
        cutoff = self.clock() - self.pod_ttl_s
        for key in [k for k, e in self._pods.items() if e.updated < cutoff]:
            del self._pods[key]
        return list(self._pods.values())

    # -- forecasts ---------------------------------------------------------------------------------
    def watch_store(self, store: Store[Any, Any] | None) -> None:
        """Export the value store's state (``adapter/store.py``) at every scrape."""
        self._store = store

    def watch_forecasts(self, service: ForecastService) -> None:
        """Export the per-workload series of ``service`` (read from its memory at scrape time)."""
        self._forecasts = service

    def fitted(self, key: WorkloadKey, state: ForecastState) -> None:
        """A fit finished: its duration, outcome and the forecast to score once its horizon has passed."""
        self.fit_seconds.labels(state.model).observe(state.fit_seconds)
        self.fits.labels(state.model, state.reason).inc()
        if state.reason == "fit_failed":
            self.forecast_failures.labels("fit").inc()
        if state.forecast is None or state.forecast.size == 0:
            return
        self._accuracy.issued(key, state.step_ts, state.forecast)

    def history_pulled(self, key: WorkloadKey, start_ts: float, step_s: float, values: np.ndarray) -> None:
        """A load history arrived: score every pending forecast of ``key`` whose horizon it now covers."""
        self._accuracy.history(key, start_ts, step_s, values)

    def failed(self, stage: str) -> None:
        """A forecast refresh failed at ``stage`` (history, loop)."""
        self.forecast_failures.labels(stage).inc()

    def _known_workloads(self) -> dict[WorkloadKey, ForecastState | None]:
        if self._forecasts is None:
            return {}
        known = self._forecasts.workloads()
        self._accuracy.forget(known)
        return known


_RESOURCES = frozenset(RESOURCE_ALIASES)
