"""Stabilization, rate limits and scale-event bookkeeping against upstream's own test tables.

Every table row is transcribed from kubernetes/kubernetes
``pkg/controller/podautoscaler/horizontal_test.go`` (named per test); expected values are upstream's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.hpa.behavior import (
    Recommendation,
    ScaleEvent,
    calculate_scale_up_limit,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    replicas_change_per_period,
    scale_down_limit_with_rules,
    scale_up_limit_with_rules,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
    store_scale_event,
)
from adapter.hpa.spec import (
    Behavior,
    PartialScalingRules,
    ScalingPolicy,
    ScalingRules,
    generate_scale_down_rules,
    generate_scale_up_rules,
)
from tests.hpa.upstream_helpers import NOW, generate_events_uniform_distribution, generate_scaling_rules

MINUTE = 60.0

# ---------------------------------------------------------------------------------------------
# TestScalingWithRules (convertDesiredReplicasWithBehaviorRate)
# ---------------------------------------------------------------------------------------------


@dataclass
class RateCase:
    name: str
    current: int
    desired: int
    min_replicas: int
    max_replicas: int
    expected: int
    reason: str
    up_rules: PartialScalingRules | None = None
    down_rules: PartialScalingRules | None = None
    up_events: list[ScaleEvent] = field(default_factory=list)
    down_events: list[ScaleEvent] = field(default_factory=list)


R = generate_scaling_rules
E = generate_events_uniform_distribution

RATE_CASES = [
    RateCase("prenormalized desired replicas within range", 5, 7, 3, 8, 7, "DesiredWithinRange"),
    RateCase("prenormalized desired replicas < minReplicas", 3, 1, 2, 8, 2, "TooFewReplicas"),
    RateCase(
        "prenormalized desired replicas within range when minReplicas is 0",
        1,
        0,
        0,
        10,
        0,
        "DesiredWithinRange",
    ),
    RateCase("maxReplicas is the limit because maxReplicas < scaleUpLimit", 20, 1000, 1, 10, 10, "TooManyReplicas"),
    RateCase(
        "desired replica count is more than the maximum replica count",
        100,
        1000,
        100,
        150,
        150,
        "TooManyReplicas",
    ),
    RateCase(
        "scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies",
        3,
        1000,
        1,
        2000,
        4,
        "ScaleUpLimit",
        up_rules=R(0, 0, 1, 60, 0),
    ),
    # Upstream marks this row testThis and skips it; its expectation is still the algorithm's answer.
    RateCase(
        "scaleDownLimit is the limit because scaleDownLimit > minReplicas with user defined policies",
        1000,
        3,
        3,
        2000,
        980,
        "ScaleDownLimit",
        down_rules=R(20, 60, 0, 0, 0),
    ),
    RateCase("scaleUp with default behavior", 10, 50, 1, 1000, 20, "ScaleUpLimit"),
    RateCase(
        "scaleUp with pods policy larger than percent policy",
        10,
        500,
        1,
        1000,
        110,
        "ScaleUpLimit",
        up_rules=R(100, 60, 100, 60, 0),
    ),
    RateCase(
        "scaleUp with percent policy larger than pods policy",
        10,
        500,
        1,
        1000,
        20,
        "ScaleUpLimit",
        up_rules=R(2, 60, 100, 60, 0),
    ),
    RateCase(
        "scaleUp with spec MaxReplicas limitation with large pod policy",
        10,
        50,
        1,
        1000,
        50,
        "DesiredWithinRange",
        up_rules=R(100, 60, 0, 0, 0),
    ),
    RateCase(
        "scaleUp with spec MaxReplicas limitation with large percent policy",
        10,
        50,
        1,
        1000,
        50,
        "DesiredWithinRange",
        up_rules=R(10000, 60, 0, 0, 0),
    ),
    RateCase("scaleUp with pod policy limitation", 10, 50, 1, 1000, 40, "ScaleUpLimit", up_rules=R(30, 60, 0, 0, 0)),
    RateCase(
        "scaleUp with percent policy limitation",
        10,
        50,
        1,
        1000,
        30,
        "ScaleUpLimit",
        up_rules=R(0, 0, 200, 60, 0),
    ),
    RateCase(
        "scaleDown with percent policy larger than pod policy",
        100,
        2,
        1,
        1000,
        80,
        "ScaleDownLimit",
        down_rules=R(20, 60, 1, 60, 300),
    ),
    RateCase(
        "scaleDown with pod policy larger than percent policy",
        100,
        2,
        1,
        1000,
        98,
        "ScaleDownLimit",
        down_rules=R(2, 60, 1, 60, 300),
    ),
    RateCase(
        "scaleDown with spec MinReplicas=nil limitation with large pod policy",
        10,
        0,
        1,
        1000,
        1,
        "TooFewReplicas",
        down_rules=R(100, 60, 0, 0, 300),
    ),
    RateCase(
        "scaleDown with spec MinReplicas limitation with large pod policy",
        10,
        0,
        1,
        1000,
        1,
        "TooFewReplicas",
        down_rules=R(100, 60, 0, 0, 300),
    ),
    RateCase(
        "scaleDown with spec MinReplicas limitation with large percent policy",
        10,
        2,
        5,
        1000,
        5,
        "TooFewReplicas",
        down_rules=R(0, 0, 100, 60, 300),
    ),
    RateCase(
        "scaleDown with pod policy limitation",
        10,
        2,
        1,
        1000,
        5,
        "ScaleDownLimit",
        down_rules=R(5, 60, 0, 0, 300),
    ),
    RateCase(
        "scaleDown with percent policy limitation",
        10,
        5,
        1,
        1000,
        5,
        "DesiredWithinRange",
        down_rules=R(0, 0, 50, 60, 300),
    ),
    RateCase(
        "scaleUp with spec MaxReplicas limitation with large pod policy and events",
        100,
        500,
        1,
        200,
        200,
        "TooManyReplicas",
        up_rules=R(300, 60, 0, 0, 0),
        up_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleUp with spec MaxReplicas limitation with large percent policy and events",
        100,
        500,
        1,
        200,
        200,
        "TooManyReplicas",
        up_rules=R(0, 0, 10000, 60, 0),
        up_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
        100,
        500,
        1,
        1000,
        100,
        "ScaleUpLimit",
        up_rules=R(5, 120, 0, 0, 0),
        up_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleUp with pod policy and previous scale up events",
        100,
        500,
        1,
        1000,
        235,
        "ScaleUpLimit",
        up_rules=R(150, 120, 0, 0, 0),
        up_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleUp with percent policy and previous scale up events",
        100,
        500,
        1,
        1000,
        255,
        "ScaleUpLimit",
        up_rules=R(0, 0, 200, 120, 0),
        up_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleUp with percent policy and previous scale up and down events",
        6,
        24,
        1,
        1000,
        16,
        "ScaleUpLimit",
        up_rules=R(0, 0, 300, 300, 0),
        up_events=E([4], 120),
        down_events=E([2], 120),
    ),
    RateCase(
        "scaleDown with default policy and previous events",
        10,
        5,
        1,
        1000,
        5,
        "DesiredWithinRange",
        down_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleDown with spec MinReplicas=nil limitation with large pod policy and previous events",
        100,
        0,
        1,
        1000,
        1,
        "TooFewReplicas",
        down_rules=R(115, 120, 0, 0, 300),
        down_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleDown with spec MinReplicas limitation with large pod policy and previous events",
        100,
        0,
        5,
        1000,
        5,
        "TooFewReplicas",
        down_rules=R(130, 120, 0, 0, 300),
        down_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleDown with spec MinReplicas limitation with large percent policy and previous events",
        100,
        2,
        5,
        1000,
        5,
        "TooFewReplicas",
        down_rules=R(0, 0, 100, 120, 300),
        down_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleDown with pod policy limitation and previous events",
        100,
        2,
        1,
        1000,
        100,
        "ScaleDownLimit",
        down_rules=R(5, 120, 0, 0, 300),
        down_events=E([1, 5, 9], 120),
    ),
    RateCase(
        "scaleDown with percent policy limitation and previous events",
        100,
        0,
        1,
        1000,
        56,
        "ScaleDownLimit",
        down_rules=R(0, 0, 50, 120, 300),
        down_events=E([2, 4, 6], 120),
    ),
    RateCase(
        "scaleDown with percent policy and previous scale up and down events",
        10,
        1,
        1,
        1000,
        6,
        "ScaleDownLimit",
        down_rules=R(0, 0, 50, 180, 0),
        up_events=E([2], 120),
        down_events=E([4], 120),
    ),
    RateCase(
        "scaleDown with previous events preventing further scale down",
        100,
        0,
        1,
        1000,
        100,
        "ScaleDownLimit",
        down_rules=R(0, 0, 10, 120, 300),
        down_events=E([10, 10, 10], 120),
    ),
    RateCase(
        "scaleDown with with previous events still allowing more scale down",
        10,
        5,
        1,
        1000,
        5,
        "DesiredWithinRange",
        down_rules=R(0, 0, 1000, 120, 300),
        down_events=E([10, 10, 10], 120),
    ),
    RateCase(
        "check 'outdated' flag for events for one behavior for up",
        100,
        200,
        1,
        1000,
        200,
        "DesiredWithinRange",
        up_rules=R(1000, 60, 0, 0, 0),
        up_events=E([8, 12, 9, 11], 120),
    ),
    RateCase(
        "check that events were not marked 'outdated' for two different policies in the behavior for up",
        100,
        200,
        1,
        1000,
        200,
        "DesiredWithinRange",
        up_rules=R(1000, 120, 100, 60, 0),
        up_events=E([8, 12, 9, 11], 120),
    ),
    RateCase(
        "check that events were marked 'outdated' for two different policies in the behavior for up",
        100,
        200,
        1,
        1000,
        200,
        "DesiredWithinRange",
        up_rules=R(1000, 30, 100, 60, 0),
        up_events=E([8, 12, 9, 11], 120),
    ),
    RateCase(
        "check 'outdated' flag for events for one behavior for down",
        100,
        5,
        1,
        1000,
        5,
        "DesiredWithinRange",
        down_rules=R(1000, 60, 0, 0, 300),
        down_events=E([8, 12, 9, 11], 120),
    ),
    RateCase(
        "check that events were not marked 'outdated' for two different policies in the behavior for down",
        100,
        5,
        1,
        1000,
        5,
        "DesiredWithinRange",
        down_rules=R(1000, 120, 100, 60, 300),
        down_events=E([8, 12, 9, 11], 120),
    ),
    RateCase(
        "check that events were marked 'outdated' for two different policies in the behavior for down",
        100,
        5,
        1,
        1000,
        5,
        "DesiredWithinRange",
        down_rules=R(1000, 30, 100, 60, 300),
        down_events=E([8, 12, 9, 11], 120),
    ),
]


@pytest.mark.parametrize("case", RATE_CASES, ids=[c.name for c in RATE_CASES])
def test_scaling_with_rules(case: RateCase) -> None:
    """horizontal_test.go TestScalingWithRules: every row, rules defaulted with Generate*Rules."""
    result = convert_desired_replicas_with_behavior_rate(
        current_replicas=case.current,
        desired_replicas=case.desired,
        min_replicas=case.min_replicas,
        max_replicas=case.max_replicas,
        scale_up=generate_scale_up_rules(case.up_rules),
        scale_down=generate_scale_down_rules(case.down_rules),
        up_events=case.up_events,
        down_events=case.down_events,
        now=NOW,
    )
    assert (result.replicas, result.reason) == (case.expected, case.reason)


def test_behavior_rate_08_default_behavior_doubles_or_adds_four() -> None:
    """Worked example behavior-rate-08 (TestScalingWithRules "scaleUp with default behavior").

    Default scale-up policies: max(10 + 4, ceil(10 * 2)) = 20.
    """
    up = generate_scale_up_rules(None)
    assert up.policies == (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15))
    assert scale_up_limit_with_rules(10, [], [], up, NOW) == 20


def test_behavior_rate_26_down_events_are_added_back_when_scaling_up() -> None:
    """Worked example behavior-rate-26 (TestScalingWithRules, up and down events, Percent 300 %/300 s).

    Period start = 6 - 4 (added) + 2 (removed) = 4; ceil(4 * 4) = 16.
    """
    rules = generate_scale_up_rules(generate_scaling_rules(0, 0, 300, 300, 0))
    up, down = [ScaleEvent(4, NOW - 60)], [ScaleEvent(2, NOW - 60)]
    assert scale_up_limit_with_rules(6, up, down, rules, NOW) == 16


def test_behavior_rate_33_up_events_are_subtracted_when_scaling_down() -> None:
    """Worked example behavior-rate-33 (TestScalingWithRules, Percent 50 %/180 s scale-down).

    Period start = 10 - 2 (added) + 4 (removed) = 12; int(12 * 0.5) = 6, ScaleDownLimit.
    """
    down_rules = generate_scale_down_rules(generate_scaling_rules(0, 0, 50, 180, 0))
    up, down = [ScaleEvent(2, NOW - 60)], [ScaleEvent(4, NOW - 60)]
    assert scale_down_limit_with_rules(10, up, down, down_rules, NOW) == 6
    result = convert_desired_replicas_with_behavior_rate(
        current_replicas=10,
        desired_replicas=1,
        min_replicas=1,
        max_replicas=1000,
        scale_up=generate_scale_up_rules(None),
        scale_down=down_rules,
        up_events=up,
        down_events=down,
        now=NOW,
    )
    assert (result.replicas, result.reason) == (6, "ScaleDownLimit")


def test_calculate_scale_up_limit_with_min_select_policy() -> None:
    """horizontal_test.go TestCalculateScaleUpLimitWithScalingRules: Min of (1+2, ceil(1*1.5)) = 2."""
    rules = ScalingRules(300, "Min", (ScalingPolicy("Pods", 2, 60), ScalingPolicy("Percent", 50, 60)))
    assert scale_up_limit_with_rules(1, [], [], rules, NOW) == 2


def test_calculate_scale_down_limit_with_min_select_policy() -> None:
    """horizontal_test.go TestCalculateScaleDownLimitWithBehaviors: Min change of (5-2, int(5*0.5)) = 3."""
    rules = ScalingRules(300, "Min", (ScalingPolicy("Pods", 2, 60), ScalingPolicy("Percent", 50, 60)))
    assert scale_down_limit_with_rules(5, [], [], rules, NOW) == 3


def test_disabled_select_policy_blocks_that_direction_only() -> None:
    """horizontal.go calculateScale{Up,Down}Limit*: selectPolicy Disabled returns currentReplicas."""
    disabled = ScalingRules(0, "Disabled", (ScalingPolicy("Pods", 100, 15),))
    up = convert_desired_replicas_with_behavior_rate(
        current_replicas=5,
        desired_replicas=50,
        min_replicas=1,
        max_replicas=100,
        scale_up=disabled,
        scale_down=generate_scale_down_rules(None),
        up_events=[],
        down_events=[],
        now=NOW,
    )
    assert (up.replicas, up.reason) == (5, "ScaleUpLimit")
    down = convert_desired_replicas_with_behavior_rate(
        current_replicas=5,
        desired_replicas=1,
        min_replicas=1,
        max_replicas=100,
        scale_up=disabled,
        scale_down=generate_scale_down_rules(None),
        up_events=[],
        down_events=[],
        now=NOW,
    )
    assert (down.replicas, down.reason) == (1, "DesiredWithinRange")


def test_change_per_period_excludes_an_event_exactly_one_period_old() -> None:
    """horizontal.go getReplicasChangePerPeriod counts events strictly After(now - period)."""
    events = [ScaleEvent(3, NOW - 60), ScaleEvent(5, NOW - 59.5), ScaleEvent(7, NOW)]
    assert replicas_change_per_period(60, events, NOW) == 12


@settings(deadline=None)  # no wall-clock limits in tests
@given(
    current=st.integers(0, 200),
    desired=st.integers(0, 400),
    bounds=st.tuples(st.integers(0, 50), st.integers(1, 300)),
    up_pods=st.integers(1, 50),
    up_percent=st.integers(1, 500),
    down_percent=st.integers(1, 100),
    up_changes=st.lists(st.integers(1, 20), max_size=4),
    down_changes=st.lists(st.integers(1, 20), max_size=4),
)
def test_rate_limit_never_overshoots_or_reverses(
    current: int,
    desired: int,
    bounds: tuple[int, int],
    up_pods: int,
    up_percent: int,
    down_percent: int,
    up_changes: list[int],
    down_changes: list[int],
) -> None:
    """Property of horizontal.go convertDesiredReplicasWithBehaviorRate (current within [min, max]):
    the result moves from current toward desired, never past it, never the other way, never out of
    [min, max]; a limit below current is pinned to current and vice versa."""
    lo, hi = min(bounds), max(bounds)
    current = max(lo, min(current, hi))
    result = convert_desired_replicas_with_behavior_rate(
        current_replicas=current,
        desired_replicas=desired,
        min_replicas=lo,
        max_replicas=hi,
        scale_up=ScalingRules(0, "Max", (ScalingPolicy("Pods", up_pods, 60), ScalingPolicy("Percent", up_percent, 30))),
        scale_down=ScalingRules(None, "Max", (ScalingPolicy("Percent", down_percent, 60),)),
        up_events=[ScaleEvent(c, NOW - 10 * i) for i, c in enumerate(up_changes)],
        down_events=[ScaleEvent(c, NOW - 10 * i) for i, c in enumerate(down_changes)],
        now=NOW,
    )
    assert lo <= result.replicas <= hi
    if desired >= current:
        assert current <= result.replicas <= min(desired, hi)
    else:
        assert max(desired, lo) <= result.replicas <= current


# ---------------------------------------------------------------------------------------------
# TestNormalizeDesiredReplicasWithBehavior (stabilizeRecommendationWithBehaviors)
# ---------------------------------------------------------------------------------------------


def _recs(*pairs: tuple[int, float]) -> list[Recommendation]:
    return [Recommendation(r, NOW + offset) for r, offset in pairs]


STABILIZE_CASES = [
    # name, history, current, desired, expected, expected stored values, up window, down window
    ("empty recommendations for scaling down", _recs(), 100, 5, 5, [5], 0, 0),
    (
        "simple scale down stabilization",
        _recs((4, -2 * MINUTE), (5, -1 * MINUTE)),
        100,
        3,
        5,
        [4, 5, 3],
        0,
        180,
    ),
    ("simple scale up stabilization", _recs((4, -2 * MINUTE), (5, -1 * MINUTE)), 1, 7, 4, [4, 5, 7], 300, 0),
    ("no scale down stabilization", _recs((1, -2 * MINUTE), (2, -1 * MINUTE)), 100, 3, 3, [1, 2, 3], 300, 0),
    ("no scale up stabilization", _recs((4, -2 * MINUTE), (5, -1 * MINUTE)), 1, 3, 3, [4, 5, 3], 0, 300),
    (
        "no scale down stabilization, reuse recommendation element",
        _recs((10, -10 * MINUTE), (9, -9 * MINUTE)),
        100,
        3,
        3,
        [10, 3],
        0,
        0,
    ),
    (
        "no scale up stabilization, reuse recommendation element",
        _recs((10, -10 * MINUTE), (9, -9 * MINUTE)),
        1,
        100,
        100,
        [10, 100],
        0,
        0,
    ),
    (
        "scale down stabilization, reuse one of obsolete recommendation element",
        _recs((10, -10 * MINUTE), (4, -1 * MINUTE), (5, -2 * MINUTE), (9, -9 * MINUTE)),
        100,
        3,
        5,
        [10, 4, 5, 3],
        0,
        180,
    ),
    (
        "scale up stabilization, reuse one of obsolete recommendation element",
        _recs((10, -100 * MINUTE), (6, -1 * MINUTE), (5, -2 * MINUTE), (9, -3 * MINUTE)),
        1,
        100,
        5,
        [100, 6, 5, 9],
        300,
        0,
    ),
    (
        "scale up and down stabilization, do not scale up when prenormalized rec goes down",
        _recs((2, -100 * MINUTE), (3, -3 * MINUTE)),
        2,
        1,
        2,
        None,
        300,
        300,
    ),
    (
        "scale up and down stabilization, do not scale down when prenormalized rec goes up",
        _recs((2, -100 * MINUTE), (1, -3 * MINUTE)),
        2,
        3,
        2,
        None,
        300,
        300,
    ),
]


@pytest.mark.parametrize(
    ("name", "history", "current", "desired", "expected", "stored", "up_window", "down_window"),
    STABILIZE_CASES,
    ids=[c[0] for c in STABILIZE_CASES],
)
def test_normalize_desired_replicas_with_behavior(
    name: str,
    history: list[Recommendation],
    current: int,
    desired: int,
    expected: int,
    stored: list[int] | None,
    up_window: int,
    down_window: int,
) -> None:
    """horizontal_test.go TestNormalizeDesiredReplicasWithBehavior: every row."""
    result = stabilize_recommendation_with_behaviors(
        history,
        current_replicas=current,
        desired_replicas=desired,
        scale_up_window=up_window,
        scale_down_window=down_window,
        now=NOW,
    )
    assert result.replicas == expected
    if stored is not None:
        assert [r.replicas for r in result.history] == stored
    # The newest recommendation is always the unstabilized one, stamped now.
    assert Recommendation(desired, NOW) in result.history


def test_behavior_stabilize_02_keeps_highest_recent_recommendation() -> None:
    """Worked example behavior-stabilize-02 (TestNormalizeDesiredReplicasWithBehavior
    "simple scale down stabilization"): history [(4, -120 s), (5, -60 s)], down window 180, current
    100, desired 3 -> 5, reason ScaleDownStabilized, history [4, 5, 3]."""
    result = stabilize_recommendation_with_behaviors(
        _recs((4, -120), (5, -60)),
        current_replicas=100,
        desired_replicas=3,
        scale_up_window=0,
        scale_down_window=180,
        now=NOW,
    )
    assert (result.replicas, result.reason) == (5, "ScaleDownStabilized")
    assert [r.replicas for r in result.history] == [4, 5, 3]


# ---------------------------------------------------------------------------------------------
# Legacy path: TestNormalizeDesiredReplicas, TestConvertDesiredReplicasWithRules
# ---------------------------------------------------------------------------------------------

LEGACY_STABILIZE_CASES = [
    ("empty log", _recs(), 5, 5, 1),
    ("stabilize", _recs((4, -2 * MINUTE), (5, -1 * MINUTE)), 3, 5, 3),
    ("no stabilize", _recs((1, -2 * MINUTE), (2, -1 * MINUTE)), 3, 3, 3),
    ("no stabilize - old recommendations", _recs((10, -10 * MINUTE), (9, -9 * MINUTE)), 3, 3, 2),
    (
        "stabilize - old recommendations",
        _recs((10, -10 * MINUTE), (4, -1 * MINUTE), (5, -2 * MINUTE), (9, -9 * MINUTE)),
        3,
        5,
        4,
    ),
]


@pytest.mark.parametrize(
    ("name", "history", "desired", "expected", "log_length"),
    LEGACY_STABILIZE_CASES,
    ids=[c[0] for c in LEGACY_STABILIZE_CASES],
)
def test_normalize_desired_replicas_legacy(
    name: str, history: list[Recommendation], desired: int, expected: int, log_length: int
) -> None:
    """horizontal_test.go TestNormalizeDesiredReplicas (5 min downscale window): every row."""
    stabilized, new_history = stabilize_recommendation(history, desired, NOW, 5 * MINUTE)
    assert stabilized == expected
    assert len(new_history) == log_length


def test_legacy_stabilization_reuses_the_last_stale_slot() -> None:
    """horizontal.go stabilizeRecommendation overwrites the *last* entry older than the window."""
    history = _recs((10, -10 * MINUTE), (4, -1 * MINUTE), (5, -2 * MINUTE), (9, -9 * MINUTE))
    _, new_history = stabilize_recommendation(history, 3, NOW, 5 * MINUTE)
    assert [r.replicas for r in new_history] == [10, 4, 5, 3]
    assert new_history[3].timestamp == NOW


@pytest.mark.parametrize(
    ("current", "desired", "lo", "hi", "expected", "reason", "factor"),
    [
        (5, 7, 3, 8, 7, "DesiredWithinRange", 8.0),
        (3, 1, 2, 8, 2, "TooFewReplicas", 8.0),
        (1, 0, 0, 10, 0, "DesiredWithinRange", 8.0),
        (20, 1000, 1, 10, 10, "TooManyReplicas", 8.0),
        # legacy-rules-05: upstream's tests run with scaleUpLimitFactor = 8 -> max(8*3, 4) = 24 ...
        (3, 1000, 1, 2000, 24, "ScaleUpLimit", 8.0),
        # ... while the production factor 2.0 gives max(2*3, 4) = 6.
        (3, 1000, 1, 2000, 6, "ScaleUpLimit", 2.0),
        (1, 1000, 1, 2000, 4, "ScaleUpLimit", 2.0),
    ],
)
def test_convert_desired_replicas_with_rules(
    current: int, desired: int, lo: int, hi: int, expected: int, reason: str, factor: float
) -> None:
    """horizontal_test.go TestConvertDesiredReplicasWithRules (init() sets scaleUpLimitFactor = 8)
    plus the production factor 2.0 / minimum 4.0 from horizontal.go."""
    result = convert_desired_replicas_with_rules(current, desired, lo, hi, factor=factor)
    assert (result.replicas, result.reason) == (expected, reason)
    assert calculate_scale_up_limit(current, factor) == int(max(factor * current, 4.0))


# ---------------------------------------------------------------------------------------------
# TestStoreScaleEvents
# ---------------------------------------------------------------------------------------------

STORE_CASES = [
    # name, previous events (change, age s), new events (change, outdated), rules, change in last 60 s
    ("empty entries with default behavior", [], [], None, 0),
    ("empty entries with two-policy-behavior", [], [(5, False)], R(10, 60, 100, 60, 0), 0),
    ("one outdated entry to be kept untouched without behavior", [(7, 61)], [(7, False)], None, 0),
    ("one outdated entry to be replaced with behavior", [(7, 61)], [(5, False)], R(10, 60, 100, 60, 0), 0),
    (
        "one actual entry to be not touched with behavior",
        [(7, 58)],
        [(7, False), (5, False)],
        R(10, 60, 100, 60, 0),
        7,
    ),
    (
        "two entries, one of them to be replaced",
        [(7, 61), (6, 59)],
        [(5, False), (6, False)],
        R(10, 60, 0, 0, 0),
        6,
    ),
    (
        "replace one entry, use policies with different periods",
        [(8, 29), (6, 59), (7, 61), (9, 61)],
        [(8, False), (6, False), (7, True), (5, False)],
        R(10, 60, 100, 30, 0),
        14,
    ),
    (
        "two entries, both actual",
        [(7, 58), (6, 59)],
        [(7, False), (6, False), (5, False)],
        R(10, 120, 100, 30, 0),
        13,
    ),
]


@pytest.mark.parametrize(
    ("name", "previous", "expected", "rules", "change"), STORE_CASES, ids=[c[0] for c in STORE_CASES]
)
def test_store_scale_events(
    name: str,
    previous: list[tuple[int, float]],
    expected: list[tuple[int, bool]],
    rules: PartialScalingRules | None,
    change: int,
) -> None:
    """horizontal_test.go TestStoreScaleEvents: same table for a +5 scale-up and a -5 scale-down."""
    events = [ScaleEvent(c, NOW - age) for c, age in previous]
    assert replicas_change_per_period(60, events, NOW) == change
    # Up: the rules are the scale-up rules; down: the same rules as scale-down rules.
    up_behavior = None if rules is None else Behavior(generate_scale_up_rules(rules), generate_scale_down_rules(None))
    up_events, untouched = store_scale_event(up_behavior, events, [], 10, 15, NOW)
    assert [(e.replica_change, e.outdated) for e in up_events] == expected
    assert untouched == ()
    down_behavior = None if rules is None else Behavior(generate_scale_up_rules(None), generate_scale_down_rules(rules))
    untouched, down_events = store_scale_event(down_behavior, [], events, 10, 5, NOW)
    assert [(e.replica_change, e.outdated) for e in down_events] == expected
    assert untouched == ()
