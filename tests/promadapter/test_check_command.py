"""``python -m adapter promadapter-check``: a migrating user's first look at a prometheus-adapter file.

Without a URL: the rules, their shared discovery queries and the warnings, or every error naming rule and
field (exit 2). With ``--prometheus-url``: what discovery over the real backend would serve.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from adapter.__main__ import main
from tests.support.backends import Series, TestBackend

DATA = Path(__file__).parent / "data"


def test_the_helm_defaults_load(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["promadapter-check", str(DATA / "helm-chart-default-config.yaml")]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "6 rules, 0 external rules, 2 discovery queries"


def test_an_error_names_rule_and_field_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text("rules:\n- seriesQuery: 'up'\n  name: {matches: '^(a)_(b)$'}\n  metricsQuery: 'x'\n")
    assert main(["promadapter-check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "rules[0] (seriesQuery 'up'): name.as: must be given" in err


def test_a_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["promadapter-check", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml" in capsys.readouterr().err


def test_resource_rules_warn_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("resourceRules:\n  window: 3m\n")
    assert main(["promadapter-check", str(path)]) == 0
    assert "warning: resourceRules: read and not served" in capsys.readouterr().err


def test_with_a_backend_it_lists_what_would_be_served(
    backend: TestBackend, unique_ns: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time())
    samples = [(t, 3.0) for t in range(now - 120, now + 1, 15)]
    backend.load(
        [
            Series({"__name__": "pa_check_depth", "namespace": unique_ns, "deployment": "worker"}, samples),
            Series({"__name__": "pa_check_lag", "namespace": unique_ns, "topic": "t1"}, samples),
        ]
    )
    path = tmp_path / "config.yaml"
    path.write_text(
        f"""rules:
- seriesQuery: '{{__name__="pa_check_depth",namespace="{unique_ns}"}}'
  resources: {{template: "<<.Resource>>"}}
  metricsQuery: 'sum(<<.Series>>{{<<.LabelMatchers>>}}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{{__name__="pa_check_lag",namespace="{unique_ns}"}}'
  name: {{as: "topic_lag"}}
  metricsQuery: 'sum(<<.Series>>{{<<.LabelMatchers>>}})'
"""
    )
    args = ["promadapter-check", str(path), "--prometheus-url", backend.url, "--backend", backend.kind, "--json"]
    assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["custom"] == ["deployments.apps/pa_check_depth", "namespaces/pa_check_depth"]
    assert summary["external"] == ["topic_lag"]


def test_an_unreachable_backend_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("rules:\n- {seriesQuery: 'up', metricsQuery: 'up'}\n")
    assert main(["promadapter-check", str(path), "--prometheus-url", "http://127.0.0.1:9"]) == 1
    assert "discovery failed: backend unreachable" in capsys.readouterr().err
