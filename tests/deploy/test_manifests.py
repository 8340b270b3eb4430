"""apiservice-manifests/: rendered by the real ``kubectl kustomize``, validated against the Kubernetes schemas.

Schemas come from the ``kubernetes-validate`` package (it ships the OpenAPI-derived JSON schemas, so this works
offline), in strict mode: an unknown or misspelt field fails, not only a wrong type. Kinds it has no schema
for (custom resources) get structural checks. The remaining tests check what no schema can: that the
objects refer to each other correctly (names, selectors, ports, paths, RBAC) and say what the design says.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from adapter.catalog import load_catalog
from tests.support.manifests import (
    MANIFESTS,
    REPO,
    Obj,
    check_object,
    find,
    of_kind,
    render,
    rules_allow,
    selector_matches,
)

NS = "llm-hpa-adapter"
NAME = "llm-hpa-adapter"
# Optional files other parts of the project add; when present they must be part of the kustomization.
OPTIONAL_RESOURCES = ("prometheusrule.yaml", "networkpolicy.yaml")
EXPECTED_ARGS = [
    "serve",
    "--prometheus-url",
    "http://prometheus-k8s.monitoring.svc:9090",
    "--bind",
    "0.0.0.0:6443",
    "--tls-cert-file",
    "/var/run/serving-cert/tls.crt",
    "--tls-private-key-file",
    "/var/run/serving-cert/tls.key",
    "--config",
    "/etc/llm-hpa-adapter/catalog.yaml",
]


@pytest.fixture(scope="module")
def objs(kubectl_path: str) -> list[Obj]:
    return render(MANIFESTS)


def test_validation_rejects_what_it_should() -> None:
    # The validator is only worth its silence if it speaks up: a misspelt field and a wrong type.
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}, "spec": {"portz": []}},
            "1.28",
            strict=True,
        )
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": "x"},
                "spec": {"minAvailable": [1]},
            },
            "1.28",
            strict=True,
        )


def test_every_object_validates(objs: list[Obj]) -> None:
    how = {f"{o['kind']}/{o['metadata']['name']}": check_object(o) for o in objs}
    # Everything the adapter itself needs is a built-in kind with a schema, APIService included.
    builtin = {k: v for k, v in how.items() if not k.startswith(("PrometheusRule/", "ServiceMonitor/", "PodMonitor/"))}
    assert set(builtin.values()) == {"schema"}, builtin


def test_the_objects_the_issue_asks_for(objs: list[Obj]) -> None:
    kinds = {(o["kind"], o["metadata"]["name"]) for o in objs}
    for kind, name in [
        ("Namespace", NS),
        ("ServiceAccount", NAME),
        ("Deployment", NAME),
        ("PodDisruptionBudget", NAME),
        ("Service", NAME),
        ("NetworkPolicy", NAME),
        ("APIService", "v1beta1.custom.metrics.k8s.io"),
        ("APIService", "v1beta2.custom.metrics.k8s.io"),
    ]:
        assert (kind, name) in kinds
    assert len(of_kind(objs, "ConfigMap")) >= 1


def test_kustomization_lists_every_manifest_file_here() -> None:
    # A manifest dropped into the directory but not listed would silently never be applied. The optional
    # files of other parts of the project are covered the moment they appear.
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    # Directories beside this one (the dashboard's) are kustomizations of their own.
    outside = {r for r in kustomization["resources"] if r.startswith("../")}
    assert all((MANIFESTS / r / "kustomization.yaml").is_file() for r in outside), outside
    listed = set(kustomization["resources"]) - outside
    present = {p.name for p in MANIFESTS.glob("*.yaml")} - {"kustomization.yaml", "catalog.yaml"}
    assert present == listed
    for name in OPTIONAL_RESOURCES:
        assert ((MANIFESTS / name).exists()) == (name in listed)


def _pod(objs: list[Obj]) -> dict[str, Any]:
    pod: dict[str, Any] = find(objs, "Deployment", NAME, NS)["spec"]["template"]
    return pod


def _container(objs: list[Obj]) -> dict[str, Any]:
    containers = _pod(objs)["spec"]["containers"]
    assert len(containers) == 1
    container: dict[str, Any] = containers[0]
    return container


def test_deployment_replicas_pdb_and_spreading(objs: list[Obj]) -> None:
    deployment = find(objs, "Deployment", NAME, NS)
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    labels = spec["template"]["metadata"]["labels"]
    assert selector_matches(spec["selector"]["matchLabels"], labels)
    pdb = find(objs, "PodDisruptionBudget", NAME, NS)["spec"]
    assert selector_matches(pdb["selector"]["matchLabels"], labels)
    assert 0 < pdb["minAvailable"] < spec["replicas"], "the PDB must allow a drain yet keep one replica"
    # A rollout never takes a replica away before its successor is ready.
    assert spec["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_deployment_args_are_the_serve_command(objs: list[Obj]) -> None:
    assert _container(objs)["args"] == EXPECTED_ARGS


def test_serve_accepts_the_deployment_args(objs: list[Obj]) -> None:
    from adapter.__main__ import build_parser

    parser = build_parser()
    serve = next(
        a
        for a in parser._subparsers._actions  # type: ignore[union-attr]
        if isinstance(a, argparse._SubParsersAction)
    ).choices["serve"]
    if "--tls-cert-file" not in serve._option_string_actions:
        pytest.skip("serve has no TLS flags in this checkout yet (built in parallel)")
    args = parser.parse_args(_container(objs)["args"])
    assert args.tls_cert_file == "/var/run/serving-cert/tls.crt"
    assert args.config == "/etc/llm-hpa-adapter/catalog.yaml"


def _mount_for(objs: list[Obj], path: str) -> tuple[dict[str, Any], dict[str, Any], str]:
    """The volumeMount whose directory holds ``path``, its volume, and the file name inside it."""
    container, pod_spec = _container(objs), _pod(objs)["spec"]
    directory, _, filename = path.rpartition("/")
    mounts = [m for m in container["volumeMounts"] if m["mountPath"].rstrip("/") == directory]
    assert len(mounts) == 1, f"no volume mounted at {directory}"
    volume = next(v for v in pod_spec["volumes"] if v["name"] == mounts[0]["name"])
    return mounts[0], volume, filename


def test_serving_cert_comes_from_the_secret(objs: list[Obj]) -> None:
    args = _container(objs)["args"]
    for flag in ("--tls-cert-file", "--tls-private-key-file"):
        mount, volume, filename = _mount_for(objs, args[args.index(flag) + 1])
        assert mount["readOnly"] is True
        assert "subPath" not in mount, "a subPath mount never sees Secret updates (no rotation)"
        assert volume["secret"]["secretName"] == "llm-hpa-adapter-serving-cert"
        assert filename in {"tls.crt", "tls.key"}  # the keys of a kubernetes.io/tls Secret
        mode = volume["secret"]["defaultMode"]
        assert mode & 0o007 == 0, "keys must not be world-readable"
        assert mode & 0o040, "the non-root user reads them through fsGroup"
    assert _pod(objs)["spec"]["securityContext"]["fsGroup"] == _pod(objs)["spec"]["securityContext"]["runAsGroup"]


def test_catalog_configmap_is_the_embedded_catalog(objs: list[Obj]) -> None:
    args = _container(objs)["args"]
    _, volume, filename = _mount_for(objs, args[args.index("--config") + 1])
    configmap = find(objs, "ConfigMap", volume["configMap"]["name"], NS)
    # kustomize appended the content hash to the generated name and rewrote the reference to match.
    assert configmap["metadata"]["name"].startswith("llm-hpa-adapter-catalog-")
    text = configmap["data"][filename]
    assert text == (REPO / "adapter" / "catalog.yaml").read_text(encoding="utf-8")
    # ... and the catalog the examples' HPA scales on is served from it.
    assert "llm_composite_load_boosted" in load_catalog(MANIFESTS / "catalog.yaml").forecast_names()


def test_catalog_copy_equals_adapter_catalog() -> None:
    # kustomize reads no file outside the kustomization directory, so the manifests keep a copy.
    copy = (MANIFESTS / "catalog.yaml").read_bytes()
    original = (REPO / "adapter" / "catalog.yaml").read_bytes()
    assert copy == original, "apiservice-manifests/catalog.yaml is stale: cp adapter/catalog.yaml apiservice-manifests/"


def test_probes_over_https_on_the_serving_port(objs: list[Obj]) -> None:
    container = _container(objs)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"https": 6443}
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path and get["scheme"] == "HTTPS"
        assert ports.get(get["port"], get["port"]) == 6443


def test_resources_and_security(objs: list[Obj]) -> None:
    container, pod_spec = _container(objs), _pod(objs)["spec"]
    for bound in ("requests", "limits"):
        assert set(container["resources"][bound]) == {"cpu", "memory"}
    # The "restricted" Pod Security Standard (kubernetes.io/docs/concepts/security/pod-security-standards),
    # which namespace.yaml enforces: these are its checks.
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["runAsUser"] > 0
    assert pod_spec["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    security = container["securityContext"]
    assert security["allowPrivilegeEscalation"] is False
    assert security["readOnlyRootFilesystem"] is True
    assert security["capabilities"]["drop"] == ["ALL"]
    assert "add" not in security["capabilities"]
    assert not {"hostNetwork", "hostPID", "hostIPC"} & set(pod_spec)
    allowed = {"configMap", "emptyDir", "secret", "projected", "downwardAPI", "persistentVolumeClaim"}
    assert all(set(v) - {"name"} <= allowed for v in pod_spec["volumes"])
    namespace = find(objs, "Namespace", NS)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # The read-only root filesystem needs a writable /tmp for Python (HOME=/tmp in the image).
    _, tmp, _ = _mount_for(objs, "/tmp/x")
    assert "emptyDir" in tmp


def test_service_443_to_6443(objs: list[Obj]) -> None:
    service = find(objs, "Service", NAME, NS)["spec"]
    assert selector_matches(service["selector"], _pod(objs)["metadata"]["labels"])
    [port] = service["ports"]
    container_ports = {p["name"]: p["containerPort"] for p in _container(objs)["ports"]}
    assert port["port"] == 443
    assert container_ports.get(port["targetPort"], port["targetPort"]) == 6443


def test_serviceaccount_is_the_pods_identity(objs: list[Obj]) -> None:
    find(objs, "ServiceAccount", NAME, NS)
    assert _pod(objs)["spec"]["serviceAccountName"] == NAME
    assert _pod(objs)["spec"].get("automountServiceAccountToken", True) is True  # it talks to the API


def test_apiservices(objs: list[Obj]) -> None:
    apiservices = {o["metadata"]["name"]: o["spec"] for o in of_kind(objs, "APIService")}
    assert set(apiservices) == {
        "v1beta1.custom.metrics.k8s.io",
        "v1beta2.custom.metrics.k8s.io",
        "v1beta1.external.metrics.k8s.io",
    }
    service = find(objs, "Service", NAME, NS)
    priorities = {}
    for name, spec in apiservices.items():
        assert name == f"{spec['version']}.{spec['group']}"  # the API server requires this name
        assert spec["group"] in ("custom.metrics.k8s.io", "external.metrics.k8s.io")
        assert spec["groupPriorityMinimum"] == 100
        assert "insecureSkipTLSVerify" not in spec
        assert spec["service"] == {
            "name": service["metadata"]["name"],
            "namespace": NS,
            "port": service["spec"]["ports"][0]["port"],
        }
        # The placeholder: valid base64 (so kubectl apply takes it), yet no certificate.
        try:
            decoded = base64.b64decode(spec["caBundle"], validate=True)
        except binascii.Error:
            pytest.fail(f"{name}: caBundle is not base64")
        assert b"BEGIN CERTIFICATE" not in decoded and b"README" in decoded
        priorities[name] = spec["versionPriority"]
    # v1beta2 preferred: the higher versionPriority wins in discovery.
    assert priorities == {
        "v1beta2.custom.metrics.k8s.io": 200,
        "v1beta1.custom.metrics.k8s.io": 100,
        "v1beta1.external.metrics.k8s.io": 100,
    }


def _bindings_to(objs: list[Obj], namespace: str, name: str) -> list[Obj]:
    return [
        b
        for b in objs
        if b["kind"] in {"RoleBinding", "ClusterRoleBinding"}
        and {"kind": "ServiceAccount", "name": name, "namespace": namespace} in b["subjects"]
    ]


def test_adapter_rbac(objs: list[Obj]) -> None:
    bindings = _bindings_to(objs, NS, NAME)
    refs = {(b["kind"], b["metadata"].get("namespace"), b["roleRef"]["kind"], b["roleRef"]["name"]) for b in bindings}
    assert ("ClusterRoleBinding", None, "ClusterRole", "system:auth-delegator") in refs
    assert ("RoleBinding", "kube-system", "Role", "extension-apiserver-authentication-reader") in refs
    # Our own ClusterRoles granted to the adapter: together they read pods, replicasets, deployments.
    ours = [
        find(objs, "ClusterRole", b["roleRef"]["name"])
        for b in bindings
        if b["roleRef"]["kind"] == "ClusterRole" and not b["roleRef"]["name"].startswith("system:")
    ]
    rules = [r for role in ours for r in role["rules"]]
    for group, resource in (("", "pods"), ("apps", "replicasets"), ("apps", "deployments")):
        for verb in ("get", "list", "watch"):
            assert rules_allow(rules, group, resource, verb), (group, resource, verb)
    # Read-only: nothing the adapter is granted by us writes.
    assert all(
        not rules_allow(rules, g, r, v)
        for g, r in (("", "pods"), ("apps", "deployments"))
        for v in ("create", "update", "patch", "delete")
    )


def test_hpa_controller_may_read_the_metrics(objs: list[Obj]) -> None:
    bindings = _bindings_to(objs, "kube-system", "horizontal-pod-autoscaler")
    assert bindings and all(b["kind"] == "ClusterRoleBinding" for b in bindings)
    rules = [r for b in bindings for r in find(objs, "ClusterRole", b["roleRef"]["name"])["rules"]]
    # What the adapter's SubjectAccessReview asks for an HPA Pods metric (k8s-metrics-protocol.md §4.4).
    assert rules_allow(rules, "custom.metrics.k8s.io", "pods/llm_composite_load_boosted", "get")
    assert rules_allow(rules, "custom.metrics.k8s.io", "deployments.apps/llm_composite_load", "get")
    # An External metric: verb list on resource <metric> (no object name) in external.metrics.k8s.io.
    assert rules_allow(rules, "external.metrics.k8s.io", "llm_composite_load_boosted", "list")
    assert not rules_allow(rules, "", "pods", "get"), "the HPA binding grants nothing beyond the metrics"


def test_images_tag_is_the_package_version() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    [image] = kustomization["images"]
    assert image == {"name": "llm-hpa-adapter", "newTag": version}


def test_rendered_image_is_tagged(objs: list[Obj]) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert _container(objs)["image"] == f"llm-hpa-adapter:{version}"


def test_no_top_level_namespace_moves_the_kube_system_binding(objs: list[Obj]) -> None:
    assert find(objs, "RoleBinding", "llm-hpa-adapter-auth-reader")["metadata"]["namespace"] == "kube-system"
    namespaced = [o for o in objs if o["kind"] not in {"Namespace", "ClusterRole", "ClusterRoleBinding", "APIService"}]
    assert {o["metadata"]["namespace"] for o in namespaced} <= {NS, "kube-system"}


def test_readme_names_the_secret_and_service(objs: list[Obj]) -> None:
    readme = (MANIFESTS / "README.md").read_text()
    volume = next(v for v in _pod(objs)["spec"]["volumes"] if "secret" in v)
    assert volume["secret"]["secretName"] in readme
    assert f"--service {NAME} --namespace {NS}" in readme


def test_manifest_files_parse_as_yaml() -> None:
    paths = sorted(Path(MANIFESTS).rglob("*.yaml"))
    assert paths
    for path in paths:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs and all(isinstance(d, dict) for d in docs), path


def test_networkpolicy_admits_apiserver_and_prometheus_only(objs: list[Obj]) -> None:
    policy = find(objs, "NetworkPolicy", NAME, NS)["spec"]
    assert selector_matches(policy["podSelector"]["matchLabels"], _pod(objs)["metadata"]["labels"])
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    container_ports = {p["name"]: p["containerPort"] for p in _container(objs)["ports"]}
    # Every ingress rule names its peers (a rule without them admits every source) and only the serving port.
    for rule in policy["ingress"]:
        assert rule["from"]
        assert {container_ports.get(p["port"], p["port"]) for p in rule["ports"]} == {6443}
    [apiserver, prometheus] = policy["ingress"]
    # The placeholder: a documentation range (RFC 5737), never a real API server, until the overlay sets it.
    assert apiserver["from"] == [{"ipBlock": {"cidr": "192.0.2.0/24"}}]
    [peer] = prometheus["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    # Prometheus is the subject rbac.yaml lets read /metrics (monitoring/prometheus-k8s).
    reader = find(objs, "ClusterRoleBinding", "llm-hpa-adapter-metrics-reader")["subjects"]
    assert {s["namespace"] for s in reader} == {"monitoring"}
    # Out: DNS, the API server (same address) and the backend's port of --prometheus-url.
    [dns, to_apiserver, backend] = policy["egress"]
    assert "to" not in dns and {p["port"] for p in dns["ports"]} == {53}
    assert to_apiserver["to"] == apiserver["from"]
    url = EXPECTED_ARGS[EXPECTED_ARGS.index("--prometheus-url") + 1]
    assert {p["port"] for p in backend["ports"]} == {int(url.rsplit(":", 1)[1])}
