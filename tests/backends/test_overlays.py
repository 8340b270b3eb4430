"""apiservice-manifests/backends/: the backend Components, rendered with the real ``kubectl kustomize`` on top of
the base, give a Deployment whose arguments ``serve`` accepts and whose files are actually mounted."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from adapter.__main__ import build_parser
from adapter.query.backend import access_from_args, request_headers, resolve_url
from tests.support.manifests import MANIFESTS, find, render

pytestmark = pytest.mark.binary("kubectl")  # every test renders with the real kubectl kustomize

NS = "llm-hpa-adapter"


def rendered(tmp_path: Path, component: str) -> list[dict[str, Any]]:
    base = os.path.relpath(MANIFESTS, tmp_path)  # kustomize wants relative paths
    (tmp_path / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        f"resources:\n  - {base}\ncomponents:\n  - {base}/backends/{component}\n"
    )
    return render(tmp_path)


def serve_args(objs: list[dict[str, Any]]) -> tuple[Any, dict[str, Any]]:
    dep = find(objs, "Deployment", "llm-hpa-adapter", NS)
    container = dep["spec"]["template"]["spec"]["containers"][0]
    return build_parser().parse_args(container["args"]), dep


def mounted_from(dep: dict[str, Any], path: str) -> dict[str, Any]:
    """The volume whose mount holds ``path`` (the deepest mount, as the kubelet nests them)."""
    spec = dep["spec"]["template"]["spec"]
    mounts = [
        m for m in spec["containers"][0].get("volumeMounts", []) if path.startswith(m["mountPath"].rstrip("/") + "/")
    ]
    assert mounts, f"nothing mounted at {path}"
    deepest = max(mounts, key=lambda m: len(m["mountPath"]))
    return next(v for v in spec["volumes"] if v["name"] == deepest["name"])


def test_locked_down_prometheus(tmp_path: Path) -> None:
    objs = rendered(tmp_path, "locked-down-prometheus")
    args, dep = serve_args(objs)
    access = access_from_args(args)
    assert args.backend == "thanos" and args.prometheus_url.startswith("https://")
    resolve_url(args.prometheus_url, args.backend, access)
    # The CA comes from a ConfigMap that the overlay creates, under the key the path names.
    volume = mounted_from(dep, access.ca_file or "")
    cm = find(objs, "ConfigMap", volume["configMap"]["name"], NS)
    assert os.path.basename(access.ca_file or "") == "service-ca.crt"
    assert cm["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"] == "true"
    # The token is the ServiceAccount's own, automounted (nothing in the base turns that off).
    assert access.token_file == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert dep["spec"]["template"]["spec"].get("automountServiceAccountToken", True) is True
    sa = find(objs, "ServiceAccount", "llm-hpa-adapter", NS)
    assert sa.get("automountServiceAccountToken", True) is True
    binding = find(objs, "ClusterRoleBinding", "llm-hpa-adapter:cluster-monitoring-view")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "llm-hpa-adapter", "namespace": NS}]


def test_mimir_tenant(tmp_path: Path) -> None:
    args, _ = serve_args(rendered(tmp_path, "mimir-tenant"))
    access = access_from_args(args)
    assert args.backend == "mimir"
    assert resolve_url(args.prometheus_url, args.backend, access).endswith("/prometheus")
    assert request_headers(args.backend, access) == {"X-Scope-OrgID": "gpu-fleet"}


@pytest.mark.parametrize("component", ["locked-down-prometheus", "mimir-tenant"])
def test_the_base_stays_as_it_was(tmp_path: Path, component: str) -> None:
    """The Component changes the backend arguments only: the base's own arguments stay in place."""
    args, _ = serve_args(rendered(tmp_path, component))
    assert args.tls_cert_file == "/var/run/serving-cert/tls.crt" and args.config == "/etc/llm-hpa-adapter/catalog.yaml"
