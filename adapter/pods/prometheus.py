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

Pod membership is kept per namespace in a background-refreshed snapshot (``adapter/store.py``): the labels of
every pod (``kube_pod_labels``) and the ReplicaSet/Deployment ownership (``kube_replicaset_owner`` and
``kube_pod_owner``), each one query per namespace per ``ttl_s`` (default 10 s, below the HPA's 15 s sync
period) whatever the number of HPAs, Deployments or requests. A request matches its selector or Deployment in
memory; a snapshot older than two refreshes is never used (503 instead). ``ttl_s`` <= 0 queries every time.

Each snapshot carries an index from (label, value) to its pods, built off the event loop when the snapshot
loads: an HPA polls every 15 s and the snapshot refreshes every 10 s, so nearly every poll is the first for
its selector since the last refresh, and matching every pod of a 2,000-pod namespace costs ~1.7 ms of that
poll. With the index a selector with an equality or set-membership clause (every HPA's: a Deployment's
``matchLabels``) only checks the pods carrying one of its values.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from adapter.aggregate import attribute
from adapter.catalog import Catalog
from adapter.errors import NotFound
from adapter.labels import Selector
from adapter.pods.matches import MatchCache
from adapter.query.client import PromClient
from adapter.query.promql import PromQL, namespace_series
from adapter.store import Store, StoreConfig

PodLabels = list[tuple[str, dict[str, str]]]  # [(pod, its labels)] of a namespace
Owners = tuple[dict[str, str], list[tuple[str, str]]]  # ({replicaset: deployment}, [(pod, replicaset)])

# Selector matches kept (``adapter/pods/matches.py``): an HPA asks one selector, so a namespace of hundreds of
# HPAs needs hundreds; a share of 2,000 leaves it tenfold room and still lets ten namespaces fill the total.
_MAX_MATCHED = 20_000
_MAX_MATCHED_PER_NAMESPACE = 2_000
_INDEX_ON_LOOP = 500  # smaller snapshots are built and indexed in place (well under a millisecond)
_UNSAFE = re.compile(r"[^a-zA-Z0-9_]")


@dataclass(frozen=True, slots=True)
class PodSnapshot:
    """The live pods of a namespace with their (sanitized) labels, and an index label -> value -> pods."""

    pods: PodLabels
    index: dict[str, dict[str, list[int]]]  # label key -> value -> positions in ``pods``

    @classmethod
    def of(cls, pods: PodLabels) -> PodSnapshot:
        index: dict[str, dict[str, list[int]]] = {}
        for i, (_, labels) in enumerate(pods):
            for key, value in labels.items():
                index.setdefault(key, {}).setdefault(value, []).append(i)
        return cls(pods, index)

    def matching(self, wanted: Selector) -> list[str]:
        """Sorted names of the pods whose labels match ``wanted`` (keys already sanitized)."""
        candidates: list[int] | None = None
        for r in wanted.requirements:  # narrow by the most selective "=" / "in" clause, then check them all
            if r.operator in ("=", "in"):
                by_value = self.index.get(r.key, {})
                found = [i for v in r.values for i in by_value.get(v, ())]
                if candidates is None or len(found) < len(candidates):
                    candidates = found
        pods = self.pods
        if candidates is None:
            return sorted({pod for pod, labels in pods if wanted.matches(labels)})
        return sorted({pods[i][0] for i in candidates if wanted.matches(pods[i][1])})


def sanitize(key: str) -> str:
    """kube-state-metrics' label-key sanitization (``label_`` prefix added by the caller)."""
    return _UNSAFE.sub("_", key)


