"""Per-metric replica calculation against kubernetes/kubernetes
``pkg/controller/podautoscaler/replica_calculator_test.go``.

Upstream's fixture (``prepareTestClientSet``) lists ``currentReplicas`` pods named ``test-pod-<i>``
(more when ``podPhase`` is longer), Running and Ready unless told otherwise, each with two
containers; resource requests and usage levels are set on *both* containers, so a pod's request
and usage are twice the table value. Custom-metric levels are per pod.
"""

from __future__ import annotations

import pytest

from adapter.hpa.replicas import (
    MAX_INT32,
    MAX_INT64,
    CpuReadiness,
    PodInfo,
    ReplicaCalcError,
    Tolerances,
    external_average_value_replicas,
    external_value_replicas,
    group_pods,
    object_average_value_replicas,
    object_value_replicas,
    pods_metric_replicas,
    resource_utilization_replicas,
)
from tests.hpa.upstream_helpers import (
    NOW,
    TEST_CPU_INITIALIZATION_PERIOD,
    TEST_DELAY_OF_INITIAL_READINESS,
    cool_cpu_creation_time,
    hot_cpu_creation_time,
)

CONTAINERS = 2
# metrics-server samples in replica_calculator_test.go carry tc.timestamp (the zero time) and 1 min.
CPU = CpuReadiness(
    now=NOW,
    metric_timestamp=0.0,
    metric_window=60.0,
    cpu_initialization_period=TEST_CPU_INITIALIZATION_PERIOD,
    delay_of_initial_readiness_status=TEST_DELAY_OF_INITIAL_READINESS,
)


def make_pods(
    count: int,
    *,
    ready: list[bool] | None = None,
    phase: list[str] | None = None,
    deleted: list[bool] | None = None,
    start: list[float] | None = None,
    cpu_requests_milli: list[int] | None = None,
) -> list[PodInfo]:
    """The pods ``prepareTestClientSet`` lists. The Ready condition has no lastTransitionTime there
    (Go zero time, our 0.0) and a pod without a start time starts at the zero time too."""
    n = max(count, len(phase or []))
    pods = []
    for i in range(n):
        requests = {}
        if cpu_requests_milli is not None and i < len(cpu_requests_milli):
            requests = {"cpu": CONTAINERS * cpu_requests_milli[i]}
        pods.append(
            PodInfo(
                name=f"test-pod-{i}",
                phase=phase[i] if phase else "Running",
                ready=ready[i] if ready and i < len(ready) else True,
                deleted=deleted[i] if deleted else False,
                start_time=start[i] if start else 0.0,
                ready_transition_time=0.0,
                requests_milli=requests,
            )
        )
    return pods


def levels(values: list[int], *, per_container: bool = False) -> dict[str, int]:
    factor = CONTAINERS if per_container else 1
    return {f"test-pod-{i}": factor * v for i, v in enumerate(values)}


# ---------------------------------------------------------------------------------------------
# Pods (custom) metrics: GetMetricReplicas
# ---------------------------------------------------------------------------------------------


def test_replica_calc_scale_up_cm() -> None:
    """TestReplicaCalcScaleUpCM: [20, 10, 30] vs 15 -> average 20 -> ceil(1.33 * 3) = 4."""
    result = pods_metric_replicas(3, 15000, levels([20000, 10000, 30000]), make_pods(3))
    assert (result.replicas, result.usage) == (4, 20000)


def test_replica_calc_scale_up_cm_unready_hot_cpu_no_less_scale() -> None:
    """TestReplicaCalcScaleUpCMUnreadyHotCpuNoLessScale: readiness/start time do not matter for
    custom metrics -> average 30000 -> 6."""
    pods = make_pods(3, ready=[True, True, False], start=[cool_cpu_creation_time()] * 2 + [hot_cpu_creation_time()])
    result = pods_metric_replicas(3, 15000, levels([50000, 10000, 30000]), pods)
    assert (result.replicas, result.usage) == (6, 30000)


