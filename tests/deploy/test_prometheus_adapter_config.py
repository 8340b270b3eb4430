"""prometheus-adapter's ConfigMap mounted: the kustomize Component and the chart's ``prometheusAdapterConfig``.

The Component (``apiservice-manifests/components/prometheus-adapter-config``) and the chart value
``existingConfigMap: prometheus-adapter`` render the same Deployment; its args are ones ``serve`` parses, and the
file they name is the ConfigMap's ``config.yaml``. Inline ``rules``/``externalRules`` render a ConfigMap whose
file the rules parser reads as the values gave it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from adapter.__main__ import build_parser
from adapter.promadapter.config import parse_config
from tests.deploy.test_chart import _normal
from tests.support.binaries import require_binary
from tests.support.chart import CHART, NAMESPACE, RELEASE, helm_run, template
from tests.support.manifests import MANIFESTS, Obj, check_object, find, render, with_components

pytestmark = pytest.mark.binary("kubectl")
NAME = "llm-hpa-adapter"
COMPONENT = MANIFESTS / "components" / "prometheus-adapter-config"
DATA = Path(__file__).parents[1] / "promadapter" / "data"


def with_component(tmp_path: Path) -> list[Obj]:
    return render(with_components(MANIFESTS, [COMPONENT], tmp_path))


def rules_file(deployment: Obj) -> tuple[str, dict[str, Any]]:
    """The file --prometheus-adapter-config names, and the volume that holds it."""
    pod = deployment["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    args = build_parser().parse_args(container["args"])
    path = args.prometheus_adapter_config
    assert args.metrics_relist_interval == "1m"
    directory = path.rpartition("/")[0]
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == directory]
    assert mount["readOnly"] is True
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return path, volume


def test_the_component_mounts_prometheus_adapters_configmap(tmp_path: Path, kubectl_path: str) -> None:
    objs = with_component(tmp_path)
    for obj in objs:
        check_object(obj)
    path, volume = rules_file(find(objs, "Deployment", NAME, NAME))
    assert path == "/etc/prometheus-adapter/config.yaml"  # the key prometheus-adapter's chart writes
    assert volume["configMap"] == {"name": "prometheus-adapter"}  # the name its chart gives it by default


def test_the_chart_value_renders_the_deployment_of_the_component(tmp_path: Path, kubectl_path: str) -> None:
    base = find(with_component(tmp_path), "Deployment", NAME, NAMESPACE)
    values = {"prometheusAdapterConfig": {"existingConfigMap": "prometheus-adapter", "metricsRelistInterval": "1m"}}
    chart = find(template(require_binary("helm"), values, tmp_path), "Deployment", NAME, NAMESPACE)
    assert _normal(chart)["spec"] == _normal(base)["spec"]


def test_the_chart_grants_the_lists_of_the_component(tmp_path: Path, kubectl_path: str) -> None:
    """``*`` on Services, Jobs... lists them from the API: both grant the adapter list on them, the same rules."""
    base = with_component(tmp_path)
    name = f"{NAME}-rule-objects-reader"
    role = find(base, "ClusterRole", name)
    binding = find(base, "ClusterRoleBinding", name)
    assert binding["roleRef"]["name"] == name
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": NAME, "namespace": NAME}]
    granted = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert {("", "services"), ("apps", "statefulsets"), ("batch", "jobs")} <= granted
    assert all(rule["verbs"] == ["list"] for rule in role["rules"])  # list only: no get, no watch, no write
    helm = require_binary("helm")
    for sub in ("chart", "crd", "none"):
        (tmp_path / sub).mkdir()
    values: dict[str, Any] = {"prometheusAdapterConfig": {"existingConfigMap": "prometheus-adapter"}}
    chart = template(helm, values, tmp_path / "chart")
    assert _normal(find(chart, "ClusterRole", name))["rules"] == _normal(role)["rules"]
    assert _normal(find(chart, "ClusterRoleBinding", name))["roleRef"] == _normal(binding)["roleRef"]
    crd = {"apiGroups": ["serving.kserve.io"], "resources": ["inferenceservices"], "verbs": ["list"]}
    values["prometheusAdapterConfig"]["listRules"] = [crd]
    assert find(template(helm, values, tmp_path / "crd"), "ClusterRole", name)["rules"][-1] == crd
    # Not serving prometheus-adapter's rules: no such grant.
    assert not [o for o in template(helm, None, tmp_path / "none") if o["metadata"]["name"] == name]


def test_inline_rules_render_a_configmap_the_parser_reads(tmp_path: Path) -> None:
    config = yaml.safe_load((DATA / "helm-chart-default-config.yaml").read_text())
    external = [{"seriesQuery": '{__name__="queue_depth",topic!=""}', "metricsQuery": "sum(<<.Series>>) by (topic)"}]
    values = {
        "prometheusAdapterConfig": {"rules": config["rules"], "externalRules": external, "metricsRelistInterval": "1m"}
    }
    objs = template(require_binary("helm"), values, tmp_path)
    for obj in objs:
        check_object(obj)
    path, volume = rules_file(find(objs, "Deployment", NAME, NAMESPACE))
    cm = find(objs, "ConfigMap", volume["configMap"]["name"], NAMESPACE)
    text = cm["data"][path.rpartition("/")[2]]
    parsed = parse_config(text)
    assert [r.series_query for r in parsed.rules] == [r["seriesQuery"] for r in config["rules"]]
    assert [r.metrics_query.source for r in parsed.rules] == [r["metricsQuery"] for r in config["rules"]]
    assert [r.series_query for r in parsed.external_rules] == [external[0]["seriesQuery"]]
    annotations = find(objs, "Deployment", NAME, NAMESPACE)["spec"]["template"]["metadata"]["annotations"]
    assert "checksum/prometheus-adapter-config" in annotations  # a changed file rolls the pods


def test_not_configured_by_default_and_not_both(tmp_path: Path) -> None:
    helm = require_binary("helm")
    pod = find(template(helm, None, tmp_path), "Deployment", NAME, NAMESPACE)["spec"]["template"]["spec"]
    assert not any("prometheus-adapter" in a for a in pod["containers"][0]["args"])
    both = {"prometheusAdapterConfig": {"existingConfigMap": "prometheus-adapter", "rules": [{"seriesQuery": "up"}]}}
    done = helm_run(helm, ["template", RELEASE, str(CHART), "--namespace", NAMESPACE], both, tmp_path)
    assert done.returncode != 0
    assert "set either existingConfigMap or rules/externalRules, not both" in done.stderr
