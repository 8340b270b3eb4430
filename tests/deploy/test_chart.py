"""charts/llm-hpa-adapter: linted and rendered by the real helm (v4 and v3), every object validated offline.

Three value sets: the defaults; cert-manager with a VictoriaMetrics backend, a bearer token and the
PrometheusRule; and custom metrics only (external off) with a ServiceMonitor, a Mimir tenant, a backend CA and
client certificate, and a given serving Secret and caBundle. What no schema can check is checked here: the
objects refer to each other (Secrets, Certificates, selectors, ports), the rendered serve arguments parse with
the adapter's own parser, and the chart renders what the kustomize base renders for the same settings.
"""

from __future__ import annotations

import argparse
import base64
import copy
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support import artifacts
from tests.support.binaries import require_binary
from tests.support.chart import CHART, HELMS, NAMESPACE, RELEASE, helm_run, template
from tests.support.fake_kube import FakeKube
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
    with_components,
)

pytestmark = pytest.mark.binary("helm", "helm3")

NAME = RELEASE
CA_PEM = b"-----BEGIN CERTIFICATE-----\nMIIBdummy\n-----END CERTIFICATE-----\n"
VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "certmanager-vm-token": {
        "certManager": {"enabled": True},
        "prometheus": {
            "url": "http://vmsingle.monitoring.svc:8428",
            "flavour": "victoriametrics",
            "bearerToken": {"secret": "vm-token", "key": "token"},
        },
        "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "networkPolicy": {"apiServer": {"cidrs": ["10.0.0.10/32", "10.0.0.11/32"]}, "backend": {"ports": [8428]}},
    },
    "custom-only-servicemonitor-mimir": {
        "apiServices": {"externalMetrics": {"v1beta1": False}},
        "serviceMonitor": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
        "prometheus": {
            "url": "https://mimir-gateway.mimir.svc:8080/prometheus",
            "flavour": "mimir",
            "tenant": "gpu-fleet",
            "ca": {"configMap": "mimir-ca", "key": "ca.crt"},
            "clientCert": {"secret": "mimir-client"},
            "queryTimeout": 3,
        },
        "tls": {"existingSecret": "my-serving-cert", "caBundle": base64.b64encode(CA_PEM).decode()},
        "replicas": 3,
        "podDisruptionBudget": {"minAvailable": 2},
        "dashboard": {"enabled": False},
    },
}
SETS = list(VALUE_SETS)


@pytest.fixture(params=HELMS)
def helm(request: pytest.FixtureRequest) -> str:
    """The real helm of each major (v4 ``helm``, v3 ``helm3``)."""
    return require_binary(str(request.param))


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Obj]]:
    helm4 = require_binary("helm")
    return {name: template(helm4, values, tmp_path_factory.mktemp(name)) for name, values in VALUE_SETS.items()}


def _deployment(objs: list[Obj]) -> Obj:
    return find(objs, "Deployment", NAME, NAMESPACE)


def _container(objs: list[Obj]) -> dict[str, Any]:
    [container] = _deployment(objs)["spec"]["template"]["spec"]["containers"]
    return dict(container)


def _serve_args(objs: list[Obj]) -> argparse.Namespace:
    from adapter.__main__ import build_parser

    return build_parser().parse_args(_container(objs)["args"])


def _volume_for(objs: list[Obj], path: str) -> dict[str, Any]:
    """The volume whose mount holds file ``path`` (the file flags of serve point into mounts)."""
    pod = _deployment(objs)["spec"]["template"]["spec"]
    directory = path.rpartition("/")[0]
    [mount] = [m for m in _container(objs)["volumeMounts"] if m["mountPath"] == directory]
    assert mount.get("readOnly") is True and "subPath" not in mount
    [volume] = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    return dict(volume)