def test_replica_calc_03_unready_running_pods_still_count_for_custom_metrics() -> None:
    """Worked example replica-calc-03 (TestReplicaCalcScaleUpCMUnreadyHotCpuScaleWouldScaleDown):
    pod-0 and pod-2 Ready=False but Running; usage (50000+15000+30000)/3 = 31666 (truncated) -> ratio
    2.111 -> ceil(6.33) = 7."""
    pods = make_pods(
        3,
        ready=[False, True, False],
        start=[hot_cpu_creation_time(), cool_cpu_creation_time(), hot_cpu_creation_time()],
    )
    result = pods_metric_replicas(3, 15000, levels([50000, 15000, 30000]), pods)
    assert (result.replicas, result.usage) == (7, 31666)


def test_replica_calc_scale_down_cm() -> None:
    """TestReplicaCalcScaleDownCM: 5 x 12000 vs 20000 -> ceil(0.6 * 5) = 3."""
    result = pods_metric_replicas(5, 20000, levels([12000] * 5), make_pods(5))
    assert (result.replicas, result.usage) == (3, 12000)


def test_replica_calc_tolerance_cm() -> None:
    """TestReplicaCalcToleranceCM: average 20666 vs 20000 (ratio 1.033) stays at 3."""
    result = pods_metric_replicas(3, 20000, levels([20000, 21000, 21000]), make_pods(3))
    assert (result.replicas, result.usage) == (3, 20666)


def test_replica_calc_25_missing_pod_during_rolling_update_keeps_current() -> None:
    """Worked example replica-calc-25 (custom-metric form of TestReplicaCalcDuringRollingUpdateWithMaxSurge):
    3 running pods, samples for 2 ([10000, 10000]), target 17000, current 2 -> ratio 0.588; the missing
    pod is filled with the target -> 0.725 -> ceil(0.725 * 3) = 3 > current, so keep 2."""
    result = pods_metric_replicas(2, 17000, levels([10000, 10000]), make_pods(3))
    assert (result.replicas, result.usage) == (2, 10000)


def test_pods_metric_keeps_samples_of_unlisted_pods_in_the_average() -> None:
    """replica_calculator.go calcPlainMetricReplicas removes only ignored/unready names from the API
    answer, so a sample for a pod the selector did not list still enters the average (§6.2)."""
    samples = {"test-pod-0": 10000, "test-pod-1": 10000, "stranger": 40000}
    result = pods_metric_replicas(2, 10000, samples, make_pods(2))
    # usage 20000 -> ratio 2 -> ceil(2 * 2 ready) = 4; without the stranger it would stay at 2.
    assert (result.replicas, result.usage) == (4, 20000)


def test_pods_metric_missing_pods_count_as_target_down_and_zero_up() -> None:
    """calcPlainMetricReplicas: a pod without a sample counts as using exactly the target on a
    scale-down and 0 on a scale-up, which damps both directions."""
    down = pods_metric_replicas(4, 10000, levels([5000, 5000]), make_pods(4))
    # 0.5 -> (5000+5000+10000+10000)/4 = 7500 -> ceil(0.75 * 4) = 3 (not ceil(0.5 * 2) = 1).
    assert (down.replicas, down.usage) == (3, 5000)
    up = pods_metric_replicas(2, 10000, levels([30000, 30000]), make_pods(3))
    # 3.0 -> (30000+30000+0)/3 = 20000 -> ceil(2 * 3) = 6 (not 7 as with the target filled in).
    assert (up.replicas, up.usage) == (6, 30000)


def test_pods_metric_scale_up_counts_pending_pods_as_zero() -> None:
    """calcPlainMetricReplicas: on a scale-up, unready (Pending) pods count as using 0."""
    pods = make_pods(3, phase=["Running", "Running", "Pending"])
    result = pods_metric_replicas(3, 10000, levels([30000, 30000]), pods)
    # ratio 3 -> unready filled with 0 -> (30000+30000+0)/3 = 20000 -> ceil(2 * 3) = 6.
    assert result.replicas == 6


