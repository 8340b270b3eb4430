"""The shipped PrometheusRule carries the plain rules file (the kustomize base's is generated from it; the
dashboard has no copy to compare: tests/deploy/test_artifacts.py renders its ConfigMap).

Each metric the dashboard and the rules use is one the adapter exports (checked against a live registry's
exposition, so a renamed series cannot leave a panel silently empty).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from adapter.aggregate import CompositeValue, TermValue
from adapter.observability import Observability

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "llm-hpa-adapter.rules.yaml"
DASHBOARD = ROOT / "dashboards" / "llm-hpa-adapter.json"
CRS = (ROOT / "apiservice-manifests" / "prometheusrule.yaml",)


def test_prometheusrules_carry_the_plain_rules() -> None:
    plain = yaml.safe_load(RULES.read_text())
    for path in CRS:
        cr = yaml.safe_load(path.read_text())
        assert (cr["apiVersion"], cr["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
        assert cr["metadata"]["name"] == "llm-hpa-adapter"
        assert cr["spec"] == plain, path


def exported_names() -> set[str]:
    """Every sample name the adapter can export, from a registry with one of everything in it."""
    obs = Observability()
    obs.request("selector", "v1beta2", 200, 0.01)
    obs.unknown_metric("x", "pods")
    obs.upstream_query("prometheus", "/api/v1/query", 0.01, "ok")
    term = TermValue("gpu_utilization_p90", 1.0, 1.0, 1.0, 1.0)
    obs.composite_read("ns", "c", {"p-1-a": CompositeValue(1.0, 0.0, (term,), ())}, None)
    text = obs.exposition().decode()
    names = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)", text, re.MULTILINE))
    # Per-workload families appear only with a forecast service; their names come from the HELP lines.
    for family, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        names |= {
            family + s
            for s in {
                "summary": ("_sum", "_count"),
                "counter": ("",),
                "histogram": ("_bucket", "_sum", "_count"),
            }.get(kind, ("",))
        }
    return names


def used_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(llm_hpa_adapter_[a-zA-Z0-9_]+)", expr))


def test_every_series_used_is_exported() -> None:
    names = exported_names()
    dash = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dash["templating"]["list"] if isinstance(v.get("query"), dict)]
    exprs += [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    used = set().union(*(used_names(e) for e in exprs))
    assert used and used <= names, used - names
