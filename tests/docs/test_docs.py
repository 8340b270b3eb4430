"""The documentation holds together: README.md is a front page under 300 lines that links every page of docs/,
every relative link in README.md, docs/ and benchmarks/README.md points at a file that exists (and, with a
``#fragment``, at one of its headings), and the pages describe the product as it is, not its history."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from adapter.__main__ import build_parser

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
DOCS = REPO / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md")), REPO / "benchmarks" / "README.md"]

_FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _prose(text: str) -> str:
    """The text without fenced blocks and inline code (a link shown as code is not a link)."""
    return _CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but ``-`` and ``_`` dropped, spaces to ``-``."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a markdown file, duplicates numbered as GitHub numbers them."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _FENCE.sub("", path.read_text()).splitlines():
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        base = slug(m.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    """The relative link targets of a page (web and mail links left out)."""
    return [t for t in _LINK.findall(_prose(path.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


def test_slug_follows_github() -> None:
    assert slug("The boost's bound") == "the-boosts-bound"
    assert slug("1,000 HPAs: sustained load, burst, memory") == "1000-hpas-sustained-load-burst-memory"
    assert slug("`/livez` during a big refresh") == "livez-during-a-big-refresh"
    assert slug("Why is my HPA at maxReplicas?") == "why-is-my-hpa-at-maxreplicas"


def test_readme_is_a_front_page_under_300_lines() -> None:
    assert len(README.read_text().splitlines()) < 300


def test_every_docs_page_is_linked_from_the_readme() -> None:
    linked = {(README.parent / unquote(t.split("#")[0])).resolve() for t in links(README) if t.split("#")[0]}
    pages = sorted(DOCS.glob("*.md"))
    assert pages
    missing = [p.name for p in pages if p.resolve() not in linked]
    assert not missing, f"README.md does not link {missing}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for target in links(page):
        file_part, _, fragment = target.partition("#")
        dest = (page.parent / unquote(file_part)).resolve() if file_part else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest):
            broken.append(f"{target}: no heading #{fragment} in {dest.relative_to(REPO)}")
    assert not broken, broken


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_lines_fit_120_columns_outside_tables(page: Path) -> None:
    long = [
        n for n, line in enumerate(page.read_text().splitlines(), 1) if len(line) > 120 and not line.startswith("|")
    ]
    assert not long, f"lines longer than 120 characters: {long}"


# Words that narrate the product's past ("the previous rule", "before this round", "was X, now Y").
_HISTORY = re.compile(
    r"\b(previous(ly)?|earlier (round|version|run|rule)|this round|no longer|used to be|formerly)\b", re.IGNORECASE
)


@pytest.mark.parametrize("page", [README, *sorted(DOCS.glob("*.md"))], ids=lambda p: str(p.relative_to(REPO)))
def test_pages_describe_the_product_as_it_is(page: Path) -> None:
    found = [line.strip() for line in page.read_text().splitlines() if _HISTORY.search(line)]
    assert not found, found


def test_the_readme_shows_the_example_hpa_as_it_is() -> None:
    """The README's YAML excerpt is the example HPA's metrics and behavior, value for value."""
    blocks = re.findall(r"^```yaml\n(.*?)^```", README.read_text(), re.DOTALL | re.MULTILINE)
    assert len(blocks) == 1
    excerpt = yaml.safe_load(textwrap.dedent(blocks[0]))
    spec = yaml.safe_load((REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml").read_text())["spec"]
    assert excerpt == {"metrics": spec["metrics"], "behavior": spec["behavior"]}


def test_the_configuration_page_documents_every_serve_flag(capsys: pytest.CaptureFixture[str]) -> None:
    page = (DOCS / "configuration.md").read_text()
    serve = build_parser()._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    flags = [opt for action in serve._actions for opt in action.option_strings if opt.startswith("--")]
    assert len(flags) > 30
    missing = [f for f in flags if f != "--help" and f"`{f}" not in page]
    assert not missing, f"docs/configuration.md does not document {missing}"


def test_every_make_target_the_readme_names_exists() -> None:
    targets = set(re.findall(r"^([a-z][a-z-]*):", (REPO / "Makefile").read_text(), re.MULTILINE))
    named = set(re.findall(r"\bmake ([a-z][a-z-]*)", README.read_text()))
    assert {"demo", "test"} <= named
    assert named <= targets, named - targets