def test_pods_metric_errors_read_like_upstream() -> None:
    """calcPlainMetricReplicas / metrics client: the three error messages of the Pods path."""
    with pytest.raises(ReplicaCalcError, match="no metrics returned from custom metrics API"):
        pods_metric_replicas(1, 1000, {}, make_pods(1))
    with pytest.raises(ReplicaCalcError, match="no pods returned by selector"):
        pods_metric_replicas(1, 1000, {"a": 1}, [])
    with pytest.raises(ReplicaCalcError, match=r"did not receive metrics for targeted pods"):
        pods_metric_replicas(1, 1000, {"test-pod-0": 5}, make_pods(1, phase=["Failed"]))


def test_per_direction_tolerance() -> None:
    """replica_calculator.go Tolerances.isWithin uses separate scale-up and scale-down tolerances."""
    samples = levels([11500, 11500])
    assert pods_metric_replicas(2, 10000, samples, make_pods(2), Tolerances(0.1, 0.1)).replicas == 3
    assert pods_metric_replicas(2, 10000, samples, make_pods(2), Tolerances(0.1, 0.2)).replicas == 2


# ---------------------------------------------------------------------------------------------
# Object and External metrics
# ---------------------------------------------------------------------------------------------


def test_replica_calc_scale_up_cm_object() -> None:
    """TestReplicaCalcScaleUpCMObject: 20000 vs 15000 with 3 ready pods -> ceil(1.33 * 3) = 4."""
    assert object_value_replicas(3, 15000, 20000, make_pods(3)).replicas == 4


def test_replica_calc_scale_up_cm_object_ignores_unready_pods() -> None:
    """TestReplicaCalcScaleUpCMObjectIgnoresUnreadyPods: only 1 pod Running and Ready -> 5 (not 15)."""
    pods = make_pods(3, ready=[False, True, False])
    result = object_value_replicas(3, 10000, 50000, pods)
    assert (result.replicas, result.usage) == (5, 50000)


def test_replica_calc_scale_down_cm_object() -> None:
    """TestReplicaCalcScaleDownCMObject: 12000 vs 20000 with 5 pods -> 3."""
    assert object_value_replicas(5, 20000, 12000, make_pods(5)).replicas == 3


def test_replica_calc_tolerance_cm_object() -> None:
    """TestReplicaCalcToleranceCMObject: 20666 vs 20000 stays at 3."""
    assert object_value_replicas(3, 20000, 20666, make_pods(3)).replicas == 3


def test_object_value_from_zero_ignores_tolerance_and_pods() -> None:
    """getUsageRatioReplicaCount with currentReplicas 0: ceil(ratio), no pods needed, no tolerance."""
    assert object_value_replicas(0, 15000, 20000, []).replicas == 2
    assert object_value_replicas(0, 1000, 1000, []).replicas == 1
    assert object_value_replicas(0, 1000, 0, []).replicas == 0


def test_object_value_outside_tolerance_needs_pods() -> None:
    """getReadyPodsCount errors when the selector lists no pod (only reached outside the tolerance)."""
    with pytest.raises(ReplicaCalcError, match="no pods returned by selector"):
        object_value_replicas(3, 1000, 5000, [])
    assert object_value_replicas(3, 1000, 1050, []).replicas == 3


def test_replica_calc_per_pod_cm_object() -> None:
    """TestReplicaCalcScaleUpCMPerPodObject, ...ScaleDownPerPodCMObject, ...TolerancePerPodCMObject."""
    up = object_average_value_replicas(3, 5000, 20000)
    assert (up.replicas, up.usage) == (4, 6667)
    down = object_average_value_replicas(5, 2000, 6000)
    assert (down.replicas, down.usage) == (3, 1200)
    within = object_average_value_replicas(4, 5000, 20166)
    assert (within.replicas, within.usage) == (4, 5042)


