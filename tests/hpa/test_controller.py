"""``HPAModel.reconcile`` against upstream controller tests and the design's HPA.

Controller rows come from kubernetes/kubernetes ``pkg/controller/podautoscaler/horizontal_test.go``
(``testCase.runTest``). Its fixture lists ``len(reportedCPURequests)`` pods (else ``statusReplicas``),
Running and Ready unless told otherwise, each requesting 1 cpu; ``init()`` raises
``scaleUpLimitFactor`` to 8 (``UPSTREAM_TEST_CONFIG``). ``recommendations: []`` in a row means an
initialized empty history (``recommendations=()`` here); leaving it out means a fresh controller.
Upstream makes a metric invalid with the unknown type "CheddarCheese"; here a failed metrics call
does the same job (only the ScalingActive reason text differs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from adapter.hpa.behavior import Recommendation
from adapter.hpa.controller import ControllerConfig, Decision, HPAModel, MetricReading
from adapter.hpa.replicas import PodInfo
from adapter.hpa.spec import (
    Behavior,
    HPASpec,
    MetricSpec,
    MetricTarget,
    ObjectReference,
    TargetType,
    load_hpa,
)
from tests.hpa.upstream_helpers import (
    NOW,
    UPSTREAM_TEST_CONFIG,
    cool_cpu_creation_time,
    generate_scaling_rules,
    hot_cpu_creation_time,
)
from tests.support.hpa_design import DESIGN_HPA

DEPLOYMENT = ObjectReference("Deployment", "some-deployment", "apps/v1")
QPS_PODS = MetricSpec("Pods", "qps", MetricTarget("AverageValue", average_value_milli=15000))


def qps_object(value_milli: int | None = None, average_milli: int | None = None) -> MetricSpec:
    kind: TargetType = "Value" if value_milli is not None else "AverageValue"
    return MetricSpec(
        "Object",
        "qps",
        MetricTarget(kind, value_milli=value_milli, average_value_milli=average_milli),
        described_object=DEPLOYMENT,
    )


def qps_external(value_milli: int | None = None, average_milli: int | None = None) -> MetricSpec:
    kind: TargetType = "Value" if value_milli is not None else "AverageValue"
    return MetricSpec("External", "qps", MetricTarget(kind, value_milli=value_milli, average_value_milli=average_milli))


def cpu_utilization(percent: int) -> MetricSpec:
    return MetricSpec("Resource", "cpu", MetricTarget("Utilization", average_utilization=percent))


def fixture_pods(
    count: int,
    *,
    ready: list[bool] | None = None,
    phase: list[str] | None = None,
    deleted: list[bool] | None = None,
    start: list[float] | None = None,
) -> list[PodInfo]:
    """horizontal_test.go prepareTestClient: pods whose Ready condition changed when they started."""
    pods = []
    for i in range(count):
        started = start[i] if start else 0.0
        pods.append(
            PodInfo(
                name=f"test-pod-{i}",
                phase=phase[i] if phase else "Running",
                ready=ready[i] if ready else True,
                deleted=deleted[i] if deleted else False,
                start_time=started,
                ready_transition_time=started,
                requests_milli={"cpu": 1000},
            )
        )
    return pods


def per_pod(levels: list[int]) -> MetricReading:
    return MetricReading.pods({f"test-pod-{i}": v for i, v in enumerate(levels)}, timestamp=NOW)


def run(
    spec: HPASpec,
    *,
    replicas: int,
    metrics: list[MetricReading],
    pods: list[PodInfo],
    recommendations: list[Recommendation] | None = None,
    config: ControllerConfig = UPSTREAM_TEST_CONFIG,
) -> Decision:
    model = HPAModel(spec, config, recommendations=recommendations)
    return model.reconcile(NOW, spec_replicas=replicas, status_replicas=replicas, metrics=metrics, pods=pods)


def reasons(decision: Decision) -> list[tuple[str, str, str]]:
    return [(c.type, c.status, c.reason) for c in decision.conditions]


STATUS_OK = [
    ("AbleToScale", "True", "SucceededRescale"),
    ("ScalingActive", "True", "ValidMetricFound"),
    ("ScalingLimited", "False", "DesiredWithinRange"),
]


# ---------------------------------------------------------------------------------------------
# Custom, Object and External metrics
# ---------------------------------------------------------------------------------------------


def test_scale_up_cm() -> None:
    """TestScaleUpCM: Pods qps [20, 10, 30] vs 15 -> 4, conditions statusOk."""
    d = run(HPASpec(6, (QPS_PODS,), 2), replicas=3, metrics=[per_pod([20000, 10000, 30000])], pods=fixture_pods(3))
    assert (d.desired_replicas, d.rescale) == (4, True)
    assert d.rescale_reason == "pods metric qps above target"
    assert reasons(d) == STATUS_OK


def test_scale_up_cm_unready_and_cpu_hot() -> None:
    """TestScaleUpCMUnreadyandCpuHot: proposal 7 capped by maxReplicas 6, ScalingLimited TooManyReplicas."""
    pods = fixture_pods(
        3,
        ready=[False, True, False],
        start=[hot_cpu_creation_time(), cool_cpu_creation_time(), hot_cpu_creation_time()],
    )
    d = run(HPASpec(6, (QPS_PODS,), 2), replicas=3, metrics=[per_pod([50000, 15000, 30000])], pods=pods)
    assert (d.metric_replicas, d.desired_replicas, d.reason) == (7, 6, "TooManyReplicas")
    assert reasons(d) == [STATUS_OK[0], STATUS_OK[1], ("ScalingLimited", "True", "TooManyReplicas")]


def test_scale_up_cm_object_and_per_pod_object() -> None:
    """TestScaleUpCMObject (20 vs 15 -> 4) and TestScaleUpPerPodCMObject (40 vs 10/pod -> 4)."""
    d = run(
        HPASpec(6, (qps_object(value_milli=15000),), 2),
        replicas=3,
        metrics=[MetricReading.object(20000)],
        pods=fixture_pods(3),
    )
    assert d.desired_replicas == 4
    assert d.proposals[0].description == "Deployment metric qps"
    d = run(
        HPASpec(6, (qps_object(average_milli=10000),), 2),
        replicas=3,
        metrics=[MetricReading.object(40000)],
        pods=fixture_pods(3),
    )
    assert d.desired_replicas == 4


def test_controller_06_scale_up_from_zero_with_object_value() -> None:
    """Worked example controller-06 (TestScaleUpFromZeroCMObject): minReplicas 0, 0 replicas, Object
    Value 20 vs target 15 -> ceil(1.333) = 2, no pods needed."""
    spec = HPASpec(6, (qps_object(value_milli=15000),), 0)
    d = run(spec, replicas=0, metrics=[MetricReading.object(20000)], pods=[])
    assert (d.desired_replicas, d.rescale) == (2, True)


def test_scale_up_from_zero_ignores_tolerance() -> None:
    """TestScaleUpFromZeroIgnoresToleranceCMObject: ratio exactly 1 from zero -> 1."""
    spec = HPASpec(6, (qps_object(value_milli=1000),), 0)
    assert run(spec, replicas=0, metrics=[MetricReading.object(1000)], pods=[]).desired_replicas == 1


def test_controller_13_scale_down_to_zero_with_object_value() -> None:
    """Worked example controller-13 (TestScaleDownToZeroCMObject): minReplicas 0, value 0 -> 0; the
    row's ``recommendations: []`` means no seeded recommendation holds the scale-down back."""
    spec = HPASpec(6, (qps_object(value_milli=20000),), 0)
    d = run(spec, replicas=5, metrics=[MetricReading.object(0)], pods=fixture_pods(5), recommendations=[])
    assert (d.desired_replicas, d.rescale) == (0, True)
    # A fresh controller (history seeded with 5) would keep 5 for the stabilization window.
    fresh = run(spec, replicas=5, metrics=[MetricReading.object(0)], pods=fixture_pods(5))
    assert (fresh.desired_replicas, fresh.reason) == (5, "ScaleDownStabilized")


