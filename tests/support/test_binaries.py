"""What a missing binary means: a skip on a developer's machine, a failure in CI (tests/support/binaries.py)."""

from __future__ import annotations

import shutil

import pytest

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