def test_replica_calc_cm_external() -> None:
    """TestReplicaCalcScaleUpCMExternalIgnoresUnreadyPods (1 ready pod -> 2),
    TestReplicaCalcScaleDownCMExternal (-> 3), TestReplicaCalcToleranceCMExternal (-> 3)."""
    pods = make_pods(3, ready=[False, True, False])
    assert external_value_replicas(3, 4400, [8600], pods).replicas == 2
    down = external_value_replicas(5, 14334, [8600], make_pods(5))
    assert (down.replicas, down.usage) == (3, 8600)
    assert external_value_replicas(3, 8888, [8600], make_pods(3)).replicas == 3


def test_replica_calc_per_pod_cm_external() -> None:
    """TestReplicaCalcScaleUpPerPodCMExternal (4, usage 2867), ...ScaleDownPerPodCMExternal (3, 1720),
    ...TolerancePerPodCMExternal (3, 2867)."""
    up = external_average_value_replicas(3, 2150, [8600])
    assert (up.replicas, up.usage) == (4, 2867)
    down = external_average_value_replicas(5, 2867, [8600])
    assert (down.replicas, down.usage) == (3, 1720)
    within = external_average_value_replicas(3, 2900, [8600])
    assert (within.replicas, within.usage) == (3, 2867)


def test_external_sums_every_item() -> None:
    """GetExternalMetricReplicas: usage is the sum over all returned items."""
    result = external_value_replicas(2, 1000, [1500, 1500, 1000], make_pods(2))
    # 4000 vs 1000 -> ceil(4 * 2 ready) = 8.
    assert (result.replicas, result.usage) == (8, 4000)


def test_external_overflow_guards() -> None:
    """GetExternalMetricReplicas caps a positive overflow at MaxInt64 and the replica count at
    MaxInt32; GetExternalPerPodMetricReplicas caps both too (its check is `usage < 0`)."""
    huge = external_value_replicas(1, 1, [MAX_INT64, 5], make_pods(1))
    assert (huge.replicas, huge.usage) == (MAX_INT32, MAX_INT64)
    per_pod = external_average_value_replicas(1, 1, [MAX_INT64, 5])
    assert (per_pod.replicas, per_pod.usage) == (MAX_INT32, MAX_INT64)


def test_external_empty_answer_is_an_error() -> None:
    """metrics/client.go GetExternalMetric: no items -> "no metrics returned from external metrics API"."""
    with pytest.raises(ReplicaCalcError, match="no metrics returned from external metrics API"):
        external_value_replicas(1, 1000, [], make_pods(1))
    with pytest.raises(ReplicaCalcError, match="no metrics returned from external metrics API"):
        external_average_value_replicas(1, 1000, [])


# ---------------------------------------------------------------------------------------------
# Resource utilization: GetResourceReplicas
# ---------------------------------------------------------------------------------------------

ONE_CPU = 1000


def cpu_case(
    current: int,
    target: int,
    usage: list[int],
    requests: list[int],
    **pod_kwargs: list[bool] | list[str] | list[float],
) -> tuple[int, int, int | None]:
    pods = make_pods(current, cpu_requests_milli=requests, **pod_kwargs)  # type: ignore[arg-type]
    result = resource_utilization_replicas(
        current, target, "cpu", levels(usage, per_container=True), pods, Tolerances(), CPU
    )
    return result.replicas, result.usage, result.raw_usage


