"""The frozen ``Settings`` that ``serve`` builds from argv: the backend, the parsed catalog (its grammar is
``adapter.catalog``), the pod source, timeouts and the upstream reachability rule; immutable once the app runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from adapter.backend_access import BackendAccess, Flavour
from adapter.catalog import Catalog, load_catalog


@dataclass(frozen=True)
class Settings:
    """Everything `serve` needs, built from argv; immutable once the app runs."""

    prometheus_url: str
    backend: Flavour = "prometheus"
    catalog: Catalog = field(default_factory=lambda: load_catalog(None))
    pod_source: Literal["kubernetes", "prometheus"] = "prometheus"
    kubeconfig: str | None = None
    query_timeout_s: float = 5.0
    max_upstream_concurrency: int = 32
    forecast_tick_s: float = 5.0  # how often the background loop looks for workloads due a refit
    pod_cache_ttl_s: float = 10.0  # kube-state-metrics pod membership answers are reused this long
    backend_access: BackendAccess = field(default_factory=BackendAccess)  # TLS, credentials, headers, limits
    # -- upstream reachability (/readyz; adapter/query/reachability.py states the rule) -------------------------
    # Unready after this long without any HTTP answer from the backend while queries or probes fail: two HPA
    # sync periods (15 s each, kube-controller-manager's --horizontal-pod-autoscaler-sync-period default), so
    # one slow burst does not take a replica out, and replicas cannot flap faster than this.
    readyz_unreachable_after_s: float = 30.0
    # /readyz starts a background probe (query "1") when nothing was heard from the backend for this long.
    readyz_probe_interval_s: float = 5.0
    # -- end of upstream reachability ------------------------------------------------------------------------
