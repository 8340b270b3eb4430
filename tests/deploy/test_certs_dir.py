"""certs/ is in the tree (its README), and what ``python -m adapter certs`` writes there, or into any other
``certs/`` (the overlay recipe's deploy/certs), stays out of git."""

from __future__ import annotations

import subprocess

import pytest

from adapter.certs import bundle_files
from tests.support.manifests import REPO


def _ignored(*paths: str) -> set[str]:
    proc = subprocess.run(
        ["git", "-C", str(REPO), "check-ignore", "--no-index", *paths], capture_output=True, text=True, check=False
    )
    if proc.returncode == 128:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    return set(proc.stdout.split())


@pytest.mark.binary("git")
def test_certificates_and_keys_are_ignored_the_readme_is_not() -> None:
    written = [f"{d}/{name}" for d in ("certs", "deploy/certs") for name in bundle_files(front_proxy=True)]
    assert _ignored(*written, "certs/README.md") == set(written)


def test_readme_names_every_file_the_command_writes() -> None:
    readme = (REPO / "certs" / "README.md").read_text(encoding="utf-8")
    for name in bundle_files(front_proxy=False):
        assert f"`{name}`" in readme, name
