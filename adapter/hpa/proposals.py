"""From one ``spec.metrics`` entry and what the metrics API answered to a replica proposal.

A model of kubernetes/kubernetes ``pkg/controller/podautoscaler/horizontal.go``
``computeReplicasForMetric`` and its ``computeStatusFor{Pods,Object,External,Resource}Metric``
helpers: which replica-calculator function a metric type and target select, which replica count it
gets (``spec.replicas``, or ``status.replicas`` for the per-pod Object/External targets), and how a
failure turns into an invalid metric with upstream's condition reason and message.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from adapter.hpa.replicas import (
    DEFAULT_CPU_INITIALIZATION_PERIOD,
    DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS,
    DEFAULT_METRIC_WINDOW,
    DEFAULT_TOLERANCES,
    CpuReadiness,
    PodInfo,
    ReplicaCalcError,
    ReplicaCount,
    Tolerances,
    external_average_value_replicas,
    external_value_replicas,
    object_average_value_replicas,
    object_value_replicas,
    pods_metric_replicas,
    resource_utilization_replicas,
    resource_value_replicas,
)
from adapter.hpa.spec import MetricSpec

_T = TypeVar("_T")

# horizontal.go getUnableComputeReplicaCountCondition.
UNABLE_PREFIX = "the HPA was unable to compute the replica count: "


@dataclass(frozen=True)
class MetricReading:
    """What the metrics APIs answered for one ``spec.metrics`` entry, as milli-values.

    Exactly one of: ``pod_values`` (Pods and Resource metrics: milli-value per pod name, every item
    of the answer), ``value`` (Object: the one item), ``values`` (External: all items), or ``error``
    (the request failed: the metric is invalid for this sync). An empty ``pod_values``/``values`` is
    upstream's "no metrics returned" error. ``timestamp``/``window_seconds`` only matter for cpu.
    """

    pod_values: Mapping[str, int] | None = field(default=None, hash=False)
    value: int | None = None
    values: tuple[int, ...] | None = None
    error: str | None = None
    timestamp: float | None = None
    window_seconds: float = DEFAULT_METRIC_WINDOW

    @classmethod
    def pods(
        cls, values: Mapping[str, int], *, timestamp: float | None = None, window_seconds: float = 60.0
    ) -> MetricReading:
        """A Pods (or Resource) answer: ``{pod name: milli-value}``."""
        return cls(pod_values=dict(values), timestamp=timestamp, window_seconds=window_seconds)

    @classmethod
    def object(cls, value: int) -> MetricReading:
        """An Object answer: the described object's milli-value."""
        return cls(value=value)

    @classmethod
    def external(cls, values: Iterable[int]) -> MetricReading:
        """An External answer: the milli-value of every returned item."""
        return cls(values=tuple(values))

    @classmethod
    def failed(cls, message: str) -> MetricReading:
        """The metrics API call failed with ``message``."""
        return cls(error=message)


@dataclass(frozen=True)
class MetricProposal:
    """One metric's outcome: a replica proposal and the usage written to ``status.currentMetrics``.

    ``description`` is upstream's metric label (e.g. ``pods metric qps``), used in condition and
    event messages. When the metric is invalid, ``replicas`` is ``None``; ``error`` is upstream's
    error text, ``error_reason`` the ScalingActive reason (FailedGetPodsMetric, FailedGetObjectMetric,
    FailedGetExternalMetric, FailedGetResourceMetric, ...) and ``condition_message`` its message.
    """

    metric: MetricSpec
    description: str
    replicas: int | None = None
    usage: int | None = None
    raw_usage: int | None = None
    error: str | None = None
    error_reason: str | None = None
    condition_message: str | None = None

    @property
    def valid(self) -> bool:
        """True when this metric produced a proposal."""
        return self.replicas is not None


def _selector_text(metric: MetricSpec) -> str:
    # Upstream formats the *LabelSelector with %+v; nil prints as <nil>.
    return "<nil>" if metric.selector is None else str(dict(metric.selector))


def _need(value: _T | None, metric: MetricSpec, what: str) -> _T:
    # A reading of the wrong shape is a caller bug, not a metrics-API failure.
    if value is None:
        raise ValueError(f"the reading for {metric.describe()} must carry {what}")
    return value


