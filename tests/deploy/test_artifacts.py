"""One source per artifact: the rules file and the dashboard JSON are the only hand-edited copies.

kustomize reads the dashboard JSON through ``dashboards/kustomization.yaml`` and ships the PrometheusRule
generated from the rules file (``tests/support/artifacts.py``); the Helm chart reads both sources through
links in ``charts/llm-hpa-adapter/files/``.
"""

from __future__ import annotations

import json
import os
import tomllib

import yaml

from tests.support import artifacts
from tests.support.chart import CHART
from tests.support.manifests import MANIFESTS, REPO, Obj, find, render


def test_generated_prometheusrule_is_current() -> None:
    assert artifacts.PROMETHEUSRULE.read_text(encoding="utf-8") == artifacts.prometheusrule_text(), (
        "apiservice-manifests/prometheusrule.yaml is stale: python -m tests.support.artifacts"
    )
    cr = yaml.safe_load(artifacts.PROMETHEUSRULE.read_text(encoding="utf-8"))
    assert cr["spec"] == yaml.safe_load(artifacts.RULES.read_text(encoding="utf-8"))


def test_kustomize_renders_the_sources(kubectl_path: str) -> None:
    objs: list[Obj] = render(MANIFESTS)
    cm = find(objs, "ConfigMap", "llm-hpa-adapter-dashboard", "llm-hpa-adapter")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["data"] == {"llm-hpa-adapter.json": artifacts.DASHBOARD.read_text(encoding="utf-8")}
    json.loads(cm["data"]["llm-hpa-adapter.json"])
    rule = find(objs, "PrometheusRule", "llm-hpa-adapter", "llm-hpa-adapter")
    assert rule["spec"] == yaml.safe_load(artifacts.RULES.read_text(encoding="utf-8"))


def test_no_second_copy_in_the_tree() -> None:
    # The copies these replace, and any new one: no other file holds the dashboard or the rule groups.
    dashboard = artifacts.DASHBOARD.read_bytes()
    groups = yaml.safe_load(artifacts.RULES.read_text(encoding="utf-8"))["groups"]
    for path in sorted(
        p for d in ("alerts", "dashboards", "apiservice-manifests", "charts") for p in (REPO / d).rglob("*")
    ):
        if path.is_symlink() or not path.is_file() or path in (artifacts.DASHBOARD, artifacts.RULES):
            continue
        assert path.read_bytes() != dashboard, path
        if path.suffix == ".yaml" and path != artifacts.PROMETHEUSRULE and "templates" not in path.parts:
            for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
                assert not (isinstance(doc, dict) and doc.get("groups") == groups), path
                assert not (isinstance(doc, dict) and doc.get("spec", {}) == {"groups": groups}), path


def test_files_are_links_to_the_one_source() -> None:
    sources = {
        "catalog.yaml": REPO / "adapter" / "catalog.yaml",
        "llm-hpa-adapter.json": artifacts.DASHBOARD,
        "llm-hpa-adapter.rules.yaml": artifacts.RULES,
    }
    files = CHART / "files"
    assert {p.name for p in files.iterdir()} == set(sources)
    for name, source in sources.items():
        link = files / name
        assert link.is_symlink() and not os.path.isabs(os.readlink(link)), link
        assert link.resolve() == source.resolve()


def test_chart_version_is_the_package_version() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert chart["version"] == chart["appVersion"] == version
