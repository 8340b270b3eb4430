"""benchmarks/results_page.py: a benchmark rewrites its own marked section of docs/results.md, stamped with the
command line, the commit and the date, and leaves every other byte of the page alone."""

from __future__ import annotations

import datetime as dt
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results.md"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("results_page", REPO / "benchmarks" / "results_page.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


rp = _module()
DAY = dt.date(2026, 12, 2)
PAGE = "# Results\n\nintro\n\n## A\n\n<!-- results:a -->\nold figures\n<!-- /results:a -->\n\nafter `A`\n"


def test_replace_section_swaps_only_the_marked_content() -> None:
    out = rp.replace_section(PAGE, "a", "| x |\n|---|\n| 1 |\n", command="python benchmarks/a.py", commit="abc1234",
                             date=DAY)  # fmt: skip
    assert "old figures" not in out
    before, rest = out.split("<!-- results:a -->\n")
    inside, after = rest.split("<!-- /results:a -->")
    assert before == PAGE.split("<!-- results:a -->\n")[0]
    assert after == PAGE.split("<!-- /results:a -->")[1]
    stamp = "Written by `python benchmarks/a.py`\nat commit `abc1234` on 2026-12-02 (UTC).\n"
    assert inside == stamp + "\n| x |\n|---|\n| 1 |\n"
    # Writing again replaces the written section, it does not nest or append.
    again = rp.replace_section(out, "a", "| y |", command="c", commit="def5678", date=DAY)
    assert again.count("<!-- results:a -->") == 1 and "| x |" not in again and "| y |" in again


@pytest.mark.parametrize(
    "page",
    [
        "no markers at all\n",
        "<!-- results:a -->\nonly the opening one\n",
        "<!-- /results:a -->\n<!-- results:a -->\nclosing first\n",
        "<!-- results:a -->\n<!-- /results:a -->\n<!-- results:a -->\n<!-- /results:a -->\n",
    ],
)
def test_a_page_without_exactly_one_well_formed_section_is_refused(page: str) -> None:
    with pytest.raises(ValueError, match="section 'a'"):
        rp.replace_section(page, "a", "body", command="c", commit="abc1234", date=DAY)


def test_recording_refuses_a_page_without_the_section_before_the_benchmark_runs(tmp_path: Path) -> None:
    page = tmp_path / "results.md"
    page.write_text(PAGE)
    ran = []
    with pytest.raises(ValueError, match="section 'b'"), rp.recording("b", True, "python benchmarks/b.py", page):
        ran.append(True)
    assert ran == [] and page.read_text() == PAGE
    with rp.recording("a", True, "python benchmarks/a.py", page):
        print("| z |")
    assert "| z |" in page.read_text() and "old figures" not in page.read_text()


def test_command_line_drops_only_the_results_flags() -> None:
    argv = ["--samples", "3", "--write-results", "--results-file", "/tmp/x.md", "--seed=2", "--results-file=/y"]
    assert rp.command_line("/abs/benchmarks/forecast_cost.py", argv) == (
        "python benchmarks/forecast_cost.py --samples 3 --seed=2"
    )


def test_every_section_a_benchmark_writes_is_on_the_results_page_once() -> None:
    names = {
        m.group(1)
        for path in (REPO / "benchmarks").glob("*.py")
        for m in re.finditer(r'recording\(\s*"([a-z0-9_]+)"', path.read_text())
    }
    assert {"forecast_accuracy", "forecast_cost", "information_bound"} <= names
    text = RESULTS.read_text()
    for name in names:
        start, end = rp.markers(name)
        assert text.count(start) == 1 and text.count(end) == 1, name
        assert text.index(start) < text.index(end), name


def test_forecast_cost_writes_its_section_stamped_with_this_checkout(tmp_path: Path) -> None:
    page = tmp_path / "results.md"
    original = RESULTS.read_text()
    page.write_text(original)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "benchmarks/forecast_cost.py", "--samples", "3", "--write-results", "--results-file",
         str(page)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    written = page.read_text()
    start, end = rp.markers("forecast_cost")
    head, _, rest = written.partition(start)
    inside, _, tail = rest.partition(end)
    assert head == original.partition(start)[0] and tail == original.partition(end)[2]
    head_commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    stamp = re.match(r"\nWritten by `(.*)`\nat commit `([0-9a-f]+)(\+dirty)?` on (\d{4}-\d\d-\d\d) \(UTC\)\.\n", inside)
    assert stamp is not None, inside[:300]
    assert stamp.group(1) == "OPENBLAS_NUM_THREADS=1 python benchmarks/forecast_cost.py --samples 3"
    assert stamp.group(2) == head_commit
    assert dt.date.fromisoformat(stamp.group(4)) >= DAY
    # The body is what the benchmark printed to stdout (its "command:" line aside), table and all.
    printed = done.stdout.split("\n", 1)[1]
    assert printed.strip() in inside
    assert "| ses_ar_margin (default) | 120 |" in inside
