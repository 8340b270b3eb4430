"""Pods from kube-state-metrics series, for clusters where the adapter does not read the Kubernetes API.

- selector → ``kube_pod_labels`` of the namespace, matched here against its ``label_<sanitized key>`` labels
  (kube-state-metrics sanitizes label keys: every character outside [a-zA-Z0-9_] becomes ``_``). Only the
  namespace goes into PromQL; the selector is evaluated in Python with the same code as for the API source.
  kube-state-metrics v2 exports only the pod labels allowed by ``--metric-labels-allowlist``.
- Deployment → ``kube_replicaset_owner`` (ReplicaSets owned by it) joined with ``kube_pod_owner``.
- Pods that are terminating (``kube_pod_deletion_timestamp`` exists: deletionTimestamp is set) or finished
  (``kube_pod_status_phase{phase=~"Succeeded|Failed"} == 1``) are left out of both, as the Kubernetes source
  leaves them out: the HPA averages every item it gets, and a pod on its way out still has a queue and GPU
  series for a while (kube-state-metrics docs/metrics/workload/pod-metrics.md names both series).

Answers are kept for ``ttl_s`` seconds (default 10, below the HPA's 15 s sync period): pod membership
changes far more slowly than metric values, and this keeps the request path at one metric query.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import replace

from adapter.aggregate import attribute
from adapter.errors import NotFound
from adapter.labels import Selector
from adapter.query.client import PromClient
from adapter.query.promql import PromQL, namespace_series, quote
from adapter.settings import Catalog

_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


def sanitize(key: str) -> str:
    """kube-state-metrics' label-key sanitization (``label_`` prefix added by the caller)."""
    return _UNSAFE.sub("_", key)


class PrometheusPodSource:
    """PodSource over kube-state-metrics series in the same backend as the metrics."""

    name = "prometheus"

    def __init__(self, client: PromClient, catalog: Catalog, clock: Callable[[], float] = time.time,
                 ttl_s: float = 10.0) -> None:
        self.client = client
        self.catalog = catalog
        self.clock = clock
        self.ttl_s = ttl_s
        # (namespace, deployment name | None) -> (expiry on the monotonic clock, [(pod, labels)] or pods)
        self._cache: dict[tuple[str, str | None], tuple[float, object]] = {}

    def _cached(self, key: tuple[str, str | None]) -> object | None:
        hit = self._cache.get(key)
        if hit is None or hit[0] < time.monotonic():
            return None
        return hit[1]

    def _store(self, key: tuple[str, str | None], value: object) -> None:
        if self.ttl_s > 0:
            if len(self._cache) > 10_000:  # bounded: namespaces/deployments seen recently
                self._cache.clear()
            self._cache[key] = (time.monotonic() + self.ttl_s, value)

    async def _pod_labels(self, namespace: str) -> list[tuple[str, dict[str, str]]]:
        cached = self._cached((namespace, None))
        if cached is not None:
            return cached  # type: ignore[return-value]
        at = self.clock()
        samples, gone = await asyncio.gather(
            self.client.query(namespace_series("kube_pod_labels", self.catalog, namespace), at),
            self._gone(namespace, at))
        pods = []
        for s in samples:
            pod = self._pod(s.labels, namespace)
            if pod is not None and pod not in gone:
                pods.append((pod, {k[6:]: v for k, v in s.labels.items() if k.startswith("label_")}))
        self._store((namespace, None), pods)
        return pods

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def ready(self) -> bool:
        return True

    async def _gone(self, namespace: str, at: float) -> set[str]:
        """Pods of the namespace that are terminating or finished (one query for both)."""
        deleting = namespace_series("kube_pod_deletion_timestamp", self.catalog, namespace)
        finished = namespace_series("kube_pod_status_phase", self.catalog, namespace,
                                    ['phase=~"Succeeded|Failed"'])
        samples = await self.client.query(PromQL(f"({deleting}) or (({finished}) == 1)"), at)
        return {pod for s in samples if (pod := self._pod(s.labels, namespace)) is not None}

    def _pod(self, labels: dict[str, str], namespace: str) -> str | None:
        key = attribute(labels, self.catalog.layouts)
        return key[1] if key is not None and key[0] == namespace else None

    async def pods_for_selector(self, namespace: str, selector: Selector) -> list[str]:
        wanted = Selector(tuple(replace(r, key=sanitize(r.key)) for r in selector.requirements))
        return sorted({pod for pod, labels in await self._pod_labels(namespace) if wanted.matches(labels)})

    async def pods_for_deployment(self, namespace: str, name: str) -> list[str]:
        cached = self._cached((namespace, name))
        if cached is not None:
            return cached  # type: ignore[return-value]
        at = self.clock()
        rs_query = namespace_series("kube_replicaset_owner", self.catalog, namespace,
                                    ['owner_kind="Deployment"', f"owner_name={quote(name)}"])
        pod_query = namespace_series("kube_pod_owner", self.catalog, namespace, ['owner_kind="ReplicaSet"'])
        rs_samples, pod_samples, gone = await asyncio.gather(self.client.query(rs_query, at),
                                                             self.client.query(pod_query, at),
                                                             self._gone(namespace, at))
        replicasets = {s.labels.get("replicaset") for s in rs_samples} - {None, ""}
        if not replicasets:
            raise NotFound(f'deployments.apps "{name}" not found')
        pods = set()
        for s in pod_samples:
            pod = self._pod(s.labels, namespace)
            if pod is not None and pod not in gone and s.labels.get("owner_name") in replicasets:
                pods.add(pod)
        result = sorted(pods)
        self._store((namespace, name), result)
        return result
