"""An autoscaling/v2 HorizontalPodAutoscaler as frozen dataclasses, with upstream defaulting.

Defaults follow kubernetes/kubernetes ``pkg/apis/autoscaling/v2/defaults.go``:

* ``minReplicas`` nil -> 1; no metrics -> one Resource metric, cpu, 80 % average utilization
  (``SetDefaults_HorizontalPodAutoscaler``).
* ``behavior`` is defaulted only when it is non-nil, rule by rule and field by field
  (``GenerateHPAScaleUpRules`` / ``GenerateHPAScaleDownRules`` -> ``copyHPAScalingRules``): a field
  given by the user replaces the default, an absent one keeps it. ``policies: []`` is *given* (it is
  a non-nil empty list) and therefore replaces the default policies.
* The scale-down stabilization window stays ``None`` when unset; the controller substitutes its
  ``--horizontal-pod-autoscaler-downscale-stabilization`` flag (300 s) at reconcile time
  (horizontal.go ``maybeInitScaleDownStabilizationWindow``).

Metric targets are Quantity strings in manifests; they are kept here as the ``MilliValue()`` the
controller uses (horizontal.go passes ``Target.X.MilliValue()`` to the replica calculator).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal, cast

import yaml

from adapter.errors import ConfigError
from adapter.quantity import milli_value, parse_quantity

MetricSourceType = Literal["Pods", "Object", "External", "Resource", "ContainerResource"]
TargetType = Literal["Value", "AverageValue", "Utilization"]
SelectPolicy = Literal["Max", "Min", "Disabled"]
PolicyType = Literal["Pods", "Percent"]

METRIC_SOURCE_TYPES: tuple[str, ...] = ("Pods", "Object", "External", "Resource", "ContainerResource")
TARGET_TYPES: tuple[str, ...] = ("Value", "AverageValue", "Utilization")
SELECT_POLICIES: tuple[str, ...] = ("Max", "Min", "Disabled")
POLICY_TYPES: tuple[str, ...] = ("Pods", "Percent")

# kubernetes/kubernetes pkg/apis/autoscaling (DefaultCPUUtilization) via defaults.go.
DEFAULT_CPU_UTILIZATION = 80


class HPASpecError(ConfigError):
    """A HorizontalPodAutoscaler manifest that cannot be modelled; the message names the bad field."""


@dataclass(frozen=True)
class ObjectReference:
    """``CrossVersionObjectReference``: the scale target or an Object metric's described object."""

    kind: str
    name: str
    api_version: str = ""


@dataclass(frozen=True)
class MetricTarget:
    """``MetricTarget`` with quantities already reduced to milli-values (``Quantity.MilliValue()``).

    ``type`` is what the manifest said; which value the controller reads depends on the source type
    (e.g. External looks at ``average_value_milli`` first whatever ``type`` says, as upstream does).
    """

    type: TargetType
    value_milli: int | None = None
    average_value_milli: int | None = None
    average_utilization: int | None = None

    def __post_init__(self) -> None:
        # kubernetes/kubernetes pkg/apis/autoscaling/validation/validation.go validateMetricTarget:
        # value and averageValue "must be positive", averageUtilization "must be greater than 0".
        for label, amount in (
            ("value", self.value_milli),
            ("averageValue", self.average_value_milli),
            ("averageUtilization", self.average_utilization),
        ):
            if amount is not None and amount <= 0:
                raise HPASpecError(f"target {label} must be positive, got {amount}")


@dataclass(frozen=True)
class MetricSpec:
    """One entry of ``spec.metrics``.

    ``name`` is the metric name, or the resource name (``cpu``, ``memory``) for Resource and
    ContainerResource metrics. ``selector`` is the metric label selector as written (informational:
    the model receives already-selected values).
    """

    type: MetricSourceType
    name: str
    target: MetricTarget
    described_object: ObjectReference | None = None
    container: str | None = None
    selector: Mapping[str, Any] | None = field(default=None, hash=False)

    def describe(self) -> str:
        """A short human label, e.g. ``Pods/llm_load`` or ``Object(Deployment/web)/qps``."""
        if self.type == "Object" and self.described_object is not None:
            return f"Object({self.described_object.kind}/{self.described_object.name})/{self.name}"
        if self.type == "ContainerResource":
            return f"ContainerResource({self.container})/{self.name}"
        return f"{self.type}/{self.name}"


