"""Per-metric replica calculation, modelled on kubernetes/kubernetes
``pkg/controller/podautoscaler/replica_calculator.go`` and ``metrics/utilization.go``.

Everything works on ``MilliValue()`` integers like upstream (int64 there, unbounded ints here with
the few overflow guards upstream has reproduced); usage ratios are floats. Time is passed in as
float seconds; nothing here reads a clock.

Deliberate simplifications, each harmless for replica counts:

* a resource-metric reading carries one timestamp/window for all pods (metrics-server gives one
  per pod); it only feeds the cpu readiness heuristic;
* where Go would convert ``+Inf``/``NaN`` to an int32 (undefined, platform dependent) the result is
  saturated instead; with the positive targets API validation enforces this only happens for a zero
  ``status.replicas`` in the per-pod Object/External paths, and then only the *reported* usage.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

MAX_INT32 = 2**31 - 1
MIN_INT32 = -(2**31)
MAX_INT64 = 2**63 - 1

# pkg/controller/podautoscaler/config/v1alpha1/defaults.go (see reference §3.5).
DEFAULT_TOLERANCE = 0.1
DEFAULT_CPU_INITIALIZATION_PERIOD = 300.0
DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS = 30.0
# metrics/client.go metricServerDefaultMetricWindow.
DEFAULT_METRIC_WINDOW = 60.0


class ReplicaCalcError(Exception):
    """The replica count cannot be computed for this metric (upstream returns an error).

    Messages are upstream's, so they read the same as in ``kubectl describe hpa``.
    """


@dataclass(frozen=True)
class PodInfo:
    """What the replica calculator reads of one pod listed by the scale target's selector.

    ``ready`` is the Ready condition's status. ``phase`` is ``status.phase`` (Pending, Running,
    Succeeded, Failed, Unknown). ``deleted`` means ``metadata.deletionTimestamp`` is set.

    Only the cpu resource path looks at ``start_time`` (``status.startTime``; ``None`` = not started,
    which upstream treats as unready) and ``ready_transition_time`` (the Ready condition's
    ``lastTransitionTime``; ``None`` = same as ``start_time``). ``requests_milli`` maps a resource name
    to the pod's summed container requests in milli-units, for Resource metrics only.
    """

    name: str
    phase: str = "Running"
    ready: bool = True
    deleted: bool = False
    start_time: float | None = None
    ready_transition_time: float | None = None
    requests_milli: Mapping[str, int] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Tolerances:
    """Usage-ratio dead band per direction (replica_calculator.go ``Tolerances.isWithin``)."""

    scale_down: float = DEFAULT_TOLERANCE
    scale_up: float = DEFAULT_TOLERANCE

    def is_within(self, ratio: float) -> bool:
        """True when ``ratio`` is close enough to 1 that the current replica count is kept (NaN: False)."""
        return (1.0 - self.scale_down) <= ratio <= (1.0 + self.scale_up)


DEFAULT_TOLERANCES = Tolerances()


@dataclass(frozen=True)
class CpuReadiness:
    """The cpu-only readiness heuristic's knobs and the metric sample's timing (all seconds)."""

    now: float
    metric_timestamp: float
    metric_window: float = DEFAULT_METRIC_WINDOW
    cpu_initialization_period: float = DEFAULT_CPU_INITIALIZATION_PERIOD
    delay_of_initial_readiness_status: float = DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS


@dataclass(frozen=True)
class PodGroups:
    """Result of ``group_pods``: how many pods count as ready, and which are unready/missing/ignored."""

    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


@dataclass(frozen=True)
class ReplicaCount:
    """One metric's proposal.

    ``usage`` is what upstream writes to ``status.currentMetrics`` as a milli-value (for Resource
    Utilization targets: the utilization percentage); ``raw_usage`` is the average milli-usage per
    pod reported alongside a utilization.
    """

    replicas: int
    usage: int
    raw_usage: int | None = None


# ---------------------------------------------------------------------------------------------
# Go arithmetic helpers
# ---------------------------------------------------------------------------------------------


def go_div(a: int, b: int) -> int:
    """Go integer division: truncates toward zero (Python's ``//`` floors)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def float_div(a: float, b: float) -> float:
    """IEEE-754 division as Go does it for float64: x/0 is ±Inf, 0/0 is NaN (Python raises)."""
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def ceil_int32(x: float) -> int:
    """``int32(math.Ceil(x))`` for finite in-range x; saturates otherwise (Go's result is undefined)."""
    if math.isnan(x):
        return 0
    if x >= MAX_INT32:
        return MAX_INT32
    if x <= MIN_INT32:
        return MIN_INT32
    return math.ceil(x)


def _wrap_int64(x: int) -> int:
    return (x + 2**63) % 2**64 - 2**63


# ---------------------------------------------------------------------------------------------
# Pod grouping
# ---------------------------------------------------------------------------------------------


def _cpu_unready(pod: PodInfo, timing: CpuReadiness) -> bool:
    if pod.start_time is None:
        return True
    transition = pod.ready_transition_time if pod.ready_transition_time is not None else pod.start_time
    if pod.start_time + timing.cpu_initialization_period > timing.now:
        # Still initialising: ignore the sample if unready, or if no full metric window has been
        # collected since the last readiness transition (a cpu spike at start-up is not load).
        return (not pod.ready) or timing.metric_timestamp < transition + timing.metric_window
    # Initialised: ignore it only if it is unready and has never been ready.
    return (not pod.ready) and pod.start_time + timing.delay_of_initial_readiness_status > transition


def is_ignored(pod: PodInfo) -> bool:
    """``groupPods``' first test: a pod being deleted or Failed is left out of every calculation."""
    return pod.deleted or pod.phase == "Failed"


def group_pods(
    pods: Sequence[PodInfo],
    metrics: Mapping[str, int],
    resource: str | None = None,
    cpu: CpuReadiness | None = None,
) -> PodGroups:
    """replica_calculator.go ``groupPods``.

    Deleted or Failed pods are ignored; Pending pods are unready; pods without a sample are missing.
    The readiness heuristics apply only to the ``cpu`` resource (``cpu`` timing then required): for
    every other metric a Running pod whose Ready condition is False still counts as ready.
    """
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        if is_ignored(pod):
            ignored.add(pod.name)
            continue
        if pod.phase == "Pending":
            unready.add(pod.name)
            continue
        if pod.name not in metrics:
            missing.add(pod.name)
            continue
        if resource == "cpu":
            if cpu is None:
                raise ValueError("cpu readiness timing is required for the cpu resource")
            if _cpu_unready(pod, cpu):
                unready.add(pod.name)
                continue
        ready += 1
    return PodGroups(ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def ready_pods_count(pods: Sequence[PodInfo]) -> int:
    """replica_calculator.go ``getReadyPodsCount``: Running pods whose Ready condition is True.

    Raises ``ReplicaCalcError`` when the selector matched no pod at all.
    """
    if not pods:
        raise ReplicaCalcError("no pods returned by selector while calculating replica count")
    return sum(1 for p in pods if p.phase == "Running" and p.ready)


# ---------------------------------------------------------------------------------------------
# Usage ratios (metrics/utilization.go)
# ---------------------------------------------------------------------------------------------


def metric_usage_ratio(metrics: Mapping[str, int], target_milli: int) -> tuple[float, int]:
    """``GetMetricUsageRatio``: (average / target, average) with a truncating integer average."""
    usage = go_div(sum(metrics.values()), len(metrics))
    return float_div(float(usage), float(target_milli)), usage


def resource_utilization_ratio(
    metrics: Mapping[str, int], requests: Mapping[str, int], target_utilization: int
) -> tuple[float, int, int]:
    """``GetResourceUtilizationRatio``: (ratio, utilization %, raw average milli-usage).

    Samples of pods without a known request are skipped (treated as extraneous).
    """
    total = 0
    requests_total = 0
    entries = 0
    for name, value in metrics.items():
        if name not in requests:
            continue
        total += value
        requests_total += requests[name]
        entries += 1
    if requests_total == 0:
        raise ReplicaCalcError("no metrics returned matched known pods")
    utilization = go_div(total * 100, requests_total)
    return float_div(float(utilization), float(target_utilization)), utilization, go_div(total, entries)


def pod_requests(pods: Sequence[PodInfo], resource: str) -> dict[str, int]:
    """``calculateRequests`` over *all* listed pods (ignored ones too, as upstream does)."""
    requests: dict[str, int] = {}
    for pod in pods:
        if resource not in pod.requests_milli:
            raise ReplicaCalcError(f"missing request for {resource} in Pod {pod.name}")
        requests[pod.name] = pod.requests_milli[resource]
    return requests


# ---------------------------------------------------------------------------------------------
# Pods metrics and raw resource values (calcPlainMetricReplicas)
# ---------------------------------------------------------------------------------------------


def _drop(metrics: dict[str, int], names: Collection[str]) -> None:
    for name in names:
        metrics.pop(name, None)


def plain_metric_replicas(
    current_replicas: int,
    target_milli: int,
    metrics: Mapping[str, int],
    pods: Sequence[PodInfo],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    resource: str | None = None,
    cpu: CpuReadiness | None = None,
) -> ReplicaCount:
    """``calcPlainMetricReplicas``: a Pods metric (AverageValue) or a Resource AverageValue target.

    ``metrics`` maps pod name -> milli-value, exactly as the metrics API returned them: samples for
    names that are not in ``pods`` stay in the average (upstream keeps them too). Missing pods count
    as using the target on a scale-down and 0 on a scale-up; unready pods count as 0 on a scale-up;
    a correction that would flip the scale direction keeps ``current_replicas``.
    """
    if not pods:
        raise ReplicaCalcError("no pods returned by selector while calculating replica count")
    groups = group_pods(pods, metrics, resource, cpu)
    samples = dict(metrics)
    _drop(samples, groups.ignored)
    _drop(samples, groups.unready)
    if not samples:
        raise ReplicaCalcError("did not receive metrics for targeted pods (pods might be unready)")

    ratio, usage = metric_usage_ratio(samples, target_milli)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tolerances.is_within(ratio):
            return ReplicaCount(current_replicas, usage)
        return ReplicaCount(ceil_int32(ratio * groups.ready_count), usage)

    if groups.missing:
        if ratio < 1.0:
            for name in groups.missing:
                samples[name] = target_milli
        elif ratio > 1.0:
            for name in groups.missing:
                samples[name] = 0
    if scale_up_with_unready:
        for name in groups.unready:
            samples[name] = 0

    new_ratio, _ = metric_usage_ratio(samples, target_milli)
    if tolerances.is_within(new_ratio) or (ratio < 1.0 < new_ratio) or (new_ratio < 1.0 < ratio):
        return ReplicaCount(current_replicas, usage)
    new_replicas = ceil_int32(new_ratio * len(samples))
    if (new_ratio < 1.0 and new_replicas > current_replicas) or (new_ratio > 1.0 and new_replicas < current_replicas):
        return ReplicaCount(current_replicas, usage)
    return ReplicaCount(new_replicas, usage)


def pods_metric_replicas(
    current_replicas: int,
    target_milli: int,
    metrics: Mapping[str, int],
    pods: Sequence[PodInfo],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> ReplicaCount:
    """``GetMetricReplicas``: a ``type: Pods`` metric with an AverageValue target (uses spec.replicas).

    An empty API answer is an error, as in metrics/client.go ("no metrics returned ...").
    """
    if not metrics:
        raise ReplicaCalcError("unable to get metric: no metrics returned from custom metrics API")
    return plain_metric_replicas(current_replicas, target_milli, metrics, pods, tolerances)


# ---------------------------------------------------------------------------------------------
# Resource utilization
# ---------------------------------------------------------------------------------------------


def resource_utilization_replicas(
    current_replicas: int,
    target_utilization: int,
    resource: str,
    metrics: Mapping[str, int],
    pods: Sequence[PodInfo],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    cpu: CpuReadiness | None = None,
) -> ReplicaCount:
    """``GetResourceReplicas``: a Resource metric with an averageUtilization target (percent of request).

    Missing pods count as using ``max(100, target)`` percent of their request on a scale-down and 0
    on a scale-up; unready pods count as 0 on a scale-up. ``usage`` is the utilization percentage.
    """
    if not metrics:
        raise ReplicaCalcError(
            f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        )
    if not pods:
        raise ReplicaCalcError("no pods returned by selector while calculating replica count")
    groups = group_pods(pods, metrics, resource, cpu)
    samples = dict(metrics)
    _drop(samples, groups.ignored)
    _drop(samples, groups.unready)
    if not samples:
        raise ReplicaCalcError("did not receive metrics for targeted pods (pods might be unready)")
    requests = pod_requests(pods, resource)

    ratio, utilization, raw = resource_utilization_ratio(samples, requests, target_utilization)
    scale_up_with_unready = bool(groups.unready) and ratio > 1.0
    if not scale_up_with_unready and not groups.missing:
        if tolerances.is_within(ratio):
            return ReplicaCount(current_replicas, utilization, raw)
        return ReplicaCount(ceil_int32(ratio * groups.ready_count), utilization, raw)

    if groups.missing:
        if ratio < 1.0:
            fallback = max(100, target_utilization)
            for name in groups.missing:
                samples[name] = go_div(requests[name] * fallback, 100)
        elif ratio > 1.0:
            for name in groups.missing:
                samples[name] = 0
    if scale_up_with_unready:
        for name in groups.unready:
            samples[name] = 0

    new_ratio, _, _ = resource_utilization_ratio(samples, requests, target_utilization)
    if tolerances.is_within(new_ratio) or (ratio < 1.0 < new_ratio) or (new_ratio < 1.0 < ratio):
        return ReplicaCount(current_replicas, utilization, raw)
    new_replicas = ceil_int32(new_ratio * len(samples))
    if (new_ratio < 1.0 and new_replicas > current_replicas) or (new_ratio > 1.0 and new_replicas < current_replicas):
        return ReplicaCount(current_replicas, utilization, raw)
    return ReplicaCount(new_replicas, utilization, raw)


def resource_value_replicas(
    current_replicas: int,
    target_milli: int,
    resource: str,
    metrics: Mapping[str, int],
    pods: Sequence[PodInfo],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
    cpu: CpuReadiness | None = None,
) -> ReplicaCount:
    """``GetRawResourceReplicas``: a Resource metric with an averageValue target (milli-units per pod)."""
    if not metrics:
        raise ReplicaCalcError(
            f"unable to get metrics for resource {resource}: no metrics returned from resource metrics API"
        )
    return plain_metric_replicas(current_replicas, target_milli, metrics, pods, tolerances, resource, cpu)


# ---------------------------------------------------------------------------------------------
# Object and External metrics
# ---------------------------------------------------------------------------------------------


def usage_ratio_replica_count(
    current_replicas: int,
    usage_ratio: float,
    pods: Sequence[PodInfo],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> int:
    """``getUsageRatioReplicaCount``.

    With replicas running: keep them inside the tolerance, else ``ceil(ratio * readyPods)`` (ready =
    Running and Ready), capped at MaxInt32. From zero replicas: ``ceil(ratio)``, ignoring tolerance and
    pods, which is what lets an Object/External Value metric scale a target up from zero.
    """
    if current_replicas != 0:
        if tolerances.is_within(usage_ratio):
            return current_replicas
        ready = ready_pods_count(pods)
        wanted = usage_ratio * ready
        if wanted > MAX_INT32:
            return MAX_INT32
        return ceil_int32(wanted)
    return ceil_int32(usage_ratio)


def object_value_replicas(
    current_replicas: int,
    target_milli: int,
    usage_milli: int,
    pods: Sequence[PodInfo],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> ReplicaCount:
    """``GetObjectMetricReplicas``: ``type: Object`` with a Value target (uses spec.replicas)."""
    ratio = float_div(float(usage_milli), float(target_milli))
    return ReplicaCount(usage_ratio_replica_count(current_replicas, ratio, pods, tolerances), usage_milli)


def _per_pod_usage(usage: int, status_replicas: int) -> int:
    if status_replicas == 0:
        # Go computes ceil(usage/0) = +Inf and converts it to int64 (undefined); report the total.
        return usage
    # Upstream divides in float64 too: int64(math.Ceil(float64(usage) / float64(statusReplicas))).
    return math.ceil(float(usage) / float(status_replicas))


def object_average_value_replicas(
    status_replicas: int,
    target_average_milli: int,
    usage_milli: int,
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> ReplicaCount:
    """``GetObjectPerPodMetricReplicas``: ``type: Object`` with an AverageValue target (uses status.replicas).

    Inside the tolerance of ``usage / (target * statusReplicas)`` the status replica count is kept;
    otherwise ``ceil(usage / target)``. Reported usage is ``ceil(usage / statusReplicas)``.
    """
    ratio = float_div(float(usage_milli), float(target_average_milli) * float(status_replicas))
    replicas = status_replicas
    if not tolerances.is_within(ratio):
        replicas = ceil_int32(float_div(float(usage_milli), float(target_average_milli)))
    return ReplicaCount(replicas, _per_pod_usage(usage_milli, status_replicas))


def _external_sum_capped(values: Sequence[int]) -> int:
    # GetExternalMetricReplicas: cap at MaxInt64 on positive overflow.
    usage = 0
    for value in values:
        if value > 0 and usage > MAX_INT64 - value:
            return MAX_INT64
        usage += value
    return usage


def _external_sum_wrapping(values: Sequence[int]) -> int:
    # GetExternalPerPodMetricReplicas: int64 addition, and any negative running sum is taken for an
    # overflow and replaced by MaxInt64 (upstream's check is `usage < 0`).
    usage = 0
    for value in values:
        usage = _wrap_int64(usage + value)
        if usage < 0:
            return MAX_INT64
    return usage


def external_value_replicas(
    current_replicas: int,
    target_milli: int,
    values: Sequence[int],
    pods: Sequence[PodInfo],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> ReplicaCount:
    """``GetExternalMetricReplicas``: ``type: External`` with a Value target; usage = sum of all items."""
    if not values:
        raise ReplicaCalcError("unable to get external metric: no metrics returned from external metrics API")
    usage = _external_sum_capped(values)
    ratio = float_div(float(usage), float(target_milli))
    return ReplicaCount(usage_ratio_replica_count(current_replicas, ratio, pods, tolerances), usage)


def external_average_value_replicas(
    status_replicas: int,
    target_average_milli: int,
    values: Sequence[int],
    tolerances: Tolerances = DEFAULT_TOLERANCES,
) -> ReplicaCount:
    """``GetExternalPerPodMetricReplicas``: ``type: External`` with an AverageValue target (status.replicas).

    The replica result is capped at MaxInt32, the reported usage at MaxInt64.
    """
    if not values:
        raise ReplicaCalcError("unable to get external metric: no metrics returned from external metrics API")
    usage = _external_sum_wrapping(values)
    ratio = float_div(float(usage), float(target_average_milli) * float(status_replicas))
    replicas = status_replicas
    if not tolerances.is_within(ratio):
        wanted = math.ceil(float_div(float(usage), float(target_average_milli)))
        replicas = min(wanted, MAX_INT32)
    reported = MAX_INT64 if float(usage) >= float(MAX_INT64) else _per_pod_usage(usage, status_replicas)
    return ReplicaCount(replicas, reported)
