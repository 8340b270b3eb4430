"""What a missing binary means: a skip on a developer's machine, a failure in CI (tests/support/binaries.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import binaries
from tests.support.binaries import in_ci, require_binary

MISSING = "llm-hpa-adapter-no-such-binary"


def test_missing_binary_skips_outside_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert not in_ci()
    with pytest.raises(pytest.skip.Exception, match=f"{MISSING} is not installed"):
        require_binary(MISSING)


@pytest.mark.parametrize("value", ["true", "TRUE", "1"])
def test_missing_binary_fails_in_ci(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("CI", value)
    assert in_ci()
    with pytest.raises(pytest.fail.Exception, match=f"{MISSING} is not installed .*CI=true"):
        require_binary(MISSING)


def test_ci_false_is_not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "false")
    assert not in_ci()


def test_present_binary_is_its_path() -> None:
    assert require_binary("sh") == shutil.which("sh")


def test_sbin_is_searched_when_path_lacks_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """nginx is in Debian's /usr/sbin, which a user's PATH may lack: it is found there, not reported missing."""
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    exe = sbin / "gateway-binary"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    monkeypatch.setattr(binaries, "SBIN", str(sbin))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CI", "true")  # not found would fail the test, not skip it
    assert require_binary("gateway-binary") == str(exe)