@pytest.mark.parametrize("values", SETS)
def test_helm_lint_strict(helm: str, values: str, tmp_path: Path) -> None:
    proc = helm_run(helm, ["lint", "--strict", str(CHART)], VALUE_SETS[values], tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 chart(s) failed" in proc.stdout


@pytest.mark.parametrize("values", SETS)
def test_both_helms_render_the_same(values: str, tmp_path: Path, rendered: dict[str, list[Obj]]) -> None:
    assert template(require_binary("helm3"), VALUE_SETS[values], tmp_path) == rendered[values]


@pytest.mark.parametrize("values", SETS)
def test_every_object_validates(values: str, rendered: dict[str, list[Obj]]) -> None:
    how = {f"{o['kind']}/{o['metadata']['name']}": check_object(o) for o in rendered[values]}
    custom = ("Certificate/", "Issuer/", "PrometheusRule/", "ServiceMonitor/")
    assert {v for k, v in how.items() if not k.startswith(custom)} == {"schema"}, how
    assert all(o["metadata"].get("namespace", NAMESPACE) in (NAMESPACE, "kube-system") for o in rendered[values])


@pytest.mark.parametrize("values", SETS)
def test_serve_accepts_the_rendered_args(values: str, rendered: dict[str, list[Obj]]) -> None:
    objs = rendered[values]
    args = _serve_args(objs)
    want = VALUE_SETS[values].get("prometheus", {})
    assert args.prometheus_url == want.get("url", "http://prometheus-k8s.monitoring.svc:9090")
    assert args.backend == want.get("flavour", "prometheus")
    assert args.backend_tenant == want.get("tenant")
    secret = VALUE_SETS[values].get("tls", {}).get("existingSecret") or f"{NAME}-serving-cert"
    for path in (args.tls_cert_file, args.tls_private_key_file):
        volume = _volume_for(objs, path)
        assert volume["secret"]["secretName"] == secret
        assert volume["secret"]["defaultMode"] & 0o007 == 0
    catalog = find(objs, "ConfigMap", _volume_for(objs, args.config)["configMap"]["name"], NAMESPACE)
    assert catalog["data"][Path(args.config).name] == (REPO / "adapter" / "catalog.yaml").read_text(encoding="utf-8")
    token = want.get("bearerToken", {}).get("secret")
    if token:
        assert _volume_for(objs, args.backend_token_file)["secret"]["secretName"] == token
        assert Path(args.backend_token_file).name == want["bearerToken"]["key"]
    else:
        assert args.backend_token_file is None
    if want.get("ca"):
        assert _volume_for(objs, args.backend_ca_file)["configMap"]["name"] == want["ca"]["configMap"]
        for path in (args.backend_cert_file, args.backend_key_file):
            assert _volume_for(objs, path)["secret"]["secretName"] == want["clientCert"]["secret"]
        assert args.query_timeout == want["queryTimeout"]


def test_defaults_match_the_kustomize_design(rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["default"]
    assert _deployment(objs)["spec"]["replicas"] == 2
    assert find(objs, "PodDisruptionBudget", NAME, NAMESPACE)["spec"]["minAvailable"] == 1
    # The same placeholder idea as the base: valid base64, no certificate, so nothing is served unverified.
    for apiservice in of_kind(objs, "APIService"):
        decoded = base64.b64decode(apiservice["spec"]["caBundle"], validate=True)
        assert b"BEGIN CERTIFICATE" not in decoded and b"tls.caBundle" in decoded
        assert "insecureSkipTLSVerify" not in apiservice["spec"]
    assert not of_kind(objs, "ServiceMonitor") and not of_kind(objs, "PrometheusRule")
    assert of_kind(objs, "NetworkPolicy") and of_kind(objs, "ConfigMap")


def test_given_cabundle_and_secret(rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["custom-only-servicemonitor-mimir"]
    for apiservice in of_kind(objs, "APIService"):
        assert base64.b64decode(apiservice["spec"]["caBundle"]) == CA_PEM
        assert "annotations" not in apiservice["metadata"]
    assert _deployment(objs)["spec"]["replicas"] == 3
    assert find(objs, "PodDisruptionBudget", NAME, NAMESPACE)["spec"]["minAvailable"] == 2
    assert not [o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]


def test_cert_manager_issues_and_injects_the_serving_cert(rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["certmanager-vm-token"]
    apiservices = of_kind(objs, "APIService")
    assert len(apiservices) == 3
    for apiservice in apiservices:
        assert "caBundle" not in apiservice["spec"], "the cainjector fills it; a value would be overwritten"
        namespace, _, name = apiservice["metadata"]["annotations"]["cert-manager.io/inject-ca-from"].partition("/")
        certificate = find(objs, "Certificate", name, namespace)
    spec = certificate["spec"]
    # The Secret the Deployment mounts is the one the Certificate writes ...
    assert spec["secretName"] == _volume_for(objs, _serve_args(objs).tls_cert_file)["secret"]["secretName"]
    # ... for the name kube-aggregator verifies (<service>.<namespace>.svc) ...
    service = find(objs, "Service", NAME, NAMESPACE)
    assert f"{service['metadata']['name']}.{NAMESPACE}.svc" in spec["dnsNames"]
    assert "server auth" in spec["usages"]
    # ... signed by a CA Issuer whose CA is a self-signed CA Certificate of the chart.
    issuer = find(objs, "Issuer", spec["issuerRef"]["name"], NAMESPACE)
    ca = find(
        objs, "Certificate", next(c["metadata"]["name"] for c in of_kind(objs, "Certificate") if c["spec"].get("isCA"))
    )
    assert issuer["spec"]["ca"]["secretName"] == ca["spec"]["secretName"]
    assert "selfSigned" in find(objs, "Issuer", ca["spec"]["issuerRef"]["name"], NAMESPACE)["spec"]


def test_cert_manager_with_a_given_issuer(tmp_path: Path) -> None:
    issuer = {"name": "cluster-ca", "kind": "ClusterIssuer"}
    objs = template(require_binary("helm"), {"certManager": {"enabled": True, "issuerRef": issuer}}, tmp_path)
    assert not of_kind(objs, "Issuer")
    [certificate] = of_kind(objs, "Certificate")
    assert certificate["spec"]["issuerRef"] == issuer


def test_apiservices_toggle_per_group_version(rendered: dict[str, list[Obj]], tmp_path: Path) -> None:
    objs = rendered["custom-only-servicemonitor-mimir"]
    names = {o["metadata"]["name"] for o in of_kind(objs, "APIService")}
    assert names == {"v1beta2.custom.metrics.k8s.io", "v1beta1.custom.metrics.k8s.io"}
    tests = [o for o in of_kind(objs, "Pod") if o["metadata"]["annotations"]["helm.sh/hook"] == "test"]
    assert sorted(p["spec"]["containers"][0]["args"][-1] for p in tests) == [
        "/apis/custom.metrics.k8s.io/v1beta1",
        "/apis/custom.metrics.k8s.io/v1beta2",
    ]
    none = {"customMetrics": {"v1beta1": False, "v1beta2": False}, "externalMetrics": {"v1beta1": False}}
    objs = template(require_binary("helm"), {"apiServices": none}, tmp_path)
    assert not of_kind(objs, "APIService") and not of_kind(objs, "Pod")


def test_helm_test_pods_read_discovery_through_the_aggregator(rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["default"]
    pods = of_kind(objs, "Pod")
    assert len(pods) == len(of_kind(objs, "APIService")) == 3
    for pod in pods:
        spec = pod["spec"]
        [container] = spec["containers"]
        get, raw, path = container["args"]
        assert (get, raw) == ("get", "--raw")
        group, version = path.removeprefix("/apis/").split("/")
        find(objs, "APIService", f"{version}.{group}")
        # Its ServiceAccount may read that group (and the bindings name it).
        account = spec["serviceAccountName"]
        find(objs, "ServiceAccount", account, NAMESPACE)
        bindings = [
            b
            for b in of_kind(objs, "ClusterRoleBinding")
            if {"kind": "ServiceAccount", "name": account, "namespace": NAMESPACE} in b["subjects"]
        ]
        rules = [r for b in bindings for r in find(objs, "ClusterRole", b["roleRef"]["name"])["rules"]]
        assert rules_allow(rules, group, "pods/llm_composite_load", "get")
        assert not rules_allow(rules, "", "pods", "get")
        # Restricted Pod Security, like the adapter's own pods.
        assert spec["securityContext"]["runAsNonRoot"] is True
        assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
        assert spec["restartPolicy"] == "Never"


def test_servicemonitor_scrapes_the_service_over_verified_tls(rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["custom-only-servicemonitor-mimir"]
    [monitor] = of_kind(objs, "ServiceMonitor")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    service = find(objs, "Service", NAME, NAMESPACE)
    assert selector_matches(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}
    assert (endpoint["scheme"], endpoint["path"], endpoint["honorLabels"]) == ("https", "/metrics", True)
    tls = endpoint["tlsConfig"]
    assert "insecureSkipVerify" not in tls
    assert tls["serverName"] == f"{NAME}.{NAMESPACE}.svc"
    assert tls["ca"]["secret"]["name"] == "my-serving-cert"


def test_prometheusrule_is_the_rules_file_with_runbooks(rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["certmanager-vm-token"]
    [rule] = of_kind(objs, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    source = yaml.safe_load(artifacts.RULES.read_text(encoding="utf-8"))
    base = yaml.safe_load((CHART / "values.yaml").read_text())["prometheusRule"]["runbookBaseURL"]
    stripped, source = copy.deepcopy(rule["spec"]), copy.deepcopy(source)
    for group in stripped["groups"]:
        for r in group["rules"]:
            if "alert" in r:
                assert r["annotations"].pop("runbook_url") == f"{base}#{r['alert'].lower()}"
    for group in source["groups"]:
        for r in group["rules"]:
            r.get("annotations", {}).pop("runbook_url", None)
    assert stripped == source


def test_runbook_base_url_is_a_value(tmp_path: Path) -> None:
    base = "https://git.example.com/ops/runbooks.md"
    values = {"prometheusRule": {"enabled": True, "runbookBaseURL": base}}
    [rule] = of_kind(template(require_binary("helm"), values, tmp_path), "PrometheusRule")
    urls = [r["annotations"]["runbook_url"] for g in rule["spec"]["groups"] for r in g["rules"] if "alert" in r]
    assert urls and all(u.startswith(base + "#") for u in urls)


@pytest.mark.parametrize(
    ("override", "complaint"),
    [
        ("replicas=abc", "replicas"),
        ("prometheus.flavour=graphite", "flavour"),
        ("replica=2", "replica"),  # a misspelt key is refused, not ignored
        ("networkPolicy.apiServer.cidrs={10.0.0.1}", "cidrs"),
        ("tls.caBundle=not base64!", "caBundle"),
    ],
)
def test_schema_rejects_bad_values(helm: str, override: str, complaint: str, tmp_path: Path) -> None:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    assert helm_run(helm, [*args, "--set", "replicas=3"], None, tmp_path).returncode == 0
    proc = helm_run(helm, [*args, "--set", override], None, tmp_path)
    assert proc.returncode != 0
    assert "schema" in proc.stderr and complaint in proc.stderr, proc.stderr


def test_contradicting_values_fail_with_a_message(tmp_path: Path) -> None:
    values = {"prometheus": {"bearerToken": {"secret": "t", "serviceAccountToken": True}}}
    proc = helm_run(require_binary("helm"), ["template", RELEASE, str(CHART), "-n", NAMESPACE], values, tmp_path)
    assert proc.returncode != 0 and "either secret or serviceAccountToken" in proc.stderr


def test_networkpolicy_admits_the_apiserver_and_prometheus_only(rendered: dict[str, list[Obj]]) -> None:
    objs = rendered["certmanager-vm-token"]
    policy = find(objs, "NetworkPolicy", NAME, NAMESPACE)["spec"]
    pod = _deployment(objs)["spec"]["template"]
    assert selector_matches(policy["podSelector"]["matchLabels"], pod["metadata"]["labels"])
    assert set(policy["policyTypes"]) == {"Ingress", "Egress"}
    ports = {p["name"] for p in _container(objs)["ports"]}
    for rule in policy["ingress"]:
        assert rule["from"], "a rule without peers admits everyone"
        assert {p["port"] for p in rule["ports"]} <= ports
    [api, prom] = policy["ingress"]
    assert [p["ipBlock"]["cidr"] for p in api["from"]] == ["10.0.0.10/32", "10.0.0.11/32"]
    [peer] = prom["from"]
    assert peer["namespaceSelector"]["matchLabels"] == {"kubernetes.io/metadata.name": "monitoring"}
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    [dns, to_api, backend] = policy["egress"]
    assert "to" not in dns and {p["port"] for p in dns["ports"]} == {53}
    assert to_api["to"] == api["from"] and {p["port"] for p in to_api["ports"]} == {443, 6443}
    assert {p["port"] for p in backend["ports"]} == {8428}


def test_networkpolicy_without_apiserver_addresses_admits_prometheus_only(rendered: dict[str, list[Obj]]) -> None:
    # `helm template` cannot look up the API server's endpoints: no address is admitted rather than all.
    policy = find(rendered["default"], "NetworkPolicy", NAME, NAMESPACE)["spec"]
    assert len(policy["ingress"]) == 1 and "ipBlock" not in policy["ingress"][0]["from"][0]
    assert all(rule.get("from") for rule in policy["ingress"])


def test_notes_give_the_first_read_and_the_warnings(tmp_path: Path) -> None:
    helm4 = require_binary("helm")  # helm 3's client dry-run still asks a cluster for its version
    args = ["install", RELEASE, str(CHART), "-n", NAMESPACE, "--dry-run=client"]
    notes = helm_run(helm4, args, None, tmp_path).stdout.partition("NOTES:")[2]
    assert "kubectl get --raw /apis/custom.metrics.k8s.io/v1beta2" in notes
    assert "tls.caBundle is empty" in notes and "admits no kube-apiserver address" in notes
    ready = {"certManager": {"enabled": True}, "networkPolicy": {"apiServer": {"cidrs": ["10.0.0.1/32"]}}}
    notes = helm_run(helm4, args, ready, tmp_path).stdout.partition("NOTES:")[2]
    assert "kubectl get --raw /apis/custom.metrics.k8s.io/v1beta2" in notes and "WARNING" not in notes


def test_packaged_chart_carries_the_files(tmp_path: Path) -> None:
    proc = helm_run(require_binary("helm"), ["package", str(CHART), "-d", str(tmp_path)], None, tmp_path)
    assert proc.returncode == 0, proc.stderr
    [package] = tmp_path.glob("llm-hpa-adapter-*.tgz")
    with tarfile.open(package) as tar:
        member = tar.extractfile("llm-hpa-adapter/files/llm-hpa-adapter.json")
        assert member is not None and member.read() == artifacts.DASHBOARD.read_bytes()


# --- the chart and the kustomize base agree ---------------------------------------------------------------

# Labels and annotations only one of the two tools adds (Helm's release bookkeeping, the catalog checksum
# that plays the role of kustomize's name hash).
_TOOL_KEYS = {
    "app.kubernetes.io/instance",
    "app.kubernetes.io/part-of",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
    "checksum/catalog",
}
_HASHED = re.compile(r"^(llm-hpa-adapter-catalog)-[a-z0-9]{10}$")


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _normal(v) for k, v in value.items() if k not in _TOOL_KEYS}
        return {k: v for k, v in out.items() if not (k in ("labels", "annotations") and v == {})}
    if isinstance(value, list):
        return [_normal(v) for v in value]
    if isinstance(value, str):
        return _HASHED.sub(r"\1", value)
    return value


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, kubectl_path: str) -> tuple[list[Obj], list[Obj]]:
    base = render(MANIFESTS)
    placeholder = of_kind(base, "APIService")[0]["spec"]["caBundle"]
    cidr = find(base, "NetworkPolicy", NAME, NAMESPACE)["spec"]["ingress"][0]["from"][0]["ipBlock"]["cidr"]
    same = {  # the base's settings, as chart values
        "tls": {"caBundle": placeholder},
        "networkPolicy": {"apiServer": {"cidrs": [cidr]}},
        "prometheusRule": {"enabled": True},
    }
    chart = template(require_binary("helm"), same, tmp_path_factory.mktemp("same"))
    return [_normal(o) for o in base], [_normal(o) for o in chart]


_COMPARED = (
    "Deployment",
    "Service",
    "ServiceAccount",
    "APIService",
    "ClusterRole",
    "ClusterRoleBinding",
    "RoleBinding",
    "PodDisruptionBudget",
    "NetworkPolicy",
    "ConfigMap",
    "PrometheusRule",
)


def test_chart_renders_every_object_of_the_base(both: tuple[list[Obj], list[Obj]]) -> None:
    base, chart = both
    key = lambda o: (o["kind"], o["metadata"]["name"], o["metadata"].get("namespace"))  # noqa: E731
    # Helm leaves the namespace to `--create-namespace` (and Pod Security labels to the user: docs/deploy.md).
    assert {key(o) for o in base if o["kind"] != "Namespace"} <= {key(o) for o in chart}
    assert {o["kind"] for o in base} - {"Namespace"} == set(_COMPARED)


@pytest.mark.parametrize("kind", _COMPARED)
def test_chart_and_base_agree(kind: str, both: tuple[list[Obj], list[Obj]]) -> None:
    base, chart = both
    for obj in of_kind(base, kind):
        name, namespace = obj["metadata"]["name"], obj["metadata"].get("namespace")
        theirs = find(chart, kind, name, namespace)
        assert {k: v for k, v in theirs.items() if k != "metadata"} == {
            k: v for k, v in obj.items() if k != "metadata"
        }, f"{kind} {name} differs"


# --- the kube-apiserver's addresses, looked up at install time ----------------------------------------------


@pytest.fixture
def fake_cluster(tmp_path: Path) -> Iterator[tuple[FakeKube, Path]]:
    """The fake kube-apiserver with the discovery helm asks for and the ``default/kubernetes`` Endpoints of a
    dual-stack control plane; yields it and a kubeconfig for it."""
    fake = FakeKube()

    def answer(body: dict[str, Any]) -> Any:
        return lambda req, out: out.send_json(200, body)

    endpoints = {
        "kind": "Endpoints",
        "apiVersion": "v1",
        "metadata": {"name": "kubernetes", "namespace": "default"},
        "subsets": [
            {"addresses": [{"ip": "172.18.0.2"}, {"ip": "fd00::2"}], "ports": [{"name": "https", "port": 6443}]}
        ],
    }
    resources = [{"name": "endpoints", "namespaced": True, "kind": "Endpoints", "verbs": ["get", "list"]}]
    fake.add_route("GET", r"/version", answer({"major": "1", "minor": "31", "gitVersion": "v1.31.0"}))
    fake.add_route(
        "GET", r"/api", answer({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
    )
    fake.add_route("GET", r"/apis", answer({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}))
    fake.add_route("GET", r"/api/v1", answer({"kind": "APIResourceList", "groupVersion": "v1", "resources": resources}))
    fake.add_route("GET", r"/api/v1/namespaces/default/endpoints/kubernetes", answer(endpoints))
    with fake:
        fake.write_kubeconfig(tmp_path / "kubeconfig")
        yield fake, tmp_path / "kubeconfig"


def _policy_with_cluster(kubeconfig: Path, values: dict[str, Any], tmp: Path) -> dict[str, Any]:
    # helm 3's server dry-run is what `helm install` does to render (lookup asks the cluster); helm 4's also maps
    # every rendered kind through discovery, which this fake does not serve.
    extra = ("--dry-run=server", "--kubeconfig", str(kubeconfig), "--show-only", "templates/networkpolicy.yaml")
    [policy] = template(require_binary("helm3"), values, tmp, *extra)
    return dict(policy["spec"])


def test_networkpolicy_admits_the_apiserver_endpoints_on_install(
    fake_cluster: tuple[FakeKube, Path], tmp_path: Path
) -> None:
    fake, kubeconfig = fake_cluster
    policy = _policy_with_cluster(kubeconfig, {"networkPolicy": {"apiServer": {"cidrs": ["10.9.0.0/28"]}}}, tmp_path)
    assert fake.count_requests("/api/v1/namespaces/default/endpoints/kubernetes", watch=False) >= 1
    want = [{"ipBlock": {"cidr": c}} for c in ("10.9.0.0/28", "172.18.0.2/32", "fd00::2/128")]
    assert policy["ingress"][0]["from"] == want
    assert policy["egress"][1]["to"] == want
    # Off: only the given CIDRs, even with a cluster to ask.
    off = {"networkPolicy": {"apiServer": {"cidrs": ["10.9.0.0/28"], "lookupEndpoints": False}}}
    assert _policy_with_cluster(kubeconfig, off, tmp_path)["ingress"][0]["from"] == want[:1]


# The base's backend Components and the chart values that say the same.
_COMPONENTS = {
    "mimir-tenant": {
        "prometheus": {
            "url": "http://mimir-query-frontend.mimir.svc:8080/prometheus",
            "flavour": "mimir",
            "tenant": "gpu-fleet",
        }
    },
    "locked-down-prometheus": {
        "prometheus": {
            "url": "https://thanos-querier.openshift-monitoring.svc:9091",
            "flavour": "thanos",
            "ca": {"configMap": "llm-hpa-adapter-backend-ca", "key": "service-ca.crt"},
            "bearerToken": {"serviceAccountToken": True},
        }
    },
}


@pytest.mark.parametrize("component", sorted(_COMPONENTS))
def test_backend_values_render_the_deployment_of_the_component(
    component: str, tmp_path: Path, kubectl_path: str
) -> None:
    overlay = with_components(MANIFESTS, [MANIFESTS / "backends" / component], tmp_path)
    base = find(render(overlay), "Deployment", NAME, NAMESPACE)
    chart = find(template(require_binary("helm"), _COMPONENTS[component], tmp_path), "Deployment", NAME, NAMESPACE)
    assert _normal(chart)["spec"] == _normal(base)["spec"]
