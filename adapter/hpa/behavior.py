"""Normalizing a metric-derived replica count: stabilization, rate limits and scale-event bookkeeping.

A model of kubernetes/kubernetes ``pkg/controller/podautoscaler/horizontal.go``:

* legacy path (``spec.behavior`` nil): ``stabilizeRecommendation`` + ``convertDesiredReplicasWithRules``
  with the ``scaleUpLimitFactor`` (2.0) / ``scaleUpLimitMinimum`` (4.0) cap;
* behavior path: ``stabilizeRecommendationWithBehaviors`` + ``convertDesiredReplicasWithBehaviorRate``
  reading the scale events kept by ``storeScaleEvent``.

All functions are pure: histories go in as sequences and come back as new tuples; ``now`` is float
seconds. Time comparisons keep upstream's strictness (``Before``/``After`` are strict).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from adapter.hpa.spec import Behavior, ScalingRules

MAX_INT32 = 2**31 - 1
MIN_INT32 = -(2**31)

# horizontal.go package variables.
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0

MSG_WITHIN_RANGE = "the desired count is within the acceptable range"
MSG_SCALE_UP_LIMIT = "the desired replica count is increasing faster than the maximum scale rate"
MSG_SCALE_DOWN_LIMIT = "the desired replica count is decreasing faster than the maximum scale rate"
MSG_TOO_MANY = "the desired replica count is more than the maximum replica count"
MSG_TOO_FEW = "the desired replica count is less than the minimum replica count"
MSG_SCALE_UP_STABILIZED = (
    "recent recommendations were lower than current one, applying the lowest recent recommendation"
)
MSG_SCALE_DOWN_STABILIZED = (
    "recent recommendations were higher than current one, applying the highest recent recommendation"
)


@dataclass(frozen=True)
class Recommendation:
    """An unstabilized recommendation as stored by the controller (``timestampedRecommendation``)."""

    replicas: int
    timestamp: float


@dataclass(frozen=True)
class ScaleEvent:
    """``timestampedScaleEvent``: a non-negative replica change; ``outdated`` slots get reused."""

    replica_change: int
    timestamp: float
    outdated: bool = False


@dataclass(frozen=True)
class Limited:
    """A replica count after a limiting step, with the ``ScalingLimited`` condition reason/message."""

    replicas: int
    reason: str
    message: str


@dataclass(frozen=True)
class Stabilized:
    """A stabilized recommendation, the would-be ``AbleToScale`` reason/message, and the new history.

    ``reason`` names the direction that was being stabilized; it is only shown by the controller
    when ``replicas`` differs from the unstabilized recommendation.
    """

    replicas: int
    reason: str
    message: str
    history: tuple[Recommendation, ...]


# ---------------------------------------------------------------------------------------------
# Legacy path (no spec.behavior)
# ---------------------------------------------------------------------------------------------


def stabilize_recommendation(
    history: Sequence[Recommendation], desired: int, now: float, window_seconds: float
) -> tuple[int, tuple[Recommendation, ...]]:
    """``stabilizeRecommendation``: the max of ``desired`` and every recommendation inside the window.

    The new recommendation replaces the last entry older than the window, or is appended.
    """
    best = desired
    cutoff = now - window_seconds
    old_index: int | None = None
    for i, rec in enumerate(history):
        if rec.timestamp < cutoff:
            old_index = i
        elif rec.replicas > best:
            best = rec.replicas
    return best, _store(history, old_index, Recommendation(desired, now))


def calculate_scale_up_limit(
    current_replicas: int, factor: float = SCALE_UP_LIMIT_FACTOR, minimum: float = SCALE_UP_LIMIT_MINIMUM
) -> int:
    """``calculateScaleUpLimit``: ``int32(max(factor * current, minimum))`` (truncating)."""
    return int(max(factor * float(current_replicas), minimum))


def convert_desired_replicas_with_rules(
    current_replicas: int,
    desired_replicas: int,
    min_replicas: int,
    max_replicas: int,
    factor: float = SCALE_UP_LIMIT_FACTOR,
    minimum: float = SCALE_UP_LIMIT_MINIMUM,
) -> Limited:
    """``convertDesiredReplicasWithRules``: clamp to [min, min(max, scale-up limit)].

    Reasons: ``TooFewReplicas``, ``ScaleUpLimit`` (the factor/minimum cap was lower than max),
    ``TooManyReplicas`` or ``DesiredWithinRange``.
    """
    scale_up_limit = calculate_scale_up_limit(current_replicas, factor, minimum)
    if max_replicas > scale_up_limit:
        maximum, reason, message = scale_up_limit, "ScaleUpLimit", MSG_SCALE_UP_LIMIT
    else:
        maximum, reason, message = max_replicas, "TooManyReplicas", MSG_TOO_MANY
    if desired_replicas < min_replicas:
        return Limited(min_replicas, "TooFewReplicas", MSG_TOO_FEW)
    if desired_replicas > maximum:
        return Limited(maximum, reason, message)
    return Limited(desired_replicas, "DesiredWithinRange", MSG_WITHIN_RANGE)


# ---------------------------------------------------------------------------------------------
# Behavior path: stabilization
# ---------------------------------------------------------------------------------------------


def stabilize_recommendation_with_behaviors(
    history: Sequence[Recommendation],
    *,
    current_replicas: int,
    desired_replicas: int,
    scale_up_window: float,
    scale_down_window: float,
    now: float,
) -> Stabilized:
    """``stabilizeRecommendationWithBehaviors``.

    The lower bound is the min of ``desired`` and recommendations newer than the scale-up window,
    the upper bound the max of ``desired`` and those newer than the scale-down window; the result
    is ``current`` raised to the lower bound, then capped at the upper bound. ``desired`` is stored,
    reusing the last slot older than both windows.
    """
    up_rec = desired_replicas
    down_rec = desired_replicas
    up_cutoff = now - scale_up_window
    down_cutoff = now - scale_down_window
    old_index: int | None = None
    for i, rec in enumerate(history):
        if rec.timestamp > up_cutoff:
            up_rec = min(rec.replicas, up_rec)
        if rec.timestamp > down_cutoff:
            down_rec = max(rec.replicas, down_rec)
        if rec.timestamp < up_cutoff and rec.timestamp < down_cutoff:
            old_index = i
    recommendation = current_replicas
    recommendation = max(recommendation, up_rec)
    recommendation = min(recommendation, down_rec)
    new_history = _store(history, old_index, Recommendation(desired_replicas, now))
    if desired_replicas >= current_replicas:
        return Stabilized(recommendation, "ScaleUpStabilized", MSG_SCALE_UP_STABILIZED, new_history)
    return Stabilized(recommendation, "ScaleDownStabilized", MSG_SCALE_DOWN_STABILIZED, new_history)


def _store(history: Sequence[Recommendation], index: int | None, entry: Recommendation) -> tuple[Recommendation, ...]:
    items = list(history)
    if index is None:
        items.append(entry)
    else:
        items[index] = entry
    return tuple(items)


# ---------------------------------------------------------------------------------------------
# Behavior path: rate limits
# ---------------------------------------------------------------------------------------------


def replicas_change_per_period(period_seconds: float, events: Sequence[ScaleEvent], now: float) -> int:
    """``getReplicasChangePerPeriod``: the sum of changes strictly newer than ``now - period``."""
    cutoff = now - period_seconds
    return sum(e.replica_change for e in events if e.timestamp > cutoff)


def _period_start(
    current_replicas: int,
    period_seconds: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: float,
) -> int:
    # The replica count at the start of the policy's period: undo the ups, add back the downs.
    added = replicas_change_per_period(period_seconds, up_events, now)
    removed = replicas_change_per_period(period_seconds, down_events, now)
    return current_replicas - added + removed


def scale_up_limit_with_rules(
    current_replicas: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: float,
) -> int:
    """``calculateScaleUpLimitWithScalingRules``: the most replicas the scale-up policies allow now.

    Pods: period start + value; Percent: ``ceil(period start * (1 + value/100))``. ``Max`` picks the
    largest proposal, ``Min`` the smallest, ``Disabled`` returns ``current_replicas``.
    """
    if rules.select_policy == "Disabled":
        return current_replicas
    pick_min = rules.select_policy == "Min"
    result = MAX_INT32 if pick_min else MIN_INT32
    for policy in rules.policies:
        start = _period_start(current_replicas, policy.period_seconds, up_events, down_events, now)
        if policy.type == "Pods":
            proposed = start + policy.value
        else:
            # Rounded up so that a small percentage still lets a small deployment grow.
            proposed = math.ceil(float(start) * (1 + float(policy.value) / 100))
        result = min(result, proposed) if pick_min else max(result, proposed)
    return result


def scale_down_limit_with_rules(
    current_replicas: int,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    rules: ScalingRules,
    now: float,
) -> int:
    """``calculateScaleDownLimitWithBehaviors``: the fewest replicas the scale-down policies allow now.

    Pods: period start - value; Percent: ``int32(period start * (1 - value/100))`` (truncation).
    ``Max`` picks the largest change (smallest count), ``Min`` the smallest change, ``Disabled``
    returns ``current_replicas``.
    """
    if rules.select_policy == "Disabled":
        return current_replicas
    pick_max = rules.select_policy == "Min"
    result = MIN_INT32 if pick_max else MAX_INT32
    for policy in rules.policies:
        start = _period_start(current_replicas, policy.period_seconds, up_events, down_events, now)
        if policy.type == "Pods":
            proposed = start - policy.value
        else:
            proposed = int(float(start) * (1 - float(policy.value) / 100))
        result = max(result, proposed) if pick_max else min(result, proposed)
    return result


def convert_desired_replicas_with_behavior_rate(
    *,
    current_replicas: int,
    desired_replicas: int,
    min_replicas: int,
    max_replicas: int,
    scale_up: ScalingRules,
    scale_down: ScalingRules,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    now: float,
) -> Limited:
    """``convertDesiredReplicasWithBehaviorRate``: apply the policies, then min/max replicas.

    A limit that would move against the requested direction is pinned to ``current_replicas``.
    Reasons: ``ScaleUpLimit``/``TooManyReplicas`` when scaling up, ``ScaleDownLimit``/``TooFewReplicas``
    when scaling down, else ``DesiredWithinRange``. The legacy 2x/4 cap is not applied here.
    """
    if desired_replicas > current_replicas:
        limit = scale_up_limit_with_rules(current_replicas, up_events, down_events, scale_up, now)
        limit = max(limit, current_replicas)
        if max_replicas > limit:
            maximum, reason, message = limit, "ScaleUpLimit", MSG_SCALE_UP_LIMIT
        else:
            maximum, reason, message = max_replicas, "TooManyReplicas", MSG_TOO_MANY
        if desired_replicas > maximum:
            return Limited(maximum, reason, message)
    elif desired_replicas < current_replicas:
        limit = scale_down_limit_with_rules(current_replicas, up_events, down_events, scale_down, now)
        limit = min(limit, current_replicas)
        if min_replicas < limit:
            minimum, reason, message = limit, "ScaleDownLimit", MSG_SCALE_DOWN_LIMIT
        else:
            minimum, reason, message = min_replicas, "TooFewReplicas", MSG_TOO_FEW
        if desired_replicas < minimum:
            return Limited(minimum, reason, message)
    return Limited(desired_replicas, "DesiredWithinRange", MSG_WITHIN_RANGE)


# ---------------------------------------------------------------------------------------------
# Scale-event bookkeeping
# ---------------------------------------------------------------------------------------------


def mark_scale_events_outdated(
    events: Sequence[ScaleEvent], longest_period_seconds: float, now: float
) -> tuple[ScaleEvent, ...]:
    """``markScaleEventsOutdated``: flag events strictly older than the longest policy period.

    The flag is sticky: an event once outdated stays outdated until its slot is reused.
    """
    cutoff = now - longest_period_seconds
    return tuple(replace(e, outdated=True) if e.timestamp < cutoff else e for e in events)


def _store_event(events: Sequence[ScaleEvent], rules: ScalingRules, change: int, now: float) -> tuple[ScaleEvent, ...]:
    marked = list(mark_scale_events_outdated(events, rules.longest_policy_period(), now))
    old_index: int | None = None
    for i, event in enumerate(marked):
        if event.outdated:
            old_index = i
    new_event = ScaleEvent(change, now, False)
    if old_index is None:
        marked.append(new_event)
    else:
        marked[old_index] = new_event
    return tuple(marked)


def store_scale_event(
    behavior: Behavior | None,
    up_events: Sequence[ScaleEvent],
    down_events: Sequence[ScaleEvent],
    prev_replicas: int,
    new_replicas: int,
    now: float,
) -> tuple[tuple[ScaleEvent, ...], tuple[ScaleEvent, ...]]:
    """``storeScaleEvent``: record a rescale as (up events, down events); nothing without behavior.

    A scale-up stores ``new - prev`` among the up events, anything else ``prev - new`` among the down
    events; the last outdated slot of that list (see ``mark_scale_events_outdated``, using the
    direction's longest policy period) is reused, otherwise the event is appended.
    """
    if behavior is None:
        return tuple(up_events), tuple(down_events)
    if new_replicas > prev_replicas:
        return _store_event(up_events, behavior.scale_up, new_replicas - prev_replicas, now), tuple(down_events)
    return tuple(up_events), _store_event(down_events, behavior.scale_down, prev_replicas - new_replicas, now)
