"""The alert rules have one source, ``alerts/llm-hpa-adapter.rules.yaml`` (a Prometheus rules file); the
kustomize base's ``PrometheusRule`` is generated from it, since kustomize cannot wrap a file into an object's
``spec``. The Helm chart reads the source itself (``charts/llm-hpa-adapter/files/`` links to it), and so does
kustomize for the dashboard (``dashboards/kustomization.yaml``), so neither has a copy.

``python -m tests.support.artifacts`` rewrites the generated file; tests/deploy/test_artifacts.py fails while it
is stale.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "alerts" / "llm-hpa-adapter.rules.yaml"
DASHBOARD = REPO / "dashboards" / "llm-hpa-adapter.json"
PROMETHEUSRULE = REPO / "apiservice-manifests" / "prometheusrule.yaml"
HEADER = """\
# Generated from alerts/llm-hpa-adapter.rules.yaml by `python -m tests.support.artifacts`: edit that file, then
# regenerate (tests/deploy/test_artifacts.py fails while this one is stale).
# The adapter's alerting rules as a PrometheusRule (Prometheus Operator / kube-prometheus-stack).
# kube-prometheus-stack only loads rules whose labels match its ruleSelector (often `release: <name>`):
# add that label in an overlay if yours has one.
"""


def prometheusrule() -> dict[str, Any]:
    """The PrometheusRule carrying the rules file's groups."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": "llm-hpa-adapter",
            "namespace": "llm-hpa-adapter",
            "labels": {"app.kubernetes.io/name": "llm-hpa-adapter"},
        },
        "spec": yaml.safe_load(RULES.read_text(encoding="utf-8")),
    }


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the PromQL) as ``|`` blocks, as they are written in the source."""


def _str(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_Dumper.add_representer(str, _str)


def prometheusrule_text() -> str:
    """``apiservice-manifests/prometheusrule.yaml`` as it should read."""
    body = yaml.dump(prometheusrule(), Dumper=_Dumper, sort_keys=False, width=1 << 16, allow_unicode=True)
    return HEADER + body


if __name__ == "__main__":
    PROMETHEUSRULE.write_text(prometheusrule_text(), encoding="utf-8")
    print(PROMETHEUSRULE.relative_to(REPO))
