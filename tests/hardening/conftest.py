"""The adapter as deployed, attacked from outside: ``python -m adapter serve`` over real TLS in a child process.

``SecureAdapter`` starts the real CLI (so the flags, the server, the protocol and the security stack are all
the shipped ones) on a free loopback port; tests read its memory from ``/proc/<pid>/status``. TokenReview,
SubjectAccessReview and the authentication ConfigMap come from ``FakeKube`` (the only faked component: no
kube-apiserver can run here), reached through the official kubernetes client as in a cluster.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from adapter.certs import make_ca, make_client_cert, make_serving_cert
from adapter.demo.adapter_process import serve_command
from adapter.demo.servers import free_port
from tests.support.fake_kube import FakeHandler, FakeKube, FakeRequest

REPO = Path(__file__).resolve().parents[2]


def write_pair(pair, directory: Path, name: str) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    cert, key = directory / f"{name}.crt", directory / f"{name}.key"
    cert.write_bytes(pair.cert_pem())
    key.write_bytes(pair.key_pem())
    return str(cert), str(key)


@dataclass
class PKI:
    """A serving certificate, a client CA with an admin (system:masters) and a plain user, a front-proxy CA."""

    dir: Path
    ca: object
    fp_ca: object
    serving: tuple[str, str]
    admin: tuple[str, str]
    front_proxy: tuple[str, str]

    @property
    def ca_file(self) -> str:
        return str(self.dir / "ca.crt")

    @property
    def fp_ca_file(self) -> str:
        return str(self.dir / "front-proxy-ca.crt")

    def context(self, cert: tuple[str, str] | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_file)
        if cert is not None:
            ctx.load_cert_chain(*cert)
        return ctx


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> PKI:
    d = tmp_path_factory.mktemp("pki")
    ca, fp_ca = make_ca("adapter-ca"), make_ca("front-proxy-ca")
    (d / "ca.crt").write_bytes(ca.cert_pem())
    (d / "front-proxy-ca.crt").write_bytes(fp_ca.cert_pem())
    return PKI(
        d,
        ca,
        fp_ca,
        serving=write_pair(make_serving_cert(ca, "llm-hpa-adapter", "custom-metrics"), d, "tls"),
        admin=write_pair(make_client_cert(ca, "admin", organizations=["system:masters"]), d, "admin"),
        front_proxy=write_pair(make_client_cert(fp_ca, "front-proxy-client"), d, "front-proxy-client"),
    )


class SecureAdapter:
    """``python -m adapter serve`` over HTTPS as a child process; ``start()`` waits for ``/livez``."""

    def __init__(self, pki: PKI, prometheus_url: str, log_dir: Path, extra_args: Sequence[str] = ()) -> None:
        self.pki = pki
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.log_path = log_dir / "adapter.log"
        self.command = serve_command(
            prometheus_url,
            self.port,
            "--tls-cert-file",
            pki.serving[0],
            "--tls-private-key-file",
            pki.serving[1],
            "--client-ca-file",
            pki.ca_file,
            *extra_args,
        )
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float = 60.0) -> SecureAdapter:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
        env["HOME"] = str(self.log_path.parent)
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(
                self.command,
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the adapter exited ({self.proc.returncode}): {self.log()}")
            try:
                if httpx.get(self.url + "/livez", verify=self.pki.context(), timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"the adapter did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def status_kib(self, field_name: str) -> int:
        """A ``/proc/<pid>/status`` field in KiB (VmRSS, VmHWM, ...)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
        raise KeyError(field_name)

    def get(self, path: str, cert: tuple[str, str] | None = None, **kwargs: object) -> httpx.Response:
        with httpx.Client(verify=self.pki.context(cert), timeout=kwargs.pop("timeout", 30)) as client:  # type: ignore[arg-type]
            return client.get(self.url + path, **kwargs)  # type: ignore[arg-type]

    def tls_socket(self, cert: tuple[str, str] | None = None) -> ssl.SSLSocket:
        """A fresh TLS connection (handshake done) to the adapter."""
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        return self.pki.context(cert).wrap_socket(raw, server_hostname="127.0.0.1")


