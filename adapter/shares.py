"""Per-namespace fair shares of the adapter's shared budgets: what was refused or degraded, and to whom.

The value store (``adapter/store.py``) and the forecast service (``adapter/forecast_service.py``) each give every
namespace a share of a budget that all namespaces share (store keys, request-driven backend loads, forecast
workloads). A namespace past its share is degraded or refused, never the others; each such event is counted
here under (budget, namespace) and exported by ``observability.py`` as
``llm_hpa_adapter_namespace_share_exceeded_total{budget, namespace}``.

The namespace label is bounded: the first ``max_namespaces`` namespaces are counted under their own name,
any later one under ``other`` (namespaces are few, and a name is a DNS label of at most 63 characters).
"""

from __future__ import annotations

import logging

OTHER = "other"
MAX_NAMESPACES = 100


class ShareCounts:
    """Counts of events per (budget, namespace); with a ``log``, ``count`` also logs the first of each pair and
    every 1,000th after (a namespace hammering past its share must not flood the log)."""

    def __init__(self, log: logging.Logger | None, max_namespaces: int = MAX_NAMESPACES) -> None:
        self.log = log
        self.max_namespaces = max_namespaces
        self.counts: dict[tuple[str, str], int] = {}
        self._names: set[str] = set()

    def count(self, budget: str, namespace: str, why: str = "") -> None:
        """Count one event of ``budget`` for ``namespace``; ``why`` is logged (it names no tenant data)."""
        if namespace not in self._names:
            if len(self._names) >= self.max_namespaces:
                namespace = OTHER
            else:
                self._names.add(namespace)
        n = self.counts.get((budget, namespace), 0) + 1
        self.counts[(budget, namespace)] = n
        if self.log is not None and (n == 1 or n % 1000 == 0):
            self.log.warning("namespace share %s exceeded (%d times in %s): %s", budget, n, namespace, why)

    def get(self, budget: str, namespace: str) -> int:
        """Events of ``budget`` counted for ``namespace`` (0 if none)."""
        return self.counts.get((budget, namespace), 0)

    def total(self, budget: str) -> int:
        """Events of ``budget`` over every namespace."""
        return sum(n for (b, _), n in self.counts.items() if b == budget)
