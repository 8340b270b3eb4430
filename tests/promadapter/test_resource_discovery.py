"""A cluster's API discovery extends the resource table as prometheus-adapter's RESTMapper would; without it, a
CRD's kind is guessed from its plural (``adapter/promadapter/resources.py``, ``provider/promadapter.py``)."""

from __future__ import annotations

import pytest

from adapter.pods.base import ServedResource
from adapter.promadapter.config import parse_config, with_table
from adapter.promadapter.resources import BUILTIN, GroupResource, guess_kind
from adapter.provider.promadapter import table_with
from tests.promadapter.test_cluster_objects import RULES


@pytest.mark.parametrize(
    ("plural", "kind"),
    [("inferenceservices", "Inferenceservice"), ("policies", "Policy"), ("classes", "Class"), ("foo", "Foo")],
)
def test_a_kind_no_discovery_knows_is_apimachinerys_plural_rule_reversed(plural: str, kind: str) -> None:
    assert guess_kind(plural) == kind


def test_discovery_normalizes_an_override_taken_as_written() -> None:
    """An override giving a CRD's singular is taken as written without discovery, the plural with it."""
    text = RULES.replace("resource: inferenceservices}", "resource: InferenceService}")
    config = parse_config(text)
    (label,) = [k for k in config.rules[0].resources.overrides if k != "namespace"]
    assert config.rules[0].resources.overrides[label] == GroupResource("serving.kserve.io", "inferenceservice")
    crd = ("serving.kserve.io", "v1beta1", "inferenceservices", "inferenceservice", "InferenceService", True)
    served = [ServedResource(*crd)]
    resolved = with_table(config, table_with(BUILTIN, served))
    assert resolved.rules[0].resources.overrides[label] == GroupResource("serving.kserve.io", "inferenceservices")
    isvcs = GroupResource("serving.kserve.io", "inferenceservices")
    assert resolved.rules[1].resources.resource_for_label("inferenceservice") == isvcs
    assert config.rules[1].resources.resource_for_label("inferenceservice") is None