@pytest.fixture
def secure_adapter(pki: PKI, prometheus, tmp_path: Path) -> Iterator[type[SecureAdapter]]:  # type: ignore[no-untyped-def]
    """A factory: ``secure_adapter(*extra_args)`` starts one adapter; all are stopped after the test."""
    started: list[SecureAdapter] = []

    def make(*extra_args: str) -> SecureAdapter:
        adapter = SecureAdapter(pki, prometheus.url, tmp_path, extra_args)
        started.append(adapter)
        return adapter.start()

    yield make  # type: ignore[misc]
    for adapter in started:
        adapter.stop()


@dataclass
class KubePolicy:
    """What the fake TokenReview / SubjectAccessReview endpoints decide, and what they received."""

    denied: list[dict[str, str]] = field(default_factory=list)  # resourceAttributes subsets denied, per user
    reviews: list[dict] = field(default_factory=list)  # type: ignore[type-arg]
    token_reviews: list[str] = field(default_factory=list)
    tokens: dict[str, dict] = field(default_factory=dict)  # type: ignore[type-arg]
    configmap: dict[str, str] = field(default_factory=dict)
    token_gate: object = None  # a threading.Event TokenReview waits on (a slow reviewer), when set
    sar_gates: dict[str, object] = field(default_factory=dict)  # user -> threading.Event its reviews wait on

    def sar(self, req: FakeRequest, out: FakeHandler) -> None:
        body = json.loads(req.body)
        self.reviews.append(body)
        spec = body["spec"]
        gate = self.sar_gates.get(spec["user"])
        if gate is not None:
            gate.wait(60)  # type: ignore[attr-defined]
        attrs = {"user": spec["user"], **spec.get("resourceAttributes", {})}
        denied = any(all(attrs.get(k) == v for k, v in rule.items()) for rule in self.denied)
        status = {"allowed": not denied, **({"denied": True, "reason": "RBAC: no rule allows it"} if denied else {})}
        try:
            out.send_json(201, {**body, "status": status})
        except OSError:
            pass  # the adapter gave up waiting (a gated review)

    def token_review(self, req: FakeRequest, out: FakeHandler) -> None:
        body = json.loads(req.body)
        token = body["spec"]["token"]
        self.token_reviews.append(token)
        if self.token_gate is not None:
            self.token_gate.wait(60)  # type: ignore[attr-defined]
        user = self.tokens.get(token)
        status = {"authenticated": True, "user": user} if user else {"authenticated": False}
        try:
            out.send_json(201, {**body, "status": status})
        except OSError:
            pass  # the adapter gave up waiting

    def get_configmap(self, req: FakeRequest, out: FakeHandler) -> None:
        out.send_json(
            200,
            {
                "kind": "ConfigMap",
                "apiVersion": "v1",
                "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
                "data": dict(self.configmap),
            },
        )


@pytest.fixture
def kube(tmp_path: Path) -> Iterator[tuple[KubePolicy, Path]]:
    """A fake kube-apiserver answering reviews and the authentication ConfigMap; yields (policy, kubeconfig)."""
    policy = KubePolicy()
    fake = FakeKube()
    fake.add_route("POST", r"/apis/authorization.k8s.io/v1/subjectaccessreviews", policy.sar)
    fake.add_route("POST", r"/apis/authentication.k8s.io/v1/tokenreviews", policy.token_review)
    fake.add_route(
        "GET", r"/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication", policy.get_configmap
    )
    fake.start()
    try:
        yield policy, fake.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        if policy.token_gate is not None:
            policy.token_gate.set()  # type: ignore[attr-defined]
        for gate in policy.sar_gates.values():
            gate.set()  # type: ignore[attr-defined]
        fake.close()
