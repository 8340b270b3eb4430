"""The one seam between the Kubernetes API layer and where numbers come from.

Modelled on kubernetes-sigs/custom-metrics-apiserver ``pkg/provider/interfaces.go``: only ``api/storage.py``
calls a provider; a name of ``*`` becomes ``get_metric_by_selector``, anything else ``get_metric_by_name``.
v1beta1 and v1beta2 are two renderings of the same ``MetricSample``s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from adapter.errors import NotFound
from adapter.labels import Selector


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """A (resource, metric) pair the server answers for, e.g. ("pods", "gpu_utilization_p90")."""

    resource: str      # group-resource string: "pods", "deployments.apps", "namespaces"
    metric: str
    namespaced: bool


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The object a value describes (core/v1 ObjectReference as the wire shows it)."""

    kind: str
    api_version: str
    name: str
    namespace: str | None = None


@dataclass(frozen=True, slots=True)
class MetricSample:
    """One value for one object, with the timestamp of the data it was computed from."""

    obj: ObjectRef
    metric: str
    ts: float
    value: float
    window_s: int | None
    selector: Selector  # the request's metricLabelSelector, echoed back
    quantity: str | None = None   # ``api.wire.quantity(value)`` when the provider has it already (else None)


class MetricsProvider(Protocol):
    def list_all_metrics(self) -> list[MetricInfo]:
        """Every servable (resource, metric); never fails, never does I/O."""

    async def get_metric_by_name(self, obj: ObjectRef, info: MetricInfo,
                                 metric_selector: Selector) -> MetricSample:
        """The value for one named object; raises NotFound when there is no data for it."""

    async def get_metric_by_selector(self, namespace: str, selector: Selector, info: MetricInfo,
                                     metric_selector: Selector) -> list[MetricSample]:
        """One value per object in ``namespace`` matching ``selector`` that has data (possibly none)."""


def metric_not_found(info: MetricInfo, name: str | None = None, selector: Selector | None = None) -> NotFound:
    """Upstream wording (custom-metrics-apiserver ``pkg/provider/errors.go``)."""
    msg = f"the server could not find the metric {info.metric} for {info.resource}"
    if name is not None:
        msg += f" {name}"
        if selector is not None and not selector.is_everything():
            msg += f" with selector {selector}"
    return NotFound(msg)