@pytest.mark.parametrize(
    ("name", "metric", "replicas", "reading", "expected"),
    [
        ("TestScaleUpCMExternal", qps_external(value_milli=6666), 3, [8600], 4),
        ("TestScaleUpPerPodCMExternal", qps_external(average_milli=2222), 3, [8600], 4),
        ("TestScaleDownCMExternal", qps_external(value_milli=14400), 5, [8600], 3),
        ("TestScaleDownToZeroCMExternal", qps_external(value_milli=14400), 5, [0], 0),
        ("TestScaleDownPerPodCMExternal", qps_external(average_milli=3000), 5, [8600], 3),
    ],
)
def test_external_metric_rows(name: str, metric: MetricSpec, replicas: int, reading: list[int], expected: int) -> None:
    """horizontal_test.go external-metric rows (scale-downs run with ``recommendations: []``)."""
    d = run(
        HPASpec(6, (metric,), 0 if expected == 0 else 2),
        replicas=replicas,
        metrics=[MetricReading.external(reading)],
        pods=fixture_pods(replicas),
        recommendations=[],
    )
    assert d.desired_replicas == expected


def test_scale_down_cm_object_rows() -> None:
    """TestScaleDownCM (12 vs 20 -> 3), TestScaleDownCMObject (12 vs 20 -> 3),
    TestScaleDownPerPodCMObject (60 vs 20/pod -> 3); all with ``recommendations: []``."""
    pods_spec = HPASpec(6, (MetricSpec("Pods", "qps", MetricTarget("AverageValue", average_value_milli=20000)),), 2)
    assert (
        run(
            pods_spec, replicas=5, metrics=[per_pod([12000] * 5)], pods=fixture_pods(5), recommendations=[]
        ).desired_replicas
        == 3
    )
    obj = HPASpec(6, (qps_object(value_milli=20000),), 2)
    assert (
        run(
            obj, replicas=5, metrics=[MetricReading.object(12000)], pods=fixture_pods(5), recommendations=[]
        ).desired_replicas
        == 3
    )
    per_pod_obj = HPASpec(6, (qps_object(average_milli=20000),), 2)
    assert (
        run(
            per_pod_obj,
            replicas=5,
            metrics=[MetricReading.object(60000)],
            pods=fixture_pods(5),
            recommendations=[],
        ).desired_replicas
        == 3
    )


