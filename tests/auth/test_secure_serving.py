"""HTTPS, front-proxy authentication and delegated authorization, with real TLS.

Certificates are made by our own `certs` code. No kube-apiserver can run here: TokenReview and
SubjectAccessReview are answered by a small fake of those two endpoints (tests/support/fake_kube.py),
reached through the official kubernetes client exactly as in a cluster.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from adapter.auth.setup import Security, SecurityOptions
from adapter.auth.tls import TLSFiles
from adapter.certs import make_ca, make_client_cert, make_serving_cert
from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend
from tests.support.fake_kube import FakeHandler, FakeKube, FakeRequest
from tests.support.fleet_data import PodSpec, build

HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
HPA_HEADERS = [
    ("X-Remote-User", HPA_USER),
    ("X-Remote-Group", "system:serviceaccounts"),
    ("X-Remote-Group", "system:serviceaccounts:kube-system"),
    ("X-Remote-Extra-Authentication.kubernetes.io%2fcredential-Id", "JTI=abc"),
]


def write(pair, dir: Path, name: str) -> tuple[str, str]:
    cert, key = dir / f"{name}.crt", dir / f"{name}.key"
    cert.write_bytes(pair.cert_pem())
    key.write_bytes(pair.key_pem())
    return str(cert), str(key)


class Policy:
    """What the fake SubjectAccessReview endpoint decides, and every review it received."""

    def __init__(self) -> None:
        self.denied_users: set[str] = set()
        self.reviews: list[dict] = []
        self.tokens = {"good-token": {"username": "bob", "uid": "42", "groups": ["devs"]}}

    def sar(self, req: FakeRequest, out: FakeHandler) -> None:
        body = json.loads(req.body)
        self.reviews.append(body)
        denied = body["spec"]["user"] in self.denied_users
        status = {"allowed": not denied}
        if denied:
            status.update(denied=True, reason="RBAC: no rule allows it")
        out.send_json(201, {**body, "status": status})

    def token_review(self, req: FakeRequest, out: FakeHandler) -> None:
        body = json.loads(req.body)
        user = self.tokens.get(body["spec"]["token"])
        status = {"authenticated": True, "user": user} if user else {"authenticated": False}
        out.send_json(201, {**body, "status": status})


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca = make_ca("adapter-ca")
    fp_ca = make_ca("front-proxy-ca")
    other_ca = make_ca("someone-else")
    files = {
        "serving": write(make_serving_cert(ca, "llm-hpa-adapter", "custom-metrics"), d, "tls"),
        "front_proxy": write(make_client_cert(fp_ca, "front-proxy-client"), d, "front-proxy-client"),
        "wrong_cn": write(make_client_cert(fp_ca, "not-the-proxy"), d, "wrong-cn"),
        "other_ca": write(make_client_cert(other_ca, "front-proxy-client"), d, "other-ca"),
        "masters": write(make_client_cert(ca, "admin", organizations=["system:masters"]), d, "admin"),
        "alice": write(make_client_cert(ca, "alice", organizations=["team-a"]), d, "alice"),
    }
    (d / "ca.crt").write_bytes(ca.cert_pem())
    (d / "front-proxy-ca.crt").write_bytes(fp_ca.cert_pem())
    return d, files, ca


@pytest.fixture(scope="module")
def secure(pki, prometheus: TestBackend, tmp_path_factory):
    d, files, _ = pki
    policy = Policy()
    kube = FakeKube()
    kube.add_route("POST", r"/apis/authorization.k8s.io/v1/subjectaccessreviews", policy.sar)
    kube.add_route("POST", r"/apis/authentication.k8s.io/v1/tokenreviews", policy.token_review)
    kube.start()
    kubeconfig = kube.write_kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    ns = "secure-ns"
    now = float(int(time.time()) - 30)
    prometheus.load(
        build(
            ns, [PodSpec("web-6f7d8c9b5-aaaa1", gpus=2, layout="honor", labels={"app": "web"}, deployment="web")], now
        )
    )
    security = Security(
        SecurityOptions(
            tls=TLSFiles(
                *files["serving"], client_ca_file=str(d / "ca.crt"), requestheader_ca_file=str(d / "front-proxy-ca.crt")
            ),
            allowed_names=("front-proxy-client",),
            kubeconfig=str(kubeconfig),
            use_cluster=True,
            lookup_configmap=False,
        )
    )
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with running_adapter(settings, clock=lambda: now, security=security) as url:
        yield url, policy, security, ns
    kube.close()


def client(pki, cert: str | None) -> httpx.Client:
    d, files, _ = pki
    ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
    if cert is not None:
        ctx.load_cert_chain(*files[cert])
    return httpx.Client(verify=ctx, timeout=10)


def pods_path(ns: str) -> str:
    return f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/llm_composite_load?labelSelector=app%3Dweb"


def test_front_proxy_user_is_authorized_by_a_review_with_the_spec_attributes(pki, secure) -> None:
    url, policy, _, ns = secure
    policy.reviews.clear()
    r = client(pki, "front_proxy").get(url + pods_path(ns), headers=HPA_HEADERS)
    assert r.status_code == 200, r.text
    assert [i["describedObject"]["name"] for i in r.json()["items"]] == ["web-6f7d8c9b5-aaaa1"]
    (review,) = policy.reviews
    assert review == {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "namespace": ns,
                "verb": "get",
                "group": "custom.metrics.k8s.io",
                "version": "v1beta2",
                "resource": "pods",
                "subresource": "llm_composite_load",
                "name": "*",
            },
            "user": HPA_USER,
            "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
            "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"]},
        },
    }


@pytest.mark.parametrize(
    "path,attrs",
    [
        (
            "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/deployments.apps/web/qps",
            {
                "resourceAttributes": {
                    "namespace": "default",
                    "verb": "get",
                    "group": "custom.metrics.k8s.io",
                    "version": "v1beta1",
                    "resource": "deployments.apps",
                    "subresource": "qps",
                    "name": "web",
                }
            },
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta1/namespaces/default/metrics/queue_len",
            {
                "resourceAttributes": {
                    "namespace": "default",
                    "verb": "get",
                    "group": "custom.metrics.k8s.io",
                    "version": "v1beta1",
                    "resource": "metrics",
                    "name": "queue_len",
                }
            },
        ),
        (
            "/apis/custom.metrics.k8s.io/v1beta1",
            {"nonResourceAttributes": {"path": "/apis/custom.metrics.k8s.io/v1beta1", "verb": "get"}},
        ),
    ],
)
def test_review_attributes_per_path(pki, secure, path: str, attrs: dict) -> None:
    url, policy, _, _ = secure
    policy.reviews.clear()
    headers = [("X-Remote-User", "carol"), ("X-Remote-Group", "g1")]
    client(pki, "front_proxy").get(url + path, headers=headers)
    (review,) = policy.reviews
    assert {k: v for k, v in review["spec"].items() if k not in ("user", "groups")} == attrs
    assert review["spec"]["user"] == "carol" and review["spec"]["groups"] == ["g1", "system:authenticated"]


UNAUTHORIZED = (
    b'{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized",'
    b'"reason":"Unauthorized","code":401}\n'
)


def test_no_certificate_and_wrong_cn_are_401(pki, secure) -> None:
    url, _, _, ns = secure
    for cert in (None, "wrong_cn"):
        r = client(pki, cert).get(url + pods_path(ns), headers=HPA_HEADERS)
        assert (r.status_code, r.content) == (401, UNAUTHORIZED), cert


def test_headers_from_a_certificate_of_another_ca_are_not_trusted(pki, secure) -> None:
    url, policy, _, ns = secure
    # A certificate from the client CA (trusted for x509 login, not for the front proxy) with X-Remote-*
    # headers is its own CN, never the user named in the headers.
    policy.reviews.clear()
    client(pki, "alice").get(url + pods_path(ns), headers=HPA_HEADERS)
    assert [r["spec"]["user"] for r in policy.reviews] == ["alice"]
    # A certificate from a CA we do not trust at all does not get past the TLS handshake.
    with pytest.raises(httpx.TransportError):
        client(pki, "other_ca").get(url + pods_path(ns), headers=HPA_HEADERS)


def test_denied_review_is_403_with_upstream_message(pki, secure) -> None:
    url, policy, _, ns = secure
    policy.denied_users.add("mallory")
    try:
        r = client(pki, "front_proxy").get(url + pods_path(ns), headers=[("X-Remote-User", "mallory")])
        assert r.status_code == 403
        assert r.json() == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f'pods.custom.metrics.k8s.io "*" is forbidden: User "mallory" cannot get resource '
            f'"pods/llm_composite_load" in API group "custom.metrics.k8s.io" in the namespace "{ns}": '
            "RBAC: no rule allows it",
            "reason": "Forbidden",
            "details": {"name": "*", "group": "custom.metrics.k8s.io", "kind": "pods"},
            "code": 403,
        }
        r = client(pki, "front_proxy").get(
            url + "/apis/custom.metrics.k8s.io/v1beta1", headers=[("X-Remote-User", "mallory")]
        )
        assert r.status_code == 403
        assert r.json()["message"] == (
            'forbidden: User "mallory" cannot get path "/apis/custom.metrics.k8s.io/v1beta1": RBAC: no rule allows it'
        )
        assert r.json()["details"] == {}
    finally:
        policy.denied_users.discard("mallory")


def test_masters_skip_the_review_and_decisions_are_cached(pki, secure) -> None:
    url, policy, _, ns = secure
    policy.reviews.clear()
    assert client(pki, "masters").get(url + pods_path(ns)).status_code == 200
    assert (
        client(pki, "front_proxy")
        .get(url + pods_path(ns), headers=[("X-Remote-User", "x"), ("X-Remote-Group", "system:masters")])
        .status_code
        == 200
    )
    assert policy.reviews == []
    for _ in range(3):
        r = client(pki, "front_proxy").get(url + pods_path(ns), headers=[("X-Remote-User", "dave")])
        assert r.status_code == 200
    assert len(policy.reviews) == 1


def test_bearer_tokens_go_through_token_review(pki, secure) -> None:
    url, policy, _, ns = secure
    policy.reviews.clear()
    r = client(pki, None).get(url + pods_path(ns), headers={"Authorization": "Bearer good-token"})
    assert r.status_code == 200
    assert policy.reviews[-1]["spec"]["user"] == "bob"
    assert policy.reviews[-1]["spec"]["groups"] == ["devs", "system:authenticated"]
    r = client(pki, None).get(url + pods_path(ns), headers={"Authorization": "Bearer bad-token"})
    assert (r.status_code, r.content) == (401, UNAUTHORIZED)


def test_health_paths_need_no_credentials(pki, secure) -> None:
    url, _, _, _ = secure
    for path in ("/livez", "/readyz", "/healthz"):
        assert client(pki, None).get(url + path).text == "ok"


def test_tls_is_at_least_1_2(pki, secure) -> None:
    url, _, _, _ = secure
    d, _, _ = pki
    ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1  # deprecated in Python: exactly what must be refused
    with pytest.raises(httpx.TransportError):
        httpx.get(url + "/livez", verify=ctx)


def _served_serial(url: str, cafile: str) -> int:
    ctx = ssl.create_default_context(cafile=cafile)
    host, port = url.removeprefix("https://").split(":")
    import socket

    with socket.create_connection((host, int(port))) as raw, ctx.wrap_socket(raw, server_hostname="localhost") as tls:
        from cryptography import x509

        return x509.load_der_x509_certificate(tls.getpeercert(binary_form=True)).serial_number


def test_serving_certificate_rotates_without_restart(pki, secure) -> None:
    url, _, security, _ = secure
    d, files, ca = pki
    before = _served_serial(url, str(d / "ca.crt"))
    fresh = make_serving_cert(ca, "llm-hpa-adapter", "custom-metrics")
    time.sleep(0.01)  # a distinct mtime
    Path(files["serving"][1]).write_bytes(fresh.key_pem())
    Path(files["serving"][0]).write_bytes(fresh.cert_pem())
    assert security.reloader.check()
    after = _served_serial(url, str(d / "ca.crt"))
    assert before != after == fresh.cert.serial_number


@pytest.mark.binary("kubectl")
def test_kubectl_reads_a_metric_over_https_with_the_front_proxy_certificate(pki, prometheus, tmp_path) -> None:
    d, files, _ = pki
    ns = "kubectl-secure"
    now = float(int(time.time()) - 30)
    prometheus.load(build(ns, [PodSpec("web-6f7d8c9b5-bbbb1", gpus=1, layout="honor", labels={"app": "web"})], now))
    # kubectl cannot send X-Remote-* headers; with the front-proxy CA also trusted for x509 logins, its
    # certificate logs in as its CN, and the (fake) SubjectAccessReview endpoint authorizes it.
    policy = Policy()
    kube = FakeKube()
    kube.add_route("POST", r"/apis/authorization.k8s.io/v1/subjectaccessreviews", policy.sar)
    kube.start()
    security = Security(
        SecurityOptions(
            tls=TLSFiles(
                *files["serving"],
                client_ca_file=str(d / "front-proxy-ca.crt"),
                requestheader_ca_file=str(d / "front-proxy-ca.crt"),
            ),
            allowed_names=("front-proxy-client",),
            use_cluster=True,
            lookup_configmap=False,
            kubeconfig=str(kube.write_kubeconfig(tmp_path / "fake-kube")),
        )
    )
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with kube, running_adapter(settings, clock=lambda: now, security=security) as url:
        cert, key = files["front_proxy"]
        kubeconfig = tmp_path / "config"
        kubeconfig.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "c",
                    "clusters": [
                        {
                            "name": "c",
                            "cluster": {
                                "server": url.replace("127.0.0.1", "localhost"),
                                "certificate-authority": str(d / "ca.crt"),
                            },
                        }
                    ],
                    "users": [{"name": "u", "user": {"client-certificate": cert, "client-key": key}}],
                    "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                }
            )
        )
        done = subprocess.run(
            [
                "kubectl",
                "--kubeconfig",
                str(kubeconfig),
                "get",
                "--raw",
                f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/*/gpu_utilization_p90?labelSelector=app%3Dweb",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"},
        )
        assert done.returncode == 0, done.stderr
        assert [i["describedObject"]["name"] for i in json.loads(done.stdout)["items"]] == ["web-6f7d8c9b5-bbbb1"]
        assert {r["spec"]["user"] for r in policy.reviews} == {"front-proxy-client"}  # (+ /version from the dispatcher)


def test_request_header_ca_rotates_without_restart(pki, prometheus, tmp_path) -> None:
    """Replacing the front-proxy CA file: the new CA's client is trusted, the old one no longer vouches."""
    d, files, _ = pki
    old_ca, new_ca = make_ca("fp-old"), make_ca("fp-new")
    ca_file = tmp_path / "front-proxy-ca.crt"
    ca_file.write_bytes(old_ca.cert_pem())
    old_client = write(make_client_cert(old_ca, "front-proxy-client"), tmp_path, "old-client")
    new_client = write(make_client_cert(new_ca, "front-proxy-client"), tmp_path, "new-client")
    security = Security(
        SecurityOptions(
            tls=TLSFiles(*files["serving"], requestheader_ca_file=str(ca_file)),
            allowed_names=("front-proxy-client",),
            use_cluster=False,
        )
    )
    masters = [("X-Remote-User", "ops"), ("X-Remote-Group", "system:masters")]

    def status(cert: tuple[str, str]) -> int:
        ctx = ssl.create_default_context(cafile=str(d / "ca.crt"))
        ctx.load_cert_chain(*cert)
        try:
            return httpx.get(
                url + "/apis/custom.metrics.k8s.io/v1beta2", headers=masters, verify=ctx, timeout=10
            ).status_code
        except httpx.TransportError:
            return 0  # refused in the handshake

    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with running_adapter(settings, security=security) as url:
        assert status(old_client) == 200
        assert status(new_client) == 0  # not trusted yet: the handshake refuses it
        time.sleep(0.01)
        ca_file.write_bytes(new_ca.cert_pem())
        assert security.reloader.check()
        assert status(new_client) == 200
        assert status(old_client) == 401  # the old CA's certificate no longer vouches for X-Remote-*
