"""Every alert has a runbook: its ``runbook_url`` names a heading of docs/runbooks.md (GitHub's anchors).

The base URL is defined once: the chart's ``prometheusRule.runbookBaseURL`` default, which the rules file (and
the PrometheusRule generated from it) use verbatim.
"""

from __future__ import annotations

import re
import unicodedata

import yaml

from tests.support import artifacts
from tests.support.chart import CHART
from tests.support.manifests import REPO

RUNBOOKS = REPO / "docs" / "runbooks.md"


def github_anchor(heading: str, seen: dict[str, int]) -> str:
    """The anchor GitHub gives a Markdown heading: lower case, punctuation dropped (word characters, spaces and
    hyphens kept), spaces to hyphens, and ``-1``, ``-2``... on repeats (github/cmark-gfm's toc filter,
    as github-slugger reimplements it)."""
    text = re.sub(r"`|\*\*|__|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    slug = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LNM").replace(" ", "-")
    n = seen.get(slug, 0)
    seen[slug] = n + 1
    return slug if n == 0 else f"{slug}-{n}"


def anchors(markdown: str) -> list[str]:
    """The anchors of every ATX heading outside fenced code blocks."""
    seen: dict[str, int] = {}
    out, fenced = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)):
            out.append(github_anchor(m.group(1), seen))
    return out


def _alerts() -> list[dict[str, object]]:
    groups = yaml.safe_load(artifacts.RULES.read_text(encoding="utf-8"))["groups"]
    return [r for g in groups for r in g["rules"] if "alert" in r]


def test_anchor_rules() -> None:
    seen: dict[str, int] = {}
    assert github_anchor("LLMHPAAdapterBackendUnreachable", seen) == "llmhpaadapterbackendunreachable"
    assert github_anchor("Looking at the adapter", seen) == "looking-at-the-adapter"
    assert github_anchor("TLS: a Secret, or cert-manager", seen) == "tls-a-secret-or-cert-manager"
    assert github_anchor("`helm test` and `kubectl`", seen) == "helm-test-and-kubectl"
    assert github_anchor("Looking at the adapter", seen) == "looking-at-the-adapter-1"
    assert anchors("# A\n```sh\n# not a heading\n```\n## B c\n") == ["a", "b-c"]


def test_every_alert_has_a_runbook_that_resolves() -> None:
    base = yaml.safe_load((CHART / "values.yaml").read_text())["prometheusRule"]["runbookBaseURL"]
    assert base.endswith("/docs/runbooks.md")
    headings = set(anchors(RUNBOOKS.read_text(encoding="utf-8")))
    alerts = _alerts()
    assert len(alerts) >= 8
    for rule in alerts:
        url = rule["annotations"]["runbook_url"]  # type: ignore[index]
        page, _, anchor = url.partition("#")
        assert page == base, url
        assert anchor in headings, f"{rule['alert']}: no heading #{anchor} in docs/runbooks.md"
        assert anchor == str(rule["alert"]).lower(), "one section per alert, named after it"


def test_every_runbook_section_has_its_three_parts() -> None:
    text = RUNBOOKS.read_text(encoding="utf-8")
    names = [str(r["alert"]) for r in _alerts()]
    sections = re.split(r"^## ", text, flags=re.MULTILINE)
    by_name = {s.splitlines()[0].strip(): s for s in sections[1:]}
    assert set(names) <= set(by_name)
    for name in names:
        body = by_name[name]
        for part in ("**What it means.**", "**What to look at.**", "**What to do.**"):
            assert part in body, (name, part)
        # Each points at the adapter's own series or the commands that show the cause.
        assert "llm_hpa_adapter_" in body or "kubectl" in body or "python -m adapter" in body, name