@pytest.mark.parametrize(
    ("name", "current", "target", "usage", "requests", "kwargs", "expected"),
    [
        ("TestReplicaCalcScaleUp", 3, 30, [300, 500, 700], [ONE_CPU] * 3, {}, (5, 50, 2 * 500)),
        (
            "TestReplicaCalcScaleUpUnreadyLessScale",
            3,
            30,
            [300, 500, 700],
            [ONE_CPU] * 3,
            {"ready": [False, True, True]},
            (4, 60, 2 * 600),
        ),
        (
            "TestReplicaCalcScaleUpHotCpuLessScale",
            3,
            30,
            [300, 500, 700],
            [ONE_CPU] * 3,
            {"start": [hot_cpu_creation_time(), cool_cpu_creation_time(), cool_cpu_creation_time()]},
            (4, 60, 2 * 600),
        ),
        (
            "TestReplicaCalcScaleUpUnreadyNoScale",
            3,
            30,
            [400, 500, 700],
            [ONE_CPU] * 3,
            {"ready": [True, False, False]},
            (3, 40, 2 * 400),
        ),
        (
            "TestReplicaCalcScaleHotCpuNoScale",
            3,
            30,
            [400, 500, 700],
            [ONE_CPU] * 3,
            {
                "ready": [True, False, False],
                "start": [cool_cpu_creation_time(), hot_cpu_creation_time(), hot_cpu_creation_time()],
            },
            (3, 40, 2 * 400),
        ),
        (
            "TestReplicaCalcScaleUpIgnoresFailedPods",
            2,
            30,
            [500, 700],
            [ONE_CPU] * 4,
            {"ready": [True, True, False, False], "phase": ["Running", "Running", "Failed", "Failed"]},
            (4, 60, 2 * 600),
        ),
        (
            "TestReplicaCalcScaleUpIgnoresDeletionPods",
            2,
            30,
            [500, 700],
            [ONE_CPU] * 4,
            {
                "ready": [True, True, False, False],
                "phase": ["Running"] * 4,
                "deleted": [False, False, True, True],
            },
            (4, 60, 2 * 600),
        ),
        ("TestReplicaCalcScaleDown", 5, 50, [100, 300, 500, 250, 250], [ONE_CPU] * 5, {}, (3, 28, 2 * 280)),
        (
            "TestReplicaCalcScaleDownIncludeUnreadyPods",
            5,
            50,
            [100, 300, 500, 250, 250],
            [ONE_CPU] * 5,
            {"ready": [True, True, True, False, False]},
            (2, 30, 2 * 300),
        ),
        (
            "TestReplicaCalcScaleDownExcludeUnscheduledPods",
            5,
            50,
            [100],
            [ONE_CPU] * 5,
            {"ready": [True, False, False, False, False], "phase": ["Running"] + ["Pending"] * 4},
            (1, 10, 2 * 100),
        ),
        (
            "TestReplicaCalcScaleDownIgnoreHotCpuPods",
            5,
            50,
            [100, 300, 500, 250, 250],
            [ONE_CPU] * 5,
            {"start": [cool_cpu_creation_time()] * 3 + [hot_cpu_creation_time()] * 2},
            (2, 30, 2 * 300),
        ),
        (
            "TestReplicaCalcScaleDownIgnoresFailedPods",
            5,
            50,
            [100, 300, 500, 250, 250],
            [ONE_CPU] * 7,
            {"ready": [True] * 5 + [False] * 2, "phase": ["Running"] * 5 + ["Failed"] * 2},
            (3, 28, 2 * 280),
        ),
        (
            "TestReplicaCalcScaleDownIgnoresDeletionPods",
            5,
            50,
            [100, 300, 500, 250, 250],
            [ONE_CPU] * 7,
            {
                "ready": [True] * 5 + [False] * 2,
                "phase": ["Running"] * 7,
                "deleted": [False] * 5 + [True] * 2,
            },
            (3, 28, 2 * 280),
        ),
        ("TestReplicaCalcTolerance", 3, 100, [1010, 1030, 1020], [900, 1000, 1100], {}, (3, 102, 2 * 1020)),
        ("TestReplicaCalcMissingMetrics", 4, 100, [400, 95], [ONE_CPU] * 4, {}, (3, 24, 495)),
        ("TestReplicaCalcMissingMetricsNoChangeEq", 2, 100, [1000], [ONE_CPU] * 2, {}, (2, 100, 2 * 1000)),
        ("TestReplicaCalcMissingMetricsNoChangeGt", 2, 100, [1900], [ONE_CPU] * 2, {}, (2, 190, 2 * 1900)),
        ("TestReplicaCalcMissingMetricsNoChangeLt", 2, 100, [600], [ONE_CPU] * 2, {}, (2, 60, 2 * 600)),
        (
            "TestReplicaCalcMissingMetricsUnreadyChange",
            3,
            50,
            [100, 450],
            [ONE_CPU] * 3,
            {"ready": [False, True, True]},
            (3, 45, 2 * 450),
        ),
        (
            "TestReplicaCalcMissingMetricsHotCpuNoChange",
            3,
            50,
            [100, 450],
            [ONE_CPU] * 3,
            {"start": [hot_cpu_creation_time(), cool_cpu_creation_time(), cool_cpu_creation_time()]},
            (3, 45, 2 * 450),
        ),
        (
            "TestReplicaCalcMissingMetricsUnreadyScaleUp",
            3,
            50,
            [100, 2000],
            [ONE_CPU] * 3,
            {"ready": [False, True, True]},
            (4, 200, 2 * 2000),
        ),
        (
            "TestReplicaCalcMissingMetricsHotCpuScaleUp",
            3,
            50,
            [100, 2000],
            [ONE_CPU] * 3,
            {
                "ready": [False, True, True],
                "start": [hot_cpu_creation_time(), cool_cpu_creation_time(), cool_cpu_creation_time()],
            },
            (4, 200, 2 * 2000),
        ),
        (
            "TestReplicaCalcMissingMetricsUnreadyScaleDown",
            4,
            50,
            [100, 100, 100],
            [ONE_CPU] * 4,
            {"ready": [False, True, True, True]},
            (3, 10, 2 * 100),
        ),
        (
            "TestReplicaCalcDuringRollingUpdateWithMaxSurge",
            2,
            50,
            [100, 100],
            [ONE_CPU] * 3,
            {"phase": ["Running"] * 3},
            (2, 10, 2 * 100),
        ),
    ],
)
def test_resource_utilization_upstream_cases(
    name: str,
    current: int,
    target: int,
    usage: list[int],
    requests: list[int],
    kwargs: dict[str, list[bool] | list[str] | list[float]],
    expected: tuple[int, int, int],
) -> None:
    """replica_calculator_test.go TestReplicaCalc* resource cases: (replicas, utilization %, raw value)."""
    assert cpu_case(current, target, usage, requests, **kwargs) == expected