class PrometheusPodSource:
    """PodSource over kube-state-metrics series in the same backend as the metrics."""

    name = "prometheus"

    def __init__(
        self,
        client: PromClient,
        catalog: Catalog,
        clock: Callable[[], float] = time.time,
        ttl_s: float = 10.0,
        max_matched: int = _MAX_MATCHED,
        max_matched_per_namespace: int = _MAX_MATCHED_PER_NAMESPACE,
    ) -> None:
        self.client = client
        self.catalog = catalog
        self.clock = clock
        self.ttl_s = ttl_s
        self.matched: MatchCache[Selector, tuple[PodSnapshot, list[str]]] = MatchCache(
            max_matched, max_matched_per_namespace
        )
        self._labels: Store[str, PodSnapshot] | None = None
        self._owners: Store[str, Owners] | None = None
        if ttl_s > 0:
            limits = catalog.store or StoreConfig()
            config = StoreConfig(
                refresh_s=ttl_s, max_staleness_s=2 * ttl_s, max_keys=limits.max_keys, idle_s=limits.idle_s
            )
            self._labels = Store("pod-labels", self._load_pod_labels, config, clock)
            self._owners = Store("pod-owners", self._load_owners, config, clock)

    async def _pod_labels(self, namespace: str) -> PodSnapshot:
        if self._labels is None:
            return await self._load_pod_labels(namespace, self.clock())
        return (await self._labels.get(namespace)).value

    async def _load_pod_labels(self, namespace: str, at: float) -> PodSnapshot:
        samples, gone = await asyncio.gather(
            self.client.query(namespace_series("kube_pod_labels", self.catalog, namespace), at),
            self._gone(namespace, at),
        )

        def snapshot() -> PodSnapshot:
            pods = []
            for s in samples:
                pod = self._pod(s.labels, namespace)
                if pod is not None and pod not in gone:
                    pods.append((pod, {k[6:]: v for k, v in s.labels.items() if k.startswith("label_")}))
            return PodSnapshot.of(pods)

        if len(samples) < _INDEX_ON_LOOP:
            return snapshot()
        return await asyncio.to_thread(snapshot)  # tens of thousands of pods: not on the event loop

    async def start(self) -> None:
        for store in (self._labels, self._owners):
            if store is not None:
                store.start()

    async def close(self) -> None:
        for store in (self._labels, self._owners):
            if store is not None:
                await store.close()

    def ready(self) -> bool:
        return True

    async def _gone(self, namespace: str, at: float) -> set[str]:
        """Pods of the namespace that are terminating or finished (one query for both)."""
        deleting = namespace_series("kube_pod_deletion_timestamp", self.catalog, namespace)
        finished = namespace_series("kube_pod_status_phase", self.catalog, namespace, ['phase=~"Succeeded|Failed"'])
        samples = await self.client.query(PromQL(f"({deleting}) or (({finished}) == 1)"), at)
        return {pod for s in samples if (pod := self._pod(s.labels, namespace)) is not None}

    def _pod(self, labels: dict[str, str], namespace: str) -> str | None:
        key = attribute(labels, self.catalog.layouts)
        return key[1] if key is not None and key[0] == namespace else None

    async def pods_for_selector(self, namespace: str, selector: Selector) -> list[str]:
        snapshot = await self._pod_labels(namespace)
        # Matching every pod of a big namespace costs milliseconds; the answer only changes with the snapshot,
        # so it is kept per (namespace, selector) until the next refresh replaces the snapshot; each namespace
        # within its share of the cache, so one asking ever new selectors cannot push the others' out.
        hit = self.matched.get(namespace, selector)
        if hit is not None and hit[0] is snapshot:
            return list(hit[1])
        wanted = Selector(tuple(replace(r, key=sanitize(r.key)) for r in selector.requirements))
        pods = snapshot.matching(wanted)
        self.matched.put(namespace, selector, (snapshot, pods))
        return list(pods)

    async def pods_for_deployment(self, namespace: str, name: str) -> list[str]:
        if self._owners is None:
            owners = await self._load_owners(namespace, self.clock())
        else:
            owners = (await self._owners.get(namespace)).value
        deployment_of_rs, pod_rs = owners
        replicasets = {rs for rs, owner in deployment_of_rs.items() if owner == name}
        if not replicasets:
            raise NotFound(f'deployments.apps "{name}" not found')
        return sorted({pod for pod, rs in pod_rs if rs in replicasets})

    async def _load_owners(self, namespace: str, at: float) -> Owners:
        """Who owns what in ``namespace``: every Deployment-owned ReplicaSet and every ReplicaSet-owned pod."""
        rs_query = namespace_series("kube_replicaset_owner", self.catalog, namespace, ['owner_kind="Deployment"'])
        pod_query = namespace_series("kube_pod_owner", self.catalog, namespace, ['owner_kind="ReplicaSet"'])
        rs_samples, pod_samples, gone = await asyncio.gather(
            self.client.query(rs_query, at), self.client.query(pod_query, at), self._gone(namespace, at)
        )
        deployment_of_rs = {}
        for s in rs_samples:
            rs, owner = s.labels.get("replicaset"), s.labels.get("owner_name")
            if rs and owner:
                deployment_of_rs[rs] = owner
        pod_rs = []
        for s in pod_samples:
            pod, rs = self._pod(s.labels, namespace), s.labels.get("owner_name")
            if pod is not None and pod not in gone and rs:
                pod_rs.append((pod, rs))
        return deployment_of_rs, pod_rs