# ---------------------------------------------------------------------------------------------
# Resource cpu rows
# ---------------------------------------------------------------------------------------------

CPU_LEVELS_DOWN = [100, 300, 500, 250, 250]


def test_scale_down_stabilize_initial_size() -> None:
    """TestScaleDownStabilizeInitialSize: a fresh controller seeds its history with the current 5,
    so the cpu proposal 3 is stabilized back to 5 (AbleToScale ScaleDownStabilized)."""
    spec = HPASpec(6, (cpu_utilization(50),), 2)
    d = run(spec, replicas=5, metrics=[per_pod(CPU_LEVELS_DOWN)], pods=fixture_pods(5))
    assert (d.metric_replicas, d.stabilized_replicas, d.desired_replicas) == (3, 5, 5)
    assert d.rescale is False
    assert d.reason == "ScaleDownStabilized"
    assert reasons(d) == [
        ("AbleToScale", "True", "ScaleDownStabilized"),
        ("ScalingActive", "True", "ValidMetricFound"),
        ("ScalingLimited", "False", "DesiredWithinRange"),
    ]
    assert d.proposals[0].usage == 28  # cpu utilization percent written to status


def test_scale_down_with_empty_history() -> None:
    """TestScaleDown: the same data with ``recommendations: []`` scales 5 -> 3."""
    spec = HPASpec(6, (cpu_utilization(50),), 2)
    d = run(spec, replicas=5, metrics=[per_pod(CPU_LEVELS_DOWN)], pods=fixture_pods(5), recommendations=[])
    assert (d.desired_replicas, d.rescale_reason) == (3, "All metrics below target")


def test_stabilize_downscale() -> None:
    """TestStabilizeDownscale: history [(10, -10 min), (4, -1 min)], cpu asks for 2 -> stays at 4."""
    spec = HPASpec(5, (cpu_utilization(100),), 1)
    pods = [PodInfo(f"test-pod-{i}", start_time=0.0, requests_milli={"cpu": 100}) for i in range(3)]
    history = [Recommendation(10, NOW - 600), Recommendation(4, NOW - 60)]
    d = run(spec, replicas=4, metrics=[per_pod([50, 50, 50])], pods=pods, recommendations=history)
    assert (d.desired_replicas, d.rescale, d.reason) == (4, False, "ScaleDownStabilized")


def test_scale_down_with_scaling_rules() -> None:
    """TestScaleDownWithScalingRules: a behavior with only scale-up rules; the defaulted scale-down
    (window = controller's 300 s, empty history) allows 5 -> 3."""
    spec = HPASpec(6, (cpu_utilization(50),), 2, Behavior.from_partial(generate_scaling_rules(0, 0, 100, 15, 30)))
    d = run(spec, replicas=5, metrics=[per_pod(CPU_LEVELS_DOWN)], pods=fixture_pods(5), recommendations=[])
    assert d.desired_replicas == 3
    model = HPAModel(spec, UPSTREAM_TEST_CONFIG, recommendations=[])
    model.reconcile(NOW, spec_replicas=5, status_replicas=5, metrics=[per_pod(CPU_LEVELS_DOWN)], pods=fixture_pods(5))
    assert [(e.replica_change, e.timestamp) for e in model.scale_down_events] == [(2, NOW)]