def test_replica_calc_superfluous_metrics() -> None:
    """TestReplicaCalcSuperfluousMetrics: samples for 6 names, 4 listed pods -> utilization 587,
    ceil(5.87 * 4) = 24; samples without a request are skipped in the ratio."""
    samples = levels([4000, 9500, 3000, 7000, 3200, 2000], per_container=True)
    pods = make_pods(4, cpu_requests_milli=[ONE_CPU] * 4)
    result = resource_utilization_replicas(4, 100, "cpu", samples, pods, Tolerances(), CPU)
    assert (result.replicas, result.usage, result.raw_usage) == (24, 587, 2 * 5875)


def test_replica_calc_disjoint_resources_metrics() -> None:
    """TestReplicaCalcDisjointResourcesMetrics: no sample matches a known pod -> error."""
    pods = make_pods(1, cpu_requests_milli=[ONE_CPU])
    with pytest.raises(ReplicaCalcError, match="no metrics returned matched known pods"):
        resource_utilization_replicas(1, 100, "cpu", {"an-older-pod-name": 200}, pods, Tolerances(), CPU)


def test_replica_calc_empty_metrics_and_missing_request() -> None:
    """TestReplicaCalcEmptyMetrics and TestReplicaCalcEmptyCPURequest."""
    pods = make_pods(3, cpu_requests_milli=[ONE_CPU] * 3)
    with pytest.raises(ReplicaCalcError, match="no metrics returned from resource metrics API"):
        resource_utilization_replicas(4, 100, "cpu", {}, pods, Tolerances(), CPU)
    with pytest.raises(ReplicaCalcError, match="missing request for cpu"):
        resource_utilization_replicas(1, 100, "cpu", levels([200]), make_pods(1), Tolerances(), CPU)