@dataclass(frozen=True)
class ScalingPolicy:
    """``HPAScalingPolicy``: at most ``value`` pods (or percent) per ``period_seconds``."""

    type: PolicyType
    value: int
    period_seconds: int


@dataclass(frozen=True)
class PartialScalingRules:
    """``HPAScalingRules`` as written by a user: ``None`` means the field was absent (a nil pointer)."""

    stabilization_window_seconds: int | None = None
    select_policy: SelectPolicy | None = None
    policies: tuple[ScalingPolicy, ...] | None = None
    tolerance: float | None = None


@dataclass(frozen=True)
class ScalingRules:
    """Fully defaulted ``HPAScalingRules``.

    ``stabilization_window_seconds`` is ``None`` only for scale-down rules whose window was not set:
    the controller then uses its downscale stabilization flag. ``tolerance`` ``None`` means "use the
    controller-wide tolerance" (the per-HPA field is feature-gated upstream, ``HPAConfigurableTolerance``).
    """

    stabilization_window_seconds: int | None
    select_policy: SelectPolicy
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None

    def longest_policy_period(self) -> int:
        """horizontal.go ``getLongestPolicyPeriod``: 0 when there are no policies."""
        return max((p.period_seconds for p in self.policies), default=0)


# defaults.go: defaultHPAScaleUpRules / defaultHPAScaleDownRules.
DEFAULT_SCALE_UP_RULES = ScalingRules(
    stabilization_window_seconds=0,
    select_policy="Max",
    policies=(ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)),
)
DEFAULT_SCALE_DOWN_RULES = ScalingRules(
    stabilization_window_seconds=None,
    select_policy="Max",
    policies=(ScalingPolicy("Percent", 100, 15),),
)


def _copy_rules(given: PartialScalingRules | None, defaults: ScalingRules) -> ScalingRules:
    # defaults.go copyHPAScalingRules: every non-nil field of the user's rules wins, one by one.
    if given is None:
        return defaults
    return ScalingRules(
        stabilization_window_seconds=(
            given.stabilization_window_seconds
            if given.stabilization_window_seconds is not None
            else defaults.stabilization_window_seconds
        ),
        select_policy=given.select_policy if given.select_policy is not None else defaults.select_policy,
        policies=given.policies if given.policies is not None else defaults.policies,
        tolerance=given.tolerance if given.tolerance is not None else defaults.tolerance,
    )


def generate_scale_up_rules(given: PartialScalingRules | None) -> ScalingRules:
    """defaults.go ``GenerateHPAScaleUpRules``: the user's scale-up rules with defaults filled in."""
    return _copy_rules(given, DEFAULT_SCALE_UP_RULES)


def generate_scale_down_rules(given: PartialScalingRules | None) -> ScalingRules:
    """defaults.go ``GenerateHPAScaleDownRules``: like scale-up, but the window may stay ``None``."""
    return _copy_rules(given, DEFAULT_SCALE_DOWN_RULES)


@dataclass(frozen=True)
class Behavior:
    """A defaulted ``spec.behavior`` (both directions always present once behavior is non-nil)."""

    scale_up: ScalingRules
    scale_down: ScalingRules

    @classmethod
    def from_partial(
        cls, scale_up: PartialScalingRules | None = None, scale_down: PartialScalingRules | None = None
    ) -> Behavior:
        """Apply ``SetDefaults_HorizontalPodAutoscalerBehavior`` to a non-nil behavior."""
        return cls(generate_scale_up_rules(scale_up), generate_scale_down_rules(scale_down))


