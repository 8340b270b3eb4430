"""Small re-implementations of helpers from upstream's tests, so the upstream tables read the same.

Sources: kubernetes/kubernetes ``pkg/controller/podautoscaler/horizontal_test.go``
(``generateScalingRules``, ``generateEventsUniformDistribution``, ``hotCPUCreationTime``,
``coolCPUCreationTime``) and ``replica_calculator_test.go`` (``defaultTesting*`` constants).
"""

from __future__ import annotations

from collections.abc import Sequence

from adapter.hpa.behavior import ScaleEvent
from adapter.hpa.controller import ControllerConfig
from adapter.hpa.spec import PartialScalingRules, ScalingPolicy

# A fixed clock far from zero: a pod started at t=0 plays Go's zero time ("long ago").
NOW = 1_000_000.0

# replica_calculator.go test constants: tolerance 0.1, cpu initialization 2 min, readiness delay 10 s.
TEST_CPU_INITIALIZATION_PERIOD = 120.0
TEST_DELAY_OF_INITIAL_READINESS = 10.0

# horizontal_test.go init() sets scaleUpLimitFactor = 8; NewHorizontalController gets a 5 min window.
UPSTREAM_TEST_CONFIG = ControllerConfig(
    tolerance=0.1,
    downscale_stabilization_seconds=300.0,
    cpu_initialization_period_seconds=TEST_CPU_INITIALIZATION_PERIOD,
    delay_of_initial_readiness_status_seconds=TEST_DELAY_OF_INITIAL_READINESS,
    scale_up_limit_factor=8.0,
    scale_up_limit_minimum=4.0,
)


def hot_cpu_creation_time() -> float:
    """``hotCPUCreationTime``: started just now."""
    return NOW


def cool_cpu_creation_time() -> float:
    """``coolCPUCreationTime``: started three minutes ago."""
    return NOW - 180.0


def generate_scaling_rules(
    pods: int, pods_period: int, percent: int, percent_period: int, window: int
) -> PartialScalingRules:
    """``generateScalingRules``: selectPolicy Max, a Pods and/or a Percent policy, a window."""
    policies: list[ScalingPolicy] = []
    if pods != 0:
        policies.append(ScalingPolicy("Pods", pods, pods_period))
    if percent != 0:
        policies.append(ScalingPolicy("Percent", percent, percent_period))
    # Go appends to a nil slice: no policy at all leaves Policies nil (so the defaults apply).
    return PartialScalingRules(
        stabilization_window_seconds=window,
        select_policy="Max",
        policies=tuple(policies) if policies else None,
    )


def generate_events_uniform_distribution(raw: Sequence[int], period_seconds: int) -> list[ScaleEvent]:
    """``generateEventsUniformDistribution``: events spread over the last ``period_seconds``.

    Each event sits in the middle of its segment; Go truncates the offset to whole seconds.
    """
    segment = period_seconds / len(raw)
    events = []
    for idx, change in enumerate(raw):
        boundary = int(period_seconds - segment * (idx + 1) + segment / 2)
        events.append(ScaleEvent(change, NOW - boundary))
    return events