# ---------------------------------------------------------------------------------------------
# groupPods
# ---------------------------------------------------------------------------------------------


def _timing(metric_timestamp: float, window: float) -> CpuReadiness:
    return CpuReadiness(NOW, metric_timestamp, window, TEST_CPU_INITIALIZATION_PERIOD, TEST_DELAY_OF_INITIAL_READINESS)


@pytest.mark.parametrize(
    ("name", "pod", "timing", "ready_count", "unready"),
    [
        (
            "count in a ready pod with fresh metrics during initialization period - CPU",
            PodInfo("bentham", "Succeeded", True, start_time=NOW - 60, ready_transition_time=NOW - 30),
            _timing(NOW, 30),
            1,
            set(),
        ),
        (
            "ignore a ready pod without fresh metrics during initialization period - CPU",
            PodInfo("bentham", "Succeeded", True, start_time=NOW - 60, ready_transition_time=NOW - 30),
            _timing(NOW, 60),
            0,
            {"bentham"},
        ),
        (
            "ignore an unready pod during initialization period - CPU",
            PodInfo("lucretius", "Succeeded", False, start_time=NOW - 600, ready_transition_time=NOW - 594),
            _timing(0.0, 0.0),
            0,
            {"lucretius"},
        ),
        (
            "count in a ready pod without fresh metrics after initialization period - CPU",
            PodInfo("bentham", "Succeeded", True, start_time=NOW - 180, ready_transition_time=NOW - 180),
            _timing(NOW - 120, 60),
            1,
            set(),
        ),
        (
            "count in an unready pod that was ready after initialization period - CPU",
            PodInfo("lucretius", "Succeeded", False, start_time=NOW - 600, ready_transition_time=NOW - 540),
            _timing(0.0, 0.0),
            1,
            set(),
        ),
        (
            # The delay comparison is strict (After): exactly 10 s after start is not "never ready".
            "ignore pod that has never been ready after initialization period - CPU",
            PodInfo("lucretius", "Succeeded", False, start_time=NOW - 600, ready_transition_time=NOW - 590),
            _timing(0.0, 0.0),
            1,
            set(),
        ),
    ],
)
def test_group_pods_cpu(name: str, pod: PodInfo, timing: CpuReadiness, ready_count: int, unready: set[str]) -> None:
    """replica_calculator_test.go TestGroupPods, the cpu rows (expectations as upstream)."""
    groups = group_pods([pod], {pod.name: 1}, "cpu", timing)
    assert groups.ready_count == ready_count
    assert groups.unready == unready
    assert groups.missing == frozenset()


def test_group_pods_buckets() -> None:
    """TestGroupPods "count in a ready pod - memory", "a missing pod", "several pods" and the current
    code's rule that Pending pods are unready while Failed/deleted pods are ignored."""
    memory = group_pods([PodInfo("bentham", "Succeeded")], {"bentham": 1}, "memory")
    assert memory.ready_count == 1

    pods = [
        PodInfo("lucretius", "Succeeded", ready=False, start_time=NOW),  # hot, not ready: unready (cpu)
        PodInfo("niccolo", "Succeeded", True, start_time=NOW - 180, ready_transition_time=NOW - 180),
        PodInfo("epicurus", "Succeeded", start_time=NOW - 180),  # no sample: missing
        PodInfo("unscheduled", "Pending"),
        PodInfo("crashed", "Failed"),
        PodInfo("leaving", "Running", deleted=True),
    ]
    groups = group_pods(pods, {"lucretius": 1, "niccolo": 1}, "cpu", _timing(NOW, 60))
    assert groups.ready_count == 1
    assert groups.unready == {"lucretius", "unscheduled"}
    assert groups.missing == {"epicurus"}
    assert groups.ignored == {"crashed", "leaving"}