def _labels(metric: MetricSpec) -> tuple[str, str, str]:
    """(ScalingActive reason, error prefix, description) as horizontal.go words them."""
    target = metric.target
    if metric.type == "Pods":
        return "FailedGetPodsMetric", "failed to get pods metric value", f"pods metric {metric.name}"
    if metric.type == "Object":
        kind = metric.described_object.kind if metric.described_object is not None else "Object"
        description = (
            f"{kind} metric {metric.name}"
            if target.type == "Value"
            else f"external metric {metric.name}({_selector_text(metric)})"
        )
        return "FailedGetObjectMetric", "failed to get object metric value", description
    if metric.type == "External":
        return (
            "FailedGetExternalMetric",
            f"failed to get {metric.name} external metric value",
            f"external metric {metric.name}({_selector_text(metric)})",
        )
    if metric.type == "ContainerResource":
        reason, prefix = (
            "FailedGetContainerResourceMetric",
            f"failed to get {metric.container} container metric value",
        )
        scope = "container resource"
    else:
        reason, prefix = "FailedGetResourceMetric", f"failed to get {metric.name} resource metric value"
        scope = "resource"
    if target.average_value_milli is not None:
        return reason, prefix, f"{metric.name} resource"
    return reason, prefix, f"{metric.name} {scope} utilization (percentage of request)"


def _count(
    metric: MetricSpec,
    reading: MetricReading,
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[PodInfo],
    tolerances: Tolerances,
    cpu: CpuReadiness,
) -> ReplicaCount:
    target = metric.target
    if metric.type == "Pods":
        values = _need(reading.pod_values, metric, "pod_values")
        if target.average_value_milli is None:
            raise ReplicaCalcError("invalid pods metric source: no average value target was set")
        return pods_metric_replicas(spec_replicas, target.average_value_milli, values, pods, tolerances)
    if metric.type == "Object":
        value = _need(reading.value, metric, "value")
        if target.type == "Value" and target.value_milli is not None:
            return object_value_replicas(spec_replicas, target.value_milli, value, pods, tolerances)
        if target.type == "AverageValue" and target.average_value_milli is not None:
            return object_average_value_replicas(status_replicas, target.average_value_milli, value, tolerances)
        raise ReplicaCalcError(
            "invalid object metric source: neither a value target nor an average value target was set"
        )
    if metric.type == "External":
        items = _need(reading.values, metric, "values")
        # Upstream checks AverageValue first, whatever target.type says.
        if target.average_value_milli is not None:
            return external_average_value_replicas(status_replicas, target.average_value_milli, items, tolerances)
        if target.value_milli is not None:
            return external_value_replicas(spec_replicas, target.value_milli, items, pods, tolerances)
        raise ReplicaCalcError(
            "invalid external metric source: neither a value target nor an average value target was set"
        )
    values = _need(reading.pod_values, metric, "pod_values")
    if target.average_value_milli is not None:
        return resource_value_replicas(
            spec_replicas, target.average_value_milli, metric.name, values, pods, tolerances, cpu
        )
    if target.average_utilization is not None:
        return resource_utilization_replicas(
            spec_replicas, target.average_utilization, metric.name, values, pods, tolerances, cpu
        )
    raise ReplicaCalcError(
        "invalid resource metric source: neither an average utilization target "
        "nor an average value (usage) target was set"
    )


def propose(
    metric: MetricSpec,
    reading: MetricReading,
    *,
    spec_replicas: int,
    status_replicas: int,
    pods: Sequence[PodInfo],
    now: float,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD,
    delay_of_initial_readiness_status: float = DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS,
) -> MetricProposal:
    """One metric's proposal, or an invalid proposal carrying upstream's error, reason and message.

    Raises ``ValueError`` only when ``reading`` has the wrong shape for the metric type (a bug in
    the caller, not a metrics failure).
    """
    reason, prefix, description = _labels(metric)
    cpu = CpuReadiness(
        now=now,
        metric_timestamp=reading.timestamp if reading.timestamp is not None else now,
        metric_window=reading.window_seconds,
        cpu_initialization_period=cpu_initialization_period,
        delay_of_initial_readiness_status=delay_of_initial_readiness_status,
    )
    try:
        if reading.error is not None:
            raise ReplicaCalcError(f"unable to get metric {metric.name}: {reading.error}")
        count = _count(metric, reading, spec_replicas, status_replicas, pods, tolerances, cpu)
    except ReplicaCalcError as exc:
        return MetricProposal(
            metric=metric,
            description=description,
            error=f"{prefix}: {exc}",
            error_reason=reason,
            condition_message=UNABLE_PREFIX + str(exc),
        )
    return MetricProposal(
        metric=metric,
        description=description,
        replicas=count.replicas,
        usage=count.usage,
        raw_usage=count.raw_usage,
    )