def _default_metrics() -> tuple[MetricSpec, ...]:
    return (
        MetricSpec(
            type="Resource",
            name="cpu",
            target=MetricTarget(type="Utilization", average_utilization=DEFAULT_CPU_UTILIZATION),
        ),
    )


@dataclass(frozen=True)
class HPASpec:
    """The parts of an autoscaling/v2 HPA the controller reads, defaulted as the API server would.

    An empty ``metrics`` becomes the default cpu-utilization metric (defaults.go). ``behavior``
    ``None`` selects the legacy normalization path (horizontal.go ``normalizeDesiredReplicas``).
    """

    max_replicas: int
    metrics: tuple[MetricSpec, ...] = ()
    min_replicas: int = 1
    behavior: Behavior | None = None
    name: str = "hpa"
    namespace: str = "default"
    scale_target: ObjectReference = ObjectReference(kind="Deployment", name="", api_version="apps/v1")

    def __post_init__(self) -> None:
        if not self.metrics:
            object.__setattr__(self, "metrics", _default_metrics())
        else:
            object.__setattr__(self, "metrics", tuple(self.metrics))
        if self.max_replicas < 1:
            raise HPASpecError(f"spec.maxReplicas must be >= 1, got {self.max_replicas}")
        if self.min_replicas < 0:
            raise HPASpecError(f"spec.minReplicas must be >= 0, got {self.min_replicas}")
        if self.min_replicas > self.max_replicas:
            raise HPASpecError(
                f"spec.minReplicas ({self.min_replicas}) must be <= spec.maxReplicas ({self.max_replicas})"
            )


# ---------------------------------------------------------------------------------------------
# Manifest parsing
# ---------------------------------------------------------------------------------------------

_ACCEPTED_API_VERSIONS = ("autoscaling/v2", "autoscaling/v2beta2")


