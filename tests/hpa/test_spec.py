"""Parsing autoscaling/v2 HPA manifests and applying upstream defaults.

Defaulting facts: kubernetes/kubernetes ``pkg/apis/autoscaling/v2/defaults.go``; validation bounds:
kubernetes/api ``autoscaling/v2/types.go`` and ``pkg/apis/autoscaling/validation/validation.go``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from adapter.errors import ConfigError
from adapter.hpa.spec import (
    DEFAULT_SCALE_DOWN_RULES,
    DEFAULT_SCALE_UP_RULES,
    Behavior,
    HPASpec,
    HPASpecError,
    MetricSpec,
    MetricTarget,
    ObjectReference,
    PartialScalingRules,
    ScalingPolicy,
    ScalingRules,
    load_hpa,
)
from tests.support.hpa_design import DESIGN_HPA


def _hpa(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "x"},
        "spec": spec,
    }


def test_design_manifest_from_a_yaml_file(tmp_path: Path) -> None:
    """The design's HPA: given fields verbatim, selectPolicy defaulted to Max (defaults.go)."""
    path = tmp_path / "hpa.yaml"
    path.write_text(DESIGN_HPA)
    hpa = load_hpa(path)
    assert (hpa.name, hpa.namespace, hpa.min_replicas, hpa.max_replicas) == ("vllm", "llm", 1, 40)
    assert hpa.scale_target == ObjectReference("Deployment", "vllm", "apps/v1")
    assert hpa.metrics == (
        MetricSpec("Pods", "llm_composite_load_boosted", MetricTarget("AverageValue", average_value_milli=1000)),
        MetricSpec(
            "Pods", "inference_ttft_p99_guard_seconds_boosted", MetricTarget("AverageValue", average_value_milli=1800)
        ),
        MetricSpec(
            "Pods", "inference_itl_p99_guard_seconds_boosted", MetricTarget("AverageValue", average_value_milli=90)
        ),
    )
    assert hpa.behavior == Behavior(
        scale_up=ScalingRules(60, "Max", (ScalingPolicy("Pods", 2, 30),), tolerance=0.02),
        scale_down=ScalingRules(300, "Max", (ScalingPolicy("Percent", 20, 60),)),
    )
    # The same text as a str path works too.
    assert load_hpa(str(path)) == hpa


def test_no_behavior_means_legacy_path_and_defaults_min_and_metrics() -> None:
    """defaults.go SetDefaults_HorizontalPodAutoscaler: minReplicas 1, cpu 80 % when no metrics;
    behavior stays nil (so the controller uses normalizeDesiredReplicas)."""
    hpa = load_hpa(_hpa({"maxReplicas": 5}))
    assert hpa.behavior is None
    assert hpa.min_replicas == 1
    assert hpa.metrics == (MetricSpec("Resource", "cpu", MetricTarget("Utilization", average_utilization=80)),)


def test_behavior_defaults_are_applied_field_by_field() -> None:
    """defaults.go copyHPAScalingRules: only the fields the user gave replace the defaults; an absent
    direction gets the whole default rule; the scale-down window stays unset (controller flag)."""
    hpa = load_hpa(_hpa({"maxReplicas": 5, "behavior": {"scaleDown": {"selectPolicy": "Min"}}}))
    assert hpa.behavior is not None
    assert hpa.behavior.scale_up == DEFAULT_SCALE_UP_RULES
    assert hpa.behavior.scale_up == ScalingRules(
        0, "Max", (ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15))
    )
    assert hpa.behavior.scale_down == ScalingRules(None, "Min", DEFAULT_SCALE_DOWN_RULES.policies)

    only_window = load_hpa(_hpa({"maxReplicas": 5, "behavior": {"scaleUp": {"stabilizationWindowSeconds": 30}}}))
    assert only_window.behavior is not None
    assert only_window.behavior.scale_up == ScalingRules(30, "Max", DEFAULT_SCALE_UP_RULES.policies)
    assert only_window.behavior.scale_down == ScalingRules(None, "Max", (ScalingPolicy("Percent", 100, 15),))


def test_empty_behavior_object_is_still_non_nil() -> None:
    """``behavior: {}`` is a non-nil behavior: both directions get their defaults (not the legacy path)."""
    hpa = load_hpa(_hpa({"maxReplicas": 5, "behavior": {}}))
    assert hpa.behavior == Behavior(DEFAULT_SCALE_UP_RULES, DEFAULT_SCALE_DOWN_RULES)


def test_empty_policy_list_replaces_the_defaults() -> None:
    """copyHPAScalingRules copies Policies when non-nil: ``policies: []`` is kept empty."""
    hpa = load_hpa(_hpa({"maxReplicas": 5, "behavior": {"scaleUp": {"policies": []}}}))
    assert hpa.behavior is not None
    assert hpa.behavior.scale_up.policies == ()


def test_python_constructor_applies_the_same_defaults() -> None:
    """Behavior.from_partial mirrors SetDefaults_HorizontalPodAutoscalerBehavior for code-built specs."""
    behavior = Behavior.from_partial(scale_down=PartialScalingRules(stabilization_window_seconds=60))
    assert behavior.scale_up == DEFAULT_SCALE_UP_RULES
    assert behavior.scale_down.stabilization_window_seconds == 60
    assert behavior.scale_down.policies == DEFAULT_SCALE_DOWN_RULES.policies
    assert HPASpec(max_replicas=3).metrics[0].name == "cpu"