@pytest.mark.parametrize(
    ("name", "replicas", "levels", "pods", "expected"),
    [
        ("TestScaleUpUnreadyLessScale", 3, [300, 500, 700], fixture_pods(3, ready=[False, True, True]), 4),
        (
            "TestScaleUpHotCpuLessScale",
            3,
            [300, 500, 700],
            fixture_pods(3, start=[hot_cpu_creation_time(), cool_cpu_creation_time(), cool_cpu_creation_time()]),
            4,
        ),
        ("TestScaleUpUnreadyNoScale", 3, [400, 500, 700], fixture_pods(3, ready=[True, False, False]), 3),
        (
            "TestScaleUpIgnoresFailedPods",
            2,
            [500, 700],
            fixture_pods(4, ready=[True, True, False, False], phase=["Running", "Running", "Failed", "Failed"]),
            4,
        ),
        (
            "TestScaleUpIgnoresDeletionPods",
            2,
            [500, 700],
            fixture_pods(4, ready=[True, True, False, False], deleted=[False, False, True, True]),
            4,
        ),
    ],
)
def test_cpu_scale_up_rows(name: str, replicas: int, levels: list[int], pods: list[PodInfo], expected: int) -> None:
    """horizontal_test.go cpu rows with a 30 % target (min 2, max 6)."""
    d = run(HPASpec(6, (cpu_utilization(30),), 2), replicas=replicas, metrics=[per_pod(levels)], pods=pods)
    assert d.desired_replicas == expected


@pytest.mark.parametrize(
    ("name", "pods"),
    [
        ("TestScaleDownIncludeUnreadyPods", fixture_pods(5, ready=[True, True, True, False, False])),
        (
            "TestScaleDownIgnoreHotCpuPods",
            fixture_pods(5, start=[cool_cpu_creation_time()] * 3 + [hot_cpu_creation_time()] * 2),
        ),
    ],
)
def test_cpu_scale_down_rows(name: str, pods: list[PodInfo]) -> None:
    """horizontal_test.go: unready/hot pods drop out of a cpu scale-down -> ceil(0.6 * 3) = 2."""
    d = run(
        HPASpec(6, (cpu_utilization(50),), 2),
        replicas=5,
        metrics=[per_pod(CPU_LEVELS_DOWN)],
        pods=pods,
        recommendations=[],
    )
    assert d.desired_replicas == 2
    assert d.proposals[0].usage == 30


# ---------------------------------------------------------------------------------------------
# Invalid metrics: no scale-down on partial data
# ---------------------------------------------------------------------------------------------


def test_scale_up_one_metric_invalid() -> None:
    """TestScaleUpOneMetricInvalid: cpu says 4, the other metric fails -> scale up anyway, with the error."""
    spec = HPASpec(6, (cpu_utilization(30), QPS_PODS), 2)
    d = run(
        spec,
        replicas=3,
        metrics=[per_pod([300, 400, 500]), MetricReading.failed("boom")],
        pods=fixture_pods(3),
    )
    assert (d.desired_replicas, d.rescale) == (4, True)
    assert d.error is not None and d.error.startswith("invalid metrics (1 invalid out of 2), first error is: ")
    assert d.condition("ScalingActive") is not None
    assert reasons(d)[1] == ("ScalingActive", "True", "ValidMetricFound")


def test_scale_up_from_zero_one_metric_invalid() -> None:
    """TestScaleUpFromZeroOneMetricInvalid: minReplicas 0, 0 replicas, 3 pods at 40 % of a 30 %
    target -> 4."""
    spec = HPASpec(6, (cpu_utilization(30), QPS_PODS), 0)
    d = run(
        spec,
        replicas=0,
        metrics=[per_pod([300, 400, 500]), MetricReading.failed("boom")],
        pods=fixture_pods(3),
        recommendations=[],
    )
    assert d.desired_replicas == 4


