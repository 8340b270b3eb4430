"""The certificate recipe in apiservice-manifests/README.md, run as written.

The README's shell block (between the ``recipe:start`` / ``recipe:end`` markers) is run with bash in a scratch
directory laid out like the repository root, with our ``llm-hpa-adapter`` console script on PATH; the overlay it
writes is rendered with the real ``kubectl kustomize``. So the documented way of filling in the ``caBundle``
and creating the serving-cert Secret is known to produce what the Deployment and kube-aggregator need.
"""

from __future__ import annotations

import base64
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.binaries import require_binary
from tests.support.manifests import MANIFESTS, Obj, check_object, find, of_kind, render

APISERVER_CIDR = "10.20.30.40/32"
_BLOCK = re.compile(r"<!-- recipe:start[^>]*-->\s*```sh\n(.*?)```\s*<!-- recipe:end -->", re.DOTALL)


def _recipe() -> str:
    found = _BLOCK.findall((MANIFESTS / "README.md").read_text())
    assert len(found) == 1, "README.md must hold exactly one recipe block"
    return str(found[0])


@pytest.fixture(scope="module")
def overlay(tmp_path_factory: pytest.TempPathFactory, kubectl_path: str) -> tuple[Path, list[Obj]]:
    require_binary("bash")
    root = tmp_path_factory.mktemp("repo-root")
    (root / "apiservice-manifests").symlink_to(MANIFESTS, target_is_directory=True)
    bin_dir = Path(sys.executable).parent
    assert (bin_dir / "llm-hpa-adapter").exists(), "the console script is installed with the package"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(root),
        "APISERVER_CIDR": APISERVER_CIDR,
    }
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _recipe()],
        cwd=root,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return root, render(root / "deploy", env=env)


def test_overlay_renders_and_validates(overlay: tuple[Path, list[Obj]]) -> None:
    _, objs = overlay
    assert {"Deployment", "Service", "APIService", "Secret"} <= {o["kind"] for o in objs}
    for obj in objs:
        assert check_object(obj) in ("schema", "structure")  # check_object fails the test on an invalid one


def test_apiservices_carry_the_generated_ca(overlay: tuple[Path, list[Obj]]) -> None:
    root, objs = overlay
    ca_pem = (root / "deploy" / "certs" / "ca.crt").read_bytes()
    apiservices = of_kind(objs, "APIService")
    assert len(apiservices) == 3  # custom v1beta1, v1beta2; external v1beta1
    for apiservice in apiservices:
        assert base64.b64decode(apiservice["spec"]["caBundle"]) == ca_pem
        assert "insecureSkipTLSVerify" not in apiservice["spec"]


def test_secret_is_what_the_deployment_mounts(overlay: tuple[Path, list[Obj]]) -> None:
    root, objs = overlay
    deployment = find(objs, "Deployment", "llm-hpa-adapter", "llm-hpa-adapter")
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"] if "secret" in v]
    secret = find(objs, "Secret", volume["secret"]["secretName"], deployment["metadata"]["namespace"])
    assert secret["type"] == "kubernetes.io/tls"
    certs = root / "deploy" / "certs"
    for key in ("tls.crt", "tls.key"):
        # kustomize folds long base64 over lines; Kubernetes' base64 decoding skips the newlines too.
        assert base64.b64decode(secret["data"][key]) == (certs / key).read_bytes()


def test_networkpolicy_admits_the_given_apiserver_only(overlay: tuple[Path, list[Obj]]) -> None:
    _, objs = overlay
    policy = find(objs, "NetworkPolicy", "llm-hpa-adapter", "llm-hpa-adapter")["spec"]
    peers = [p for rule in policy["ingress"] for p in rule["from"]]
    cidrs = [p["ipBlock"]["cidr"] for p in peers if "ipBlock" in p]
    assert cidrs == [APISERVER_CIDR]
    egress = [p["ipBlock"]["cidr"] for rule in policy["egress"] for p in rule.get("to", []) if "ipBlock" in p]
    assert egress == [APISERVER_CIDR]


def test_recipe_refuses_to_run_without_the_apiserver_cidr(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "APISERVER_CIDR"}
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", _recipe()], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode != 0 and "APISERVER_CIDR" in proc.stderr
    assert not (tmp_path / "deploy").exists()
