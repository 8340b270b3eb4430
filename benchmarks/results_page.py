"""Sections of docs/results.md written by the benchmark that measured them, never by hand.

A section is the text between ``<!-- results:NAME -->`` and ``<!-- /results:NAME -->`` (each marker on a line of
its own, once). ``replace_section`` swaps what is between them for a stamp line (the command line, the commit
``git rev-parse --short HEAD`` with ``+dirty`` when the work tree has changes, and the UTC date) followed by the
benchmark's markdown. ``recording`` wraps a benchmark's ``main``: everything it prints still goes to stdout, and,
when asked, the printed markdown becomes its section.

Usage from a benchmark: ``with recording("forecast_cost", args.write_results, command): ...print tables...``
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "docs" / "results.md"
_NAME = re.compile(r"[a-z0-9_]+")


def markers(name: str) -> tuple[str, str]:
    """The opening and closing marker lines of section ``name`` (lower-case letters, digits, underscores)."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"bad section name {name!r}")
    return f"<!-- results:{name} -->", f"<!-- /results:{name} -->"


def stamp(command: str, commit: str, date: dt.date) -> str:
    """The first line of a written section: which command, at which commit, on which day."""
    return f"Written by `{command}`\nat commit `{commit}` on {date.isoformat()} (UTC)."


def replace_section(text: str, name: str, body: str, *, command: str, commit: str, date: dt.date) -> str:
    """``text`` with section ``name``'s content replaced by the stamp and ``body``; everything outside the markers
    is kept byte for byte. ValueError unless each marker is a line of its own exactly once, opening first."""
    start, end = markers(name)
    lines = text.split("\n")
    opens = [i for i, line in enumerate(lines) if line.strip() == start]
    closes = [i for i, line in enumerate(lines) if line.strip() == end]
    if len(opens) != 1 or len(closes) != 1 or closes[0] < opens[0]:
        raise ValueError(f"section {name!r} needs one {start} line followed by one {end} line")
    content = [*stamp(command, commit, date).split("\n"), "", *body.strip("\n").split("\n")]
    return "\n".join([*lines[: opens[0] + 1], *content, *lines[closes[0] :]])


def command_line(script: str, argv: list[str]) -> str:
    """The command a reader reruns: ``python benchmarks/SCRIPT`` and ``argv`` without the results-page flags
    (``--write-results``, ``--results-file PATH``), which change where figures go, not what is measured."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--write-results" or arg.startswith("--results-file="):
            pass
        elif arg == "--results-file":
            skip = True
        else:
            kept.append(arg)
    return shlex.join(["python", f"benchmarks/{Path(script).name}", *kept])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--write-results`` and ``--results-file`` on a benchmark's command line."""
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="also write the printed tables into their section of docs/results.md, stamped with the commit",
    )
    parser.add_argument("--results-file", type=Path, default=RESULTS, help="the results page (default docs/results.md)")


def current_commit(repo: Path = REPO) -> str:
    """``git rev-parse --short HEAD`` of ``repo``, with ``+dirty`` when tracked files have uncommitted changes (the
    figures then belong to no commit)."""
    head = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{head}+dirty" if dirty else head


def write_section(path: Path, name: str, body: str, command: str) -> None:
    """Rewrite section ``name`` of the results page at ``path`` with ``body``, stamped now at this checkout."""
    text = path.read_text()
    today = dt.datetime.now(dt.UTC).date()
    path.write_text(replace_section(text, name, body, command=command, commit=current_commit(), date=today))


class _Tee(io.TextIOBase):
    """Writes to the real stdout and keeps a copy."""

    def __init__(self, out: io.TextIOBase | object) -> None:
        self._out = out
        self.copy = io.StringIO()

    def write(self, s: str) -> int:
        self._out.write(s)  # type: ignore[attr-defined]
        self.copy.write(s)
        return len(s)

    def flush(self) -> None:
        self._out.flush()  # type: ignore[attr-defined]


@contextlib.contextmanager
def recording(name: str, write: bool, command: str, path: Path = RESULTS) -> Iterator[None]:
    """Run the block with stdout copied; if ``write``, and the block ends without an exception, its printed
    markdown (minus a leading ``command: ...`` line, which the stamp replaces) becomes section ``name``.
    ``ValueError`` before the block runs when the page lacks the section's markers."""
    if not write:
        yield
        return
    # Fail before a long run, not after it, if the page or its section's markers are missing.
    replace_section(path.read_text(), name, "", command=command, commit="", date=dt.date.today())
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):  # type: ignore[type-var]
        yield
    lines = tee.copy.getvalue().split("\n")
    if lines and lines[0].startswith("command: "):
        lines = lines[1:]
    write_section(path, name, "\n".join(lines), command)
    print(f"wrote section {name!r} of {path}", file=sys.stderr)
