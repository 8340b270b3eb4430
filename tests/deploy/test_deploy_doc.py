"""docs/deploy.md: its values table names every value of the chart with its default, its helm install command
renders (with the real helm, certificates made by our ``certs`` command), and its links resolve."""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.test_runbooks import anchors
from tests.support.binaries import require_binary
from tests.support.chart import CHART
from tests.support.manifests import REPO, Obj, check_object, find, of_kind

DEPLOY = REPO / "docs" / "deploy.md"
_BLOCK = re.compile(r"<!-- helm-install:start[^>]*-->\s*```sh\n(.*?)```\s*<!-- helm-install:end -->", re.DOTALL)
_ROW = re.compile(r"^\| `([^`]+)` \| (`[^`]*`|) \|", re.MULTILINE)
_MISSING = object()


def _table() -> dict[str, Any]:
    text = DEPLOY.read_text(encoding="utf-8")
    section = text.partition("\n## Values\n")[2].partition("\n## ")[0]
    rows = _ROW.findall(section)
    assert rows, "no values table"
    return {key: yaml.safe_load(default.strip("`")) if default else _MISSING for key, default in rows}


def _leaves(values: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        path = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and value:
            out |= _leaves(value, path)
        else:
            out[path] = value
    return out


def _get(values: dict[str, Any], path: str) -> Any:
    # Keys may hold dots themselves (kubernetes.io/metadata.name): match the longest key at each level.
    node: Any = values
    rest = path
    while rest:
        if not isinstance(node, dict):
            return _MISSING
        key = next((k for k in sorted(node, key=len, reverse=True) if rest == k or rest.startswith(k + ".")), None)
        if key is None:
            return _MISSING
        node, rest = node[key], rest[len(key) + 1 :]
    return node


def test_values_table_names_every_value_with_its_default() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    table = _table()
    for key, default in table.items():
        actual = _get(values, key)
        assert actual is not _MISSING, f"docs/deploy.md documents {key}, which values.yaml does not have"
        assert default is not _MISSING and default == actual, f"{key}: documented {default!r}, values.yaml {actual!r}"
    undocumented = [p for p in _leaves(values) if not any(p == k or p.startswith(k + ".") for k in table)]
    assert not undocumented, f"values without a row in docs/deploy.md: {undocumented}"
    assert set(values) <= {k.split(".")[0] for k in table}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Obj]]:
    """The documented commands that need no cluster, run as written; ``helm install`` as ``helm template``."""
    helm = require_binary("helm")
    require_binary("bash")
    [block] = _BLOCK.findall(DEPLOY.read_text(encoding="utf-8"))
    commands = re.split(r"\n(?=\S)", block.strip())
    [install] = [c for c in commands if c.startswith("helm install ")]
    runnable = [c for c in commands if c.startswith("python -m adapter ")]
    script = "\n".join(
        [*(c + " >/dev/null" for c in runnable), '"$HELM" template ' + install.removeprefix("helm install ")]
    )
    root = tmp_path_factory.mktemp("deploy-doc")
    (root / "charts").symlink_to(REPO / "charts", target_is_directory=True)
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(root),
        "HELM": helm,
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    return root, [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.mark.binary("helm", "bash")
def test_documented_install_renders_and_validates(installed: tuple[Path, list[Obj]]) -> None:
    root, objs = installed
    for obj in objs:
        check_object(obj)
    ca = (root / "certs" / "ca.crt").read_bytes()
    apiservices = of_kind(objs, "APIService")
    assert len(apiservices) == 3
    assert all(base64.b64decode(a["spec"]["caBundle"]) == ca for a in apiservices)
    deployment = find(objs, "Deployment", "llm-hpa-adapter", "llm-hpa-adapter")
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["image"].startswith("registry.example.com/llm-hpa-adapter:")
    policy = find(objs, "NetworkPolicy", "llm-hpa-adapter", "llm-hpa-adapter")["spec"]
    assert policy["ingress"][0]["from"] == [{"ipBlock": {"cidr": "10.0.0.10/32"}}]
    # The Secret the documented kubectl command creates is the one the pods mount.
    text = DEPLOY.read_text(encoding="utf-8")
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if "secret" in v]
    assert f"create secret generic {volume['secret']['secretName']} --type=kubernetes.io/tls" in text


@pytest.mark.parametrize(
    "page",
    [
        "docs/deploy.md",
        "docs/runbooks.md",
        "charts/llm-hpa-adapter/README.md",
        "apiservice-manifests/README.md",
        "certs/README.md",
    ],
)
def test_links_resolve(page: str) -> None:
    path = REPO / page
    text = path.read_text(encoding="utf-8")
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        file, _, anchor = target.partition("#")
        linked = (path.parent / file).resolve() if file else path
        assert linked.exists(), f"{page}: {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked.read_text(encoding="utf-8")), f"{page}: {target}"
