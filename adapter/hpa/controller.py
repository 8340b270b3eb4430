"""One HPA's reconcile loop: a model of ``reconcileAutoscaler`` in kubernetes/kubernetes
``pkg/controller/podautoscaler/horizontal.go``.

``HPAModel`` keeps the state the real controller keeps per HPA key (unstabilized recommendations,
scale-up/scale-down events, status conditions, last scale time). ``reconcile`` is one sync: the
caller supplies the clock, the scale subresource (``spec_replicas`` / ``status_replicas``), what the
metrics APIs returned for each ``spec.metrics`` entry, and the pods the scale selector lists. It
never sleeps, reads a clock or does I/O; the 15 s resync loop belongs to the caller.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from adapter.hpa.behavior import (
    MSG_SCALE_DOWN_STABILIZED,
    Recommendation,
    ScaleEvent,
    convert_desired_replicas_with_behavior_rate,
    convert_desired_replicas_with_rules,
    stabilize_recommendation,
    stabilize_recommendation_with_behaviors,
    store_scale_event,
)
from adapter.hpa.proposals import MetricProposal, MetricReading, propose
from adapter.hpa.replicas import (
    DEFAULT_CPU_INITIALIZATION_PERIOD,
    DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS,
    DEFAULT_TOLERANCE,
    PodInfo,
    Tolerances,
)
from adapter.hpa.spec import Behavior, HPASpec

__all__ = [
    "Condition",
    "ControllerConfig",
    "Decision",
    "HPAModel",
    "MetricProposal",
    "MetricReading",
]


@dataclass(frozen=True)
class ControllerConfig:
    """kube-controller-manager flags shaping the HPA (defaults: podautoscaler/config/v1alpha1/defaults.go).

    ``scale_up_limit_factor`` / ``scale_up_limit_minimum`` are horizontal.go package variables
    (2.0 / 4.0) used only without ``spec.behavior``; upstream's own tests raise the factor to 8.
    """

    tolerance: float = DEFAULT_TOLERANCE
    downscale_stabilization_seconds: float = 300.0
    cpu_initialization_period_seconds: float = DEFAULT_CPU_INITIALIZATION_PERIOD
    delay_of_initial_readiness_status_seconds: float = DEFAULT_DELAY_OF_INITIAL_READINESS_STATUS
    scale_up_limit_factor: float = 2.0
    scale_up_limit_minimum: float = 4.0


@dataclass(frozen=True)
class Condition:
    """An HPA status condition (``type`` AbleToScale / ScalingActive / ScalingLimited)."""

    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    """The outcome of one reconcile.

    ``desired_replicas`` is the replica count the target has after this sync (``current_replicas``
    unless ``rescale``). ``metric_replicas`` is the max over valid metric proposals and
    ``stabilized_replicas`` the recommendation after stabilization (both ``None`` when not reached).
    ``reason`` is the headline: the ScalingLimited reason when a limit bit (ScaleUpLimit,
    TooManyReplicas, TooFewReplicas, ScaleDownLimit), else the stabilization reason when stabilization
    changed the count (ScaleUpStabilized, ScaleDownStabilized), else DesiredWithinRange; on the
    early paths ScalingDisabled, TooManyReplicas/TooFewReplicas (current outside [min, max]) or the
    first invalid metric's reason. ``error`` is upstream's "invalid metrics (...)" text when any
    metric was invalid (even if the sync still scaled up on the valid ones).
    """

    now: float
    current_replicas: int
    desired_replicas: int
    rescale: bool
    reason: str
    conditions: tuple[Condition, ...]
    rescale_reason: str = ""
    metric_replicas: int | None = None
    metric_name: str = ""
    stabilized_replicas: int | None = None
    proposals: tuple[MetricProposal, ...] = ()
    error: str | None = None

    def condition(self, type_: str) -> Condition | None:
        """The condition of that type, if set."""
        for cond in self.conditions:
            if cond.type == type_:
                return cond
        return None


@dataclass(frozen=True)
class _Normalized:
    stabilized: int
    limited: int
    stabilize_reason: str
    limit_reason: str


class HPAModel:
    """The per-HPA state of the upstream controller, advanced one reconcile at a time.

    ``recommendations=None`` (the default) is a fresh controller: the first reconcile seeds the
    history with the current replica count (``recordInitialRecommendation``), which blocks a
    scale-down below the current size for one stabilization window. Pass ``()`` to start with an
    empty, already-initialized history (upstream tests' ``recommendations: []``).
    """

    def __init__(
        self,
        spec: HPASpec,
        config: ControllerConfig | None = None,
        *,
        recommendations: Sequence[Recommendation] | None = None,
        scale_up_events: Sequence[ScaleEvent] = (),
        scale_down_events: Sequence[ScaleEvent] = (),
    ) -> None:
        self.spec = spec
        self.config = config if config is not None else ControllerConfig()
        self._recommendations: tuple[Recommendation, ...] | None = (
            None if recommendations is None else tuple(recommendations)
        )
        self._up_events: tuple[ScaleEvent, ...] = tuple(scale_up_events)
        self._down_events: tuple[ScaleEvent, ...] = tuple(scale_down_events)
        self._conditions: dict[str, Condition] = {}
        self.last_scale_time: float | None = None

    @property
    def recommendations(self) -> tuple[Recommendation, ...]:
        """The stored unstabilized recommendations (empty before the first reconcile)."""
        return self._recommendations or ()

    @property
    def scale_up_events(self) -> tuple[ScaleEvent, ...]:
        """Stored scale-up events (kept only when the HPA has a behavior)."""
        return self._up_events

    @property
    def scale_down_events(self) -> tuple[ScaleEvent, ...]:
        """Stored scale-down events (kept only when the HPA has a behavior)."""
        return self._down_events

    @property
    def conditions(self) -> tuple[Condition, ...]:
        """The HPA's status conditions as the last reconcile left them."""
        return tuple(self._conditions.values())

    def tolerances(self) -> Tolerances:
        """Per-direction tolerances: ``behavior.scale{Up,Down}.tolerance`` when set, else the flag."""
        down = up = self.config.tolerance
        behavior = self.spec.behavior
        if behavior is not None:
            if behavior.scale_down.tolerance is not None:
                down = behavior.scale_down.tolerance
            if behavior.scale_up.tolerance is not None:
                up = behavior.scale_up.tolerance
        return Tolerances(scale_down=down, scale_up=up)

    def _set_condition(self, type_: str, status: bool, reason: str, message: str) -> None:
        # setConditionInList: replace in place (keeping its position) or append.
        self._conditions[type_] = Condition(type_, "True" if status else "False", reason, message)

    def reconcile(
        self,
        now: float,
        *,
        spec_replicas: int,
        status_replicas: int,
        metrics: Sequence[MetricReading],
        pods: Sequence[PodInfo],
    ) -> Decision:
        """One sync of this HPA at time ``now`` (seconds); returns what the controller decided.

        ``metrics[i]`` answers ``spec.metrics[i]``. Invalid metrics follow upstream's partial-data
        rule: if every metric is invalid, or some are and the valid ones would not scale up beyond
        ``spec_replicas``, nothing changes. A rescale stores a scale event (behavior only) and sets
        ``last_scale_time``. Raises ``ValueError`` when the readings do not match ``spec.metrics``.
        """
        spec = self.spec
        if len(metrics) != len(spec.metrics):
            raise ValueError(f"got {len(metrics)} metric readings for {len(spec.metrics)} spec.metrics entries")
        current = spec_replicas
        self._set_condition(
            "AbleToScale",
            True,
            "SucceededGetScale",
            "the HPA controller was able to get the target's current scale",
        )
        if self._recommendations is None:
            self._recommendations = (Recommendation(current, now),)

        if current == 0 and spec.min_replicas != 0:
            self._set_condition(
                "ScalingActive",
                False,
                "ScalingDisabled",
                "scaling is disabled since the replica count of the target is zero",
            )
            return self._finish(now, current, current, "ScalingDisabled")
        if current > spec.max_replicas:
            return self._finish(
                now,
                current,
                spec.max_replicas,
                "TooManyReplicas",
                "Current number of replicas above Spec.MaxReplicas",
            )
        if current < spec.min_replicas:
            return self._finish(
                now,
                current,
                spec.min_replicas,
                "TooFewReplicas",
                "Current number of replicas below Spec.MinReplicas",
            )

        tolerances = self.tolerances()
        proposals = tuple(
            propose(
                metric,
                reading,
                spec_replicas=spec_replicas,
                status_replicas=status_replicas,
                pods=pods,
                now=now,
                tolerances=tolerances,
                cpu_initialization_period=self.config.cpu_initialization_period_seconds,
                delay_of_initial_readiness_status=self.config.delay_of_initial_readiness_status_seconds,
            )
            for metric, reading in zip(spec.metrics, metrics, strict=True)
        )
        # computeReplicasForMetrics: the largest valid proposal wins (a first 0 is always replaced).
        replicas, metric_name = 0, ""
        for p in proposals:
            if p.replicas is not None and (replicas == 0 or p.replicas > replicas):
                replicas, metric_name = p.replicas, p.description
        invalid = [p for p in proposals if not p.valid]
        error = None
        if invalid:
            counts = f"{len(invalid)} invalid out of {len(proposals)}"
            error = f"invalid metrics ({counts}), first error is: {invalid[0].error}"
        if invalid and (len(invalid) == len(proposals) or replicas < spec_replicas):
            # No scale-down (and no change at all) on partial data.
            first = invalid[0]
            self._set_condition("ScalingActive", False, first.error_reason or "", first.condition_message or "")
            return self._finish(now, current, current, first.error_reason or "", proposals=proposals, error=error)
        self._set_condition(
            "ScalingActive",
            True,
            "ValidMetricFound",
            f"the HPA was able to successfully calculate a replica count from {metric_name}",
        )
        rescale_reason = ""
        if replicas > current:
            rescale_reason = f"{metric_name} above target"
        elif replicas < current:
            rescale_reason = "All metrics below target"
        if spec.behavior is None:
            norm = self._normalize_legacy(now, current, replicas)
        else:
            norm = self._normalize_with_behaviors(spec.behavior, now, current, replicas)

        if norm.limit_reason != "DesiredWithinRange":
            headline = norm.limit_reason
        elif norm.stabilized != replicas:
            headline = norm.stabilize_reason
        else:
            headline = "DesiredWithinRange"
        return self._finish(
            now,
            current,
            norm.limited,
            headline,
            rescale_reason,
            metric_replicas=replicas,
            metric_name=metric_name,
            stabilized_replicas=norm.stabilized,
            proposals=proposals,
            error=error,
        )

    def _finish(
        self,
        now: float,
        current: int,
        desired: int,
        reason: str,
        rescale_reason: str = "",
        *,
        metric_replicas: int | None = None,
        metric_name: str = "",
        stabilized_replicas: int | None = None,
        proposals: tuple[MetricProposal, ...] = (),
        error: str | None = None,
    ) -> Decision:
        rescale = desired != current
        if rescale:
            # The model's scale update always succeeds: condition, scale event, last scale time.
            self._set_condition(
                "AbleToScale",
                True,
                "SucceededRescale",
                f"the HPA controller was able to update the target scale to {desired}",
            )
            self._up_events, self._down_events = store_scale_event(
                self.spec.behavior, self._up_events, self._down_events, current, desired, now
            )
            self.last_scale_time = now
        return Decision(
            now=now,
            current_replicas=current,
            desired_replicas=desired,
            rescale=rescale,
            reason=reason,
            conditions=self.conditions,
            rescale_reason=rescale_reason if rescale else "",
            metric_replicas=metric_replicas,
            metric_name=metric_name,
            stabilized_replicas=stabilized_replicas,
            proposals=proposals,
            error=error,
        )

    def _normalize_legacy(self, now: float, current: int, desired: int) -> _Normalized:
        # normalizeDesiredReplicas.
        stabilized, self._recommendations = stabilize_recommendation(
            self._recommendations or (), desired, now, self.config.downscale_stabilization_seconds
        )
        if stabilized != desired:
            stabilize_reason = "ScaleDownStabilized"
            self._set_condition("AbleToScale", True, stabilize_reason, MSG_SCALE_DOWN_STABILIZED)
        else:
            stabilize_reason = "ReadyForNewScale"
            self._set_condition("AbleToScale", True, stabilize_reason, "recommended size matches current size")
        limited = convert_desired_replicas_with_rules(
            current,
            stabilized,
            self.spec.min_replicas,
            self.spec.max_replicas,
            self.config.scale_up_limit_factor,
            self.config.scale_up_limit_minimum,
        )
        self._set_condition("ScalingLimited", limited.replicas != stabilized, limited.reason, limited.message)
        return _Normalized(stabilized, limited.replicas, stabilize_reason, limited.reason)

    def _normalize_with_behaviors(self, behavior: Behavior, now: float, current: int, desired: int) -> _Normalized:
        # normalizeDesiredReplicasWithBehaviors; an unset scale-down window takes the controller flag
        # (maybeInitScaleDownStabilizationWindow).
        down_window = behavior.scale_down.stabilization_window_seconds
        result = stabilize_recommendation_with_behaviors(
            self._recommendations or (),
            current_replicas=current,
            desired_replicas=desired,
            scale_up_window=float(behavior.scale_up.stabilization_window_seconds or 0),
            scale_down_window=(
                self.config.downscale_stabilization_seconds if down_window is None else float(down_window)
            ),
            now=now,
        )
        self._recommendations = result.history
        if result.replicas != desired:
            stabilize_reason = result.reason
            self._set_condition("AbleToScale", True, result.reason, result.message)
        else:
            stabilize_reason = "ReadyForNewScale"
            self._set_condition("AbleToScale", True, stabilize_reason, "recommended size matches current size")
        limited = convert_desired_replicas_with_behavior_rate(
            current_replicas=current,
            desired_replicas=result.replicas,
            min_replicas=self.spec.min_replicas,
            max_replicas=self.spec.max_replicas,
            scale_up=behavior.scale_up,
            scale_down=behavior.scale_down,
            up_events=self._up_events,
            down_events=self._down_events,
            now=now,
        )
        self._set_condition("ScalingLimited", limited.replicas != result.replicas, limited.reason, limited.message)
        return _Normalized(result.replicas, limited.replicas, stabilize_reason, limited.reason)