def test_scale_up_both_metrics_empty() -> None:
    """TestScaleUpBothMetricsEmpty: every metric invalid -> no change, ScalingActive False, and only
    the AbleToScale/ScalingActive conditions are set."""
    d = run(HPASpec(6, (QPS_PODS,), 2), replicas=3, metrics=[MetricReading.failed("down")], pods=fixture_pods(3))
    assert (d.desired_replicas, d.rescale, d.reason) == (3, False, "FailedGetPodsMetric")
    assert reasons(d) == [
        ("AbleToScale", "True", "SucceededGetScale"),
        ("ScalingActive", "False", "FailedGetPodsMetric"),
    ]
    cond = d.condition("ScalingActive")
    assert (
        cond is not None
        and cond.message == "the HPA was unable to compute the replica count: unable to get metric qps: down"
    )


@pytest.mark.parametrize("other", [MetricReading.failed("boom"), MetricReading.external([])])
def test_no_scale_down_when_one_metric_is_invalid(other: MetricReading) -> None:
    """TestNoScaleDownOneMetricInvalid / TestNoScaleDownOneMetricEmpty: cpu says 3 but another metric
    failed (or returned nothing) -> keep 5, report the first invalid metric."""
    spec = HPASpec(6, (cpu_utilization(50), qps_external(value_milli=1000)), 2)
    d = run(spec, replicas=5, metrics=[per_pod(CPU_LEVELS_DOWN), other], pods=fixture_pods(5), recommendations=[])
    assert (d.desired_replicas, d.rescale, d.reason) == (5, False, "FailedGetExternalMetric")
    assert d.proposals[0].replicas == 3
    assert reasons(d)[1] == ("ScalingActive", "False", "FailedGetExternalMetric")


# ---------------------------------------------------------------------------------------------
# Early paths: outside [min, max], scaling disabled
# ---------------------------------------------------------------------------------------------


def test_scale_up_and_down_rc_immediately() -> None:
    """TestScaleUpRCImmediately (1 < min 2 -> 2) and TestScaleDownRCImmediately (6 > max 5 -> 5):
    no metrics are consulted and only AbleToScale SucceededRescale is set."""
    up = run(HPASpec(6, (cpu_utilization(30),), 2), replicas=1, metrics=[MetricReading.failed("unused")], pods=[])
    assert (up.desired_replicas, up.rescale, up.reason) == (2, True, "TooFewReplicas")
    assert up.rescale_reason == "Current number of replicas below Spec.MinReplicas"
    assert reasons(up) == [("AbleToScale", "True", "SucceededRescale")]
    down = run(HPASpec(5, (cpu_utilization(50),), 2), replicas=6, metrics=[MetricReading.failed("unused")], pods=[])
    assert (down.desired_replicas, down.rescale, down.reason) == (5, True, "TooManyReplicas")


def test_zero_replicas_with_min_above_zero_disables_scaling() -> None:
    """horizontal.go reconcileAutoscaler: currentReplicas 0 and minReplicas != 0 -> ScalingDisabled."""
    d = run(HPASpec(6, (QPS_PODS,), 1), replicas=0, metrics=[per_pod([99000])], pods=[])
    assert (d.desired_replicas, d.rescale, d.reason) == (0, False, "ScalingDisabled")
    assert reasons(d)[1] == ("ScalingActive", "False", "ScalingDisabled")


def test_reading_count_must_match_spec() -> None:
    """One MetricReading per spec.metrics entry; anything else is a caller bug."""
    model = HPAModel(HPASpec(6, (QPS_PODS,), 1))
    with pytest.raises(ValueError, match="1 spec.metrics"):
        model.reconcile(NOW, spec_replicas=1, status_replicas=1, metrics=[], pods=[])


# ---------------------------------------------------------------------------------------------
# Legacy limits in a running controller
# ---------------------------------------------------------------------------------------------


def test_legacy_scale_up_limit_in_production_config() -> None:
    """horizontal.go calculateScaleUpLimit with the production factor 2 / minimum 4: 3 replicas
    asking for 30 get max(6, 4) = 6 (ScaleUpLimit), then 12 on the next sync."""
    spec = HPASpec(100, (QPS_PODS,), 1)
    model = HPAModel(spec, ControllerConfig())
    pods = fixture_pods(3)
    d = model.reconcile(NOW, spec_replicas=3, status_replicas=3, metrics=[per_pod([150000] * 3)], pods=pods)
    assert (d.metric_replicas, d.desired_replicas, d.reason) == (30, 6, "ScaleUpLimit")
    pods = fixture_pods(6)
    d = model.reconcile(NOW + 15, spec_replicas=6, status_replicas=6, metrics=[per_pod([75000] * 6)], pods=pods)
    assert (d.desired_replicas, d.reason) == (12, "ScaleUpLimit")
    # No behavior -> no scale events are kept.
    assert model.scale_up_events == () and model.last_scale_time == NOW + 15


