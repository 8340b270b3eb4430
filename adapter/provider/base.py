"""The one seam between the Kubernetes API layer and where numbers come from.

Modelled on kubernetes-sigs/custom-metrics-apiserver ``pkg/provider/interfaces.go``: only ``api/storage.py``
calls a provider; a name of ``*`` becomes ``get_metric_by_selector``, anything else ``get_metric_by_name``.
v1beta1 and v1beta2 are two renderings of the same ``MetricSample``s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, overload

from adapter.errors import NotFound
from adapter.labels import Selector


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """A (resource, metric) pair the server answers for, e.g. ("pods", "gpu_utilization_p90")."""

    resource: str  # group-resource string: "pods", "deployments.apps", "namespaces"
    metric: str
    namespaced: bool


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object a value describes (core/v1 ObjectReference as the wire shows it)."""

    kind: str
    api_version: str
    name: str
    namespace: str | None = None


# resource → (kind, describedObject.apiVersion, namespaced): the resources every catalog metric is served for.
# "/v1" for core objects is what the upstream helper helpers.ReferenceFor emits (custom-metrics-apiserver
# pkg/provider/helpers/helpers.go).
POD_KIND = "Pod"
CORE_API_VERSION = "/v1"
DEPLOYMENTS = "deployments.apps"
RESOURCES: Mapping[str, tuple[str, str, bool]] = {
    "pods": (POD_KIND, CORE_API_VERSION, True),
    DEPLOYMENTS: ("Deployment", "apps/v1", True),
    "namespaces": ("Namespace", CORE_API_VERSION, False),
}


def _aliases(resources: Mapping[str, tuple[str, str, bool]]) -> dict[str, str]:
    """Each canonical resource under its accepted spellings: plural or singular (the kind, lower-cased), with
    its group and, as upstream's RESTMapper also resolves them, without."""
    aliases = {}
    for canonical, (kind, _, _) in resources.items():
        plural, _, group = canonical.partition(".")
        for name in (plural, kind.lower()):
            aliases[name] = canonical
            if group:
                aliases[f"{name}.{group}"] = canonical
    return aliases


# Accepted spellings of a request's resource → its canonical name in ``RESOURCES``.
RESOURCE_ALIASES: Mapping[str, str] = _aliases(RESOURCES)


def pod_ref(name: str, namespace: str) -> ObjectRef:
    """The reference of the Pod ``namespace/name``."""
    return ObjectRef(POD_KIND, CORE_API_VERSION, name, namespace)


def deployment_ref(name: str, namespace: str) -> ObjectRef:
    """The reference of the Deployment ``namespace/name``."""
    kind, api_version, _ = RESOURCES[DEPLOYMENTS]
    return ObjectRef(kind, api_version, name, namespace)


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One value for one object, with the timestamp of the data it was computed from."""

    obj: ObjectRef
    metric: str
    ts: float
    value: float
    window_s: int | None
    selector: Selector  # the request's metricLabelSelector, echoed back
    quantity: str | None = None  # ``api.wire.quantity(value)`` when the provider has it already (else None)


class PodSamples(Sequence[MetricSample]):
    """The samples of a selector list, column by column: one metric, window and metricLabelSelector for pods
    of one namespace. Reads as a sequence of ``MetricSample`` (built on access); the wire encoder reads the
    columns directly, so answering 100 pods does not build 100 frozen objects per request."""

    __slots__ = ("namespace", "metric", "window_s", "selector", "pods", "ts", "values", "quantities")

    def __init__(
        self,
        namespace: str,
        metric: str,
        window_s: int | None,
        selector: Selector,
        pods: list[str],
        ts: list[float],
        values: list[float],
        quantities: Mapping[str, str] | None = None,
    ) -> None:
        self.namespace, self.metric, self.window_s, self.selector = namespace, metric, window_s, selector
        self.pods, self.ts, self.values = pods, ts, values
        self.quantities = quantities  # pod -> ``wire.quantity`` of its value, when formatted already

    def __len__(self) -> int:
        return len(self.pods)

    @overload
    def __getitem__(self, i: int) -> MetricSample: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[MetricSample]: ...

    def __getitem__(self, i: int | slice) -> MetricSample | Sequence[MetricSample]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        pod = self.pods[i]
        return MetricSample(
            pod_ref(pod, self.namespace),
            self.metric,
            self.ts[i],
            self.values[i],
            self.window_s,
            self.selector,
            None if self.quantities is None else self.quantities[pod],
        )


class MetricsProvider(Protocol):
    def list_all_metrics(self) -> list[MetricInfo]:
        """Every servable (resource, metric); never fails, never does I/O."""

    async def get_metric_by_name(self, obj: ObjectRef, info: MetricInfo, metric_selector: Selector) -> MetricSample:
        """The value for one named object; raises NotFound when there is no data for it."""

    async def get_metric_by_selector(
        self, namespace: str, selector: Selector, info: MetricInfo, metric_selector: Selector
    ) -> Sequence[MetricSample]:
        """One value per object in ``namespace`` matching ``selector`` that has data (possibly none)."""


def metric_not_found(
    info: MetricInfo, name: str | None = None, selector: Selector | None = None, *, reason: str | None = None
) -> NotFound:
    """The one "could not find the metric" 404: upstream wording (custom-metrics-apiserver
    ``pkg/provider/errors.go``), then ``: reason`` when the adapter knows why (pending forecast, wrong scope)."""
    msg = f"the server could not find the metric {info.metric} for {info.resource}"
    if name is not None:
        msg += f" {name}"
        if selector is not None and not selector.is_everything():
            msg += f" with selector {selector}"
    if reason is not None:
        msg += f": {reason}"
    return NotFound(msg)
