"""A provider double and an in-process client: the HTTP/API layer tested without any binary.

``ProviderDouble`` implements the ``MetricsProvider`` seam (``adapter/provider/base.py``) over a fixed table
of pods and values and records every call, so a test can check both what the API layer asked for (the parsed
selectors, the canonical resource, the object reference) and how it rendered what it got back. It is a double,
not a model of Prometheus: the values it serves are the test's, and the real-backend tests
(``tests/test_api_integration.py``) stay the proof that served numbers are right.

``in_process(app)`` runs the app's lifespan and yields an ``httpx.AsyncClient`` over ``httpx.ASGITransport``:
no socket, no thread, no server process.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

import httpx
from fastapi import FastAPI

from adapter.labels import Selector
from adapter.provider.base import RESOURCES as SERVED
from adapter.provider.base import MetricInfo, MetricSample, ObjectRef, metric_not_found, pod_ref

# The resources the real provider serves every catalog metric for, with their scope: the API layer only ever
# sees these three.
RESOURCES = tuple((resource, namespaced) for resource, (_, _, namespaced) in SERVED.items())


@dataclass(frozen=True)
class DoublePod:
    """One pod of the double's table: its labels and its value per metric (a missing metric = no data)."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    values: Mapping[str, float]


@dataclass
class ProviderDouble:
    """A ``MetricsProvider`` over a fixed table. Deployments and namespaces answer the mean of their pods.

    ``error``, when set, is raised by every data call (not by discovery): an ``AdapterError`` to check its
    Status, anything else to check that a bug becomes a 500 without a stack trace.
    """

    metrics: Sequence[str]
    pods: Sequence[DoublePod] = ()
    ts: float = 1_700_000_000.0
    windows: Mapping[str, int] = field(default_factory=dict)
    deployments: Mapping[tuple[str, str], Sequence[str]] = field(default_factory=dict)  # (ns, name) -> pods
    error: BaseException | None = None
    calls: list[tuple[str, tuple[object, ...]]] = field(default_factory=list)

    def list_all_metrics(self) -> list[MetricInfo]:
        return [
            MetricInfo(resource, metric, namespaced) for metric in self.metrics for resource, namespaced in RESOURCES
        ]

    def _sample(self, obj: ObjectRef, metric: str, value: float, metric_selector: Selector) -> MetricSample:
        return MetricSample(obj, metric, self.ts, value, self.windows.get(metric), metric_selector)

    def _check(self, info: MetricInfo) -> None:
        if self.error is not None:
            raise self.error
        if info.metric not in self.metrics:
            raise metric_not_found(info)

    async def get_metric_by_name(self, obj: ObjectRef, info: MetricInfo, metric_selector: Selector) -> MetricSample:
        self.calls.append(("by_name", (obj, info, metric_selector)))
        self._check(info)
        if obj.kind == "Pod":
            members = [p for p in self.pods if (p.namespace, p.name) == (obj.namespace, obj.name)]
        elif obj.kind == "Deployment":
            names = self.deployments.get((obj.namespace or "", obj.name), ())
            members = [p for p in self.pods if p.namespace == obj.namespace and p.name in names]
        else:  # Namespace
            members = [p for p in self.pods if p.namespace == obj.name]
        values = [p.values[info.metric] for p in members if info.metric in p.values]
        if not values:
            raise metric_not_found(info, obj.name, metric_selector)
        return self._sample(obj, info.metric, sum(values) / len(values), metric_selector)

    async def get_metric_by_selector(
        self, namespace: str, selector: Selector, info: MetricInfo, metric_selector: Selector
    ) -> list[MetricSample]:
        self.calls.append(("by_selector", (namespace, selector, info, metric_selector)))
        self._check(info)
        return [
            self._sample(pod_ref(p.name, namespace), info.metric, p.values[info.metric], metric_selector)
            for p in sorted(self.pods, key=lambda p: p.name)
            if p.namespace == namespace and selector.matches(p.labels) and info.metric in p.values
        ]


@dataclass
class PodSourceDouble:
    """Only what ``/readyz`` asks of a pod source: whether its first list has arrived."""

    synced: bool
    name: str = "double"

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def ready(self) -> bool:
        return self.synced

    async def pods_for_selector(self, namespace: str, selector: Selector) -> list[str]:
        raise AssertionError("the API layer never asks the pod source directly")

    async def pods_for_deployment(self, namespace: str, name: str) -> list[str]:
        raise AssertionError("the API layer never asks the pod source directly")


@contextlib.asynccontextmanager
async def in_process(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client talking to ``app`` in this event loop, with the app's lifespan run around it."""
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://adapter.test") as client:
            yield client