# ---------------------------------------------------------------------------------------------
# The design's HPA, driven through a load step up and down
# ---------------------------------------------------------------------------------------------


def drive(model: HPAModel, loads: list[tuple[float, float]], start: int, until: float) -> list[Decision]:
    """Reconcile every 15 s; the total load (in units of the target) is split evenly over the pods,
    each pod reporting floor(total * 1000 / replicas) milli on the first metric; every further metric (the
    design's SLO guard) reads 1 milli on every pod, so it asks for one pod and the first metric decides."""
    replicas = start
    decisions = []
    t = 0.0
    while t <= until:
        load = [value for since, value in loads if since <= t][-1]
        pods = [PodInfo(f"vllm-{i}") for i in range(replicas)]
        share = int(load * 1000) // replicas
        d = model.reconcile(
            t,
            spec_replicas=replicas,
            status_replicas=replicas,
            metrics=[
                MetricReading.pods({p.name: share for p in pods}),
                *(MetricReading.pods(dict.fromkeys((p.name for p in pods), 1)) for _ in model.spec.metrics[1:]),
            ],
            pods=pods,
        )
        decisions.append(d)
        replicas = d.desired_replicas
        t += 15.0
    return decisions


def test_design_hpa_rate_limits_hold(tmp_path: Path) -> None:
    """The design's manifest (scale-up: 60 s window, 2 Pods/30 s; scale-down: 300 s window,
    20 %/60 s) from a YAML file, driven at the 15 s sync period through a step 1 -> 10 -> 2 load.

    Invariants: never more than +2 pods in any 30 s period, never more than -20 % of the period-start
    size in any 60 s period, no scale-down while any recommendation of the last 300 s is higher.
    The exact trajectory follows from horizontal.go by hand: the seeded recommendation (1) holds the
    first scale-up until its 60 s window passes; then +2 every 30 s; after the drop, 300 s of
    stabilization, then int(n * 0.8) per 60 s.
    """
    path = tmp_path / "hpa.yaml"
    path.write_text(DESIGN_HPA)
    model = HPAModel(load_hpa(path))
    decisions = drive(model, [(0.0, 10.0), (600.0, 2.0)], start=1, until=1500.0)

    changes = [(d.now, d.current_replicas, d.desired_replicas) for d in decisions if d.rescale]
    assert changes == [
        (60.0, 1, 3),
        (90.0, 3, 5),
        (120.0, 5, 7),
        (150.0, 7, 9),
        (180.0, 9, 10),
        (885.0, 10, 8),
        (945.0, 8, 6),
        (1005.0, 6, 4),
        (1065.0, 4, 3),
        (1125.0, 3, 2),
    ]
    assert decisions[0].reason == "ScaleUpStabilized"  # the seeded 1 holds the first scale-up
    assert decisions[4].reason == "ScaleUpLimit"

    size_after = {d.now: d.desired_replicas for d in decisions}
    for d in decisions:
        # +2 pods per 30 s: the ups inside (t - 30, t] add up to at most 2.
        ups = sum(max(0, e.desired_replicas - e.current_replicas) for e in decisions if d.now - 30 < e.now <= d.now)
        assert ups <= 2
        # -20 % per 60 s: the size may not fall below int(0.8 * size at the period start).
        start = size_after.get(d.now - 60)
        if start is not None and d.desired_replicas < start:
            assert d.desired_replicas >= int(start * 0.8)
        # Stabilization: a scale-down never goes below a recommendation of the last 300 s.
        if d.rescale and d.desired_replicas < d.current_replicas:
            recent = [e.metric_replicas or 0 for e in decisions if d.now - 300 < e.now <= d.now]
            assert d.desired_replicas >= max(recent)
    # storeScaleEvent reuses the last slot older than the longest scale-down period (60 s):
    # 885 [885] -> 945 [885, 945] -> 1005 [1005, 945] -> 1065 [1005, 1065] -> 1125 [1125, 1065].
    assert [(e.replica_change, e.timestamp) for e in model.scale_down_events] == [(1, 1125.0), (1, 1065.0)]