def test_multi_document_yaml_takes_the_first_hpa(tmp_path: Path) -> None:
    """A manifest bundle: non-HPA documents are skipped and the first HPA wins."""
    first = yaml.safe_load(DESIGN_HPA)
    second = _hpa({"maxReplicas": 7})
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "vllm"}}
    path = tmp_path / "bundle.yaml"
    path.write_text(yaml.safe_dump_all([deployment, None, first, second]))
    assert load_hpa(path).max_replicas == 40


def test_quantity_targets_become_milli_values() -> None:
    """horizontal.go reads targets with Quantity.MilliValue() (ceil(x * 1000))."""
    spec = _hpa(
        {
            "maxReplicas": 5,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": "a"},
                        "target": {"type": "AverageValue", "averageValue": "500m"},
                    },
                },
                {
                    "type": "Pods",
                    "pods": {"metric": {"name": "b"}, "target": {"type": "AverageValue", "averageValue": 2}},
                },
                {
                    "type": "Object",
                    "object": {
                        "describedObject": {"apiVersion": "v1", "kind": "Service", "name": "gw"},
                        "metric": {"name": "c"},
                        "target": {"type": "Value", "value": "0.0001"},
                    },
                },
                {
                    "type": "External",
                    "external": {
                        "metric": {"name": "d", "selector": {"matchLabels": {"queue": "q"}}},
                        "target": {"type": "AverageValue", "averageValue": "1.5k"},
                    },
                },
            ],
        }
    )
    hpa = load_hpa(spec)
    assert [m.target.average_value_milli or m.target.value_milli for m in hpa.metrics] == [
        500,
        2000,
        1,
        1_500_000,
    ]
    assert hpa.metrics[2].described_object == ObjectReference("Service", "gw", "v1")
    assert hpa.metrics[3].selector == {"matchLabels": {"queue": "q"}}


def test_tolerance_is_parsed_as_a_quantity() -> None:
    """HPAScalingRules.tolerance is a Quantity (feature HPAConfigurableTolerance)."""
    hpa = load_hpa(_hpa({"maxReplicas": 5, "behavior": {"scaleDown": {"tolerance": "50m"}}}))
    assert hpa.behavior is not None
    assert hpa.behavior.scale_down.tolerance == pytest.approx(0.05)
    assert hpa.behavior.scale_up.tolerance is None


@pytest.mark.parametrize(
    ("manifest", "message"),
    [
        (
            {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "spec": {"maxReplicas": 1}},
            "apiVersion",
        ),
        ({"apiVersion": "autoscaling/v2", "kind": "Deployment", "spec": {}}, "kind"),
        (_hpa({}), "spec.maxReplicas is required"),
        (_hpa({"maxReplicas": 2, "minReplicas": 3}), "minReplicas"),
        (_hpa({"maxReplicas": "ten"}), "spec.maxReplicas must be an integer"),
        (_hpa({"maxReplicas": 2, "metrics": [{"type": "Cheddar"}]}), r"spec.metrics\[0\].type"),
        (
            _hpa(
                {
                    "maxReplicas": 2,
                    "metrics": [
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {"name": "a"},
                                "target": {"type": "AverageValue", "averageValue": "lots"},
                            },
                        }
                    ],
                }
            ),
            "invalid Quantity",
        ),
        (
            _hpa(
                {
                    "maxReplicas": 2,
                    "metrics": [
                        {
                            "type": "Pods",
                            "pods": {
                                "metric": {"name": "a"},
                                "target": {"type": "AverageValue", "averageValue": "0"},
                            },
                        }
                    ],
                }
            ),
            "must be positive",
        ),
        (_hpa({"maxReplicas": 2, "behavior": {"scaleUp": {"selectPolicy": "Sometimes"}}}), "selectPolicy"),
        (_hpa({"maxReplicas": 2, "behavior": {"scaleUp": {"stabilizationWindowSeconds": 3601}}}), "0..3600"),
        (
            _hpa(
                {
                    "maxReplicas": 2,
                    "behavior": {"scaleUp": {"policies": [{"type": "Pods", "value": 1, "periodSeconds": 1801}]}},
                }
            ),
            "1..1800",
        ),
    ],
)
def test_malformed_manifests_are_rejected_with_the_field_named(manifest: dict[str, Any], message: str) -> None:
    """load_hpa raises HPASpecError (a ConfigError) whose message names the offending field."""
    with pytest.raises(HPASpecError, match=message):
        load_hpa(manifest)
    assert issubclass(HPASpecError, ConfigError)


def test_file_without_an_hpa(tmp_path: Path) -> None:
    """A YAML file with no HorizontalPodAutoscaler document is an error, as is broken YAML."""
    path = tmp_path / "none.yaml"
    path.write_text("apiVersion: v1\nkind: Service\n")
    with pytest.raises(HPASpecError, match="no HorizontalPodAutoscaler"):
        load_hpa(path)
    path.write_text("a: [\n")
    with pytest.raises(HPASpecError, match="not valid YAML"):
        load_hpa(path)