def _require_mapping(value: object, where: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise HPASpecError(f"{where} must be a mapping, got {type(value).__name__}")
    return cast(Mapping[str, Any], value)


def _int_field(obj: Mapping[str, Any], key: str, where: str) -> int | None:
    if obj.get(key) is None:
        return None
    value = obj[key]
    # bool is an int subclass in Python; a YAML "true" is never a replica count.
    if isinstance(value, bool) or not isinstance(value, int):
        raise HPASpecError(f"{where}.{key} must be an integer, got {value!r}")
    return value


def _required_int(obj: Mapping[str, Any], key: str, where: str) -> int:
    value = _int_field(obj, key, where)
    if value is None:
        raise HPASpecError(f"{where}.{key} is required")
    return value


def _quantity(raw: object, where: str) -> Decimal:
    # YAML turns `averageValue: 1` into an int and `0.5` into a float; the API server's Quantity
    # unmarshaller accepts a bare JSON number too (apimachinery quantity.go UnmarshalJSON).
    if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
        raise HPASpecError(f"{where} must be a Quantity string, got {raw!r}")
    try:
        return parse_quantity(str(raw).strip())
    except (ValueError, ArithmeticError) as exc:
        raise HPASpecError(f"{where}: invalid Quantity {raw!r}: {exc}") from exc


def _quantity_milli(raw: object, where: str) -> int:
    return milli_value(_quantity(raw, where))


def _parse_target(raw: object, where: str) -> MetricTarget:
    obj = _require_mapping(raw, where)
    kind = obj.get("type")
    if kind not in TARGET_TYPES:
        raise HPASpecError(f"{where}.type must be one of {', '.join(TARGET_TYPES)}, got {kind!r}")
    value = _quantity_milli(obj["value"], f"{where}.value") if obj.get("value") is not None else None
    average = (
        _quantity_milli(obj["averageValue"], f"{where}.averageValue") if obj.get("averageValue") is not None else None
    )
    utilization = _int_field(obj, "averageUtilization", where)
    return MetricTarget(
        type=cast(TargetType, kind),
        value_milli=value,
        average_value_milli=average,
        average_utilization=utilization,
    )


def _parse_identifier(raw: object, where: str) -> tuple[str, Mapping[str, Any] | None]:
    obj = _require_mapping(raw, where)
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise HPASpecError(f"{where}.name is required")
    selector = obj.get("selector")
    return name, (_require_mapping(selector, f"{where}.selector") if selector is not None else None)


def _parse_object_ref(raw: object, where: str) -> ObjectReference:
    obj = _require_mapping(raw, where)
    kind, name = obj.get("kind"), obj.get("name")
    if not isinstance(kind, str) or not kind or not isinstance(name, str) or not name:
        raise HPASpecError(f"{where} needs kind and name")
    api_version = obj.get("apiVersion", "")
    return ObjectReference(kind=kind, name=name, api_version=str(api_version or ""))


def _parse_metric(raw: object, where: str) -> MetricSpec:
    obj = _require_mapping(raw, where)
    kind = obj.get("type")
    if kind not in METRIC_SOURCE_TYPES:
        raise HPASpecError(f"{where}.type must be one of {', '.join(METRIC_SOURCE_TYPES)}, got {kind!r}")
    source_key = {
        "Pods": "pods",
        "Object": "object",
        "External": "external",
        "Resource": "resource",
        "ContainerResource": "containerResource",
    }[kind]
    source = _require_mapping(obj.get(source_key), f"{where}.{source_key}")
    here = f"{where}.{source_key}"
    target = _parse_target(source.get("target"), f"{here}.target")
    if kind in ("Resource", "ContainerResource"):
        name = source.get("name")
        if not isinstance(name, str) or not name:
            raise HPASpecError(f"{here}.name is required")
        container = source.get("container") if kind == "ContainerResource" else None
        if kind == "ContainerResource" and (not isinstance(container, str) or not container):
            raise HPASpecError(f"{here}.container is required")
        return MetricSpec(
            type=cast(MetricSourceType, kind),
            name=name,
            target=target,
            container=cast("str | None", container),
        )
    name, selector = _parse_identifier(source.get("metric"), f"{here}.metric")
    described = (
        _parse_object_ref(source.get("describedObject"), f"{here}.describedObject") if kind == "Object" else None
    )
    return MetricSpec(
        type=cast(MetricSourceType, kind),
        name=name,
        target=target,
        described_object=described,
        selector=selector,
    )


def _parse_rules(raw: object, where: str) -> PartialScalingRules | None:
    if raw is None:
        return None
    obj = _require_mapping(raw, where)
    select = obj.get("selectPolicy")
    if select is not None and select not in SELECT_POLICIES:
        raise HPASpecError(f"{where}.selectPolicy must be one of {', '.join(SELECT_POLICIES)}, got {select!r}")
    window = _int_field(obj, "stabilizationWindowSeconds", where)
    if window is not None and not 0 <= window <= 3600:
        # kubernetes/api autoscaling/v2 types.go HPAScalingRules: 0 <= window <= 3600.
        raise HPASpecError(f"{where}.stabilizationWindowSeconds must be within 0..3600, got {window}")
    policies: tuple[ScalingPolicy, ...] | None = None
    if obj.get("policies") is not None:
        raw_policies = obj["policies"]
        if not isinstance(raw_policies, Sequence) or isinstance(raw_policies, (str, bytes)):
            raise HPASpecError(f"{where}.policies must be a list")
        parsed: list[ScalingPolicy] = []
        for i, item in enumerate(raw_policies):
            pwhere = f"{where}.policies[{i}]"
            pobj = _require_mapping(item, pwhere)
            ptype = pobj.get("type")
            if ptype not in POLICY_TYPES:
                raise HPASpecError(f"{pwhere}.type must be Pods or Percent, got {ptype!r}")
            value = _required_int(pobj, "value", pwhere)
            period = _required_int(pobj, "periodSeconds", pwhere)
            if value <= 0:
                raise HPASpecError(f"{pwhere}.value must be > 0, got {value}")
            if not 0 < period <= 1800:
                # kubernetes/api autoscaling/v2 types.go HPAScalingPolicy: 0 < periodSeconds <= 1800.
                raise HPASpecError(f"{pwhere}.periodSeconds must be within 1..1800, got {period}")
            parsed.append(ScalingPolicy(cast(PolicyType, ptype), value, period))
        policies = tuple(parsed)
    tolerance: float | None = None
    if obj.get("tolerance") is not None:
        # The controller reads it with Quantity.AsApproximateFloat64 (replica_calculator.go Tolerances).
        tolerance = float(_quantity(obj["tolerance"], f"{where}.tolerance"))
    return PartialScalingRules(
        stabilization_window_seconds=window,
        select_policy=cast("SelectPolicy | None", select),
        policies=policies,
        tolerance=tolerance,
    )


def hpa_from_dict(manifest: Mapping[str, Any]) -> HPASpec:
    """Build an ``HPASpec`` from one autoscaling/v2 HorizontalPodAutoscaler object (a parsed manifest).

    Raises ``HPASpecError`` naming the offending field when the object is not a usable v2 HPA.
    """
    kind = manifest.get("kind")
    if kind != "HorizontalPodAutoscaler":
        raise HPASpecError(f"kind must be HorizontalPodAutoscaler, got {kind!r}")
    api_version = manifest.get("apiVersion")
    if api_version not in _ACCEPTED_API_VERSIONS:
        raise HPASpecError(f"apiVersion must be autoscaling/v2, got {api_version!r}")
    metadata = _require_mapping(manifest.get("metadata") or {}, "metadata")
    spec = _require_mapping(manifest.get("spec"), "spec")
    max_replicas = _required_int(spec, "maxReplicas", "spec")
    min_replicas = _int_field(spec, "minReplicas", "spec")
    raw_metrics = spec.get("metrics") or []
    if not isinstance(raw_metrics, Sequence) or isinstance(raw_metrics, (str, bytes)):
        raise HPASpecError("spec.metrics must be a list")
    metrics = tuple(_parse_metric(m, f"spec.metrics[{i}]") for i, m in enumerate(raw_metrics))
    behavior: Behavior | None = None
    if spec.get("behavior") is not None:
        raw_behavior = _require_mapping(spec["behavior"], "spec.behavior")
        behavior = Behavior.from_partial(
            _parse_rules(raw_behavior.get("scaleUp"), "spec.behavior.scaleUp"),
            _parse_rules(raw_behavior.get("scaleDown"), "spec.behavior.scaleDown"),
        )
    target_raw = spec.get("scaleTargetRef")
    scale_target = (
        _parse_object_ref(target_raw, "spec.scaleTargetRef")
        if target_raw is not None
        else ObjectReference(kind="Deployment", name="", api_version="apps/v1")
    )
    return HPASpec(
        max_replicas=max_replicas,
        metrics=metrics,
        min_replicas=1 if min_replicas is None else min_replicas,
        behavior=behavior,
        name=str(metadata.get("name", "hpa")),
        namespace=str(metadata.get("namespace", "default")),
        scale_target=scale_target,
    )


def load_hpa(source: str | os.PathLike[str] | Mapping[str, Any]) -> HPASpec:
    """Load an HPA from a YAML file path or an already-parsed manifest dict.

    A multi-document YAML file yields its first HorizontalPodAutoscaler document (other kinds such
    as Deployments or Services in the same file are skipped). Raises ``HPASpecError`` when there is
    none or it is malformed, ``OSError`` when the file cannot be read.
    """
    if isinstance(source, Mapping):
        return hpa_from_dict(source)
    path = Path(source)
    with path.open(encoding="utf-8") as fh:
        try:
            documents = list(yaml.safe_load_all(fh))
        except yaml.YAMLError as exc:
            raise HPASpecError(f"{path}: not valid YAML: {exc}") from exc
    for doc in documents:
        if isinstance(doc, Mapping) and doc.get("kind") == "HorizontalPodAutoscaler":
            return hpa_from_dict(cast(Mapping[str, Any], doc))
    raise HPASpecError(f"{path}: no HorizontalPodAutoscaler document found")
