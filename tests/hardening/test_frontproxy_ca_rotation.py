"""Bullet "front-proxy CA rotation": ``kube-system/extension-apiserver-authentication`` was read once at start.

After the cluster rotated its front-proxy CA, the aggregator got 401 until the adapter restarted. Against
the real adapter process reading the ConfigMap from a fake kube API (re-read every 0.5 s here; 60 s by
default): rotate the CA in the ConfigMap, and the aggregator's new certificate is accepted without a
restart while the old CA's certificate no longer vouches for ``X-Remote-*`` headers.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx

from adapter.certs import make_ca, make_client_cert
from tests.hardening.conftest import PKI, SecureAdapter, write_pair

PATH = "/apis/custom.metrics.k8s.io/v1beta2"
HEADERS = {"X-Remote-User": "system:serviceaccount:kube-system:horizontal-pod-autoscaler"}


def configmap(ca_pem: bytes) -> dict[str, str]:
    return {
        "requestheader-client-ca-file": ca_pem.decode(),
        "requestheader-allowed-names": json.dumps(["front-proxy-client"]),
        "requestheader-username-headers": json.dumps(["X-Remote-User"]),
        "requestheader-group-headers": json.dumps(["X-Remote-Group"]),
        "requestheader-extra-headers-prefix": json.dumps(["X-Remote-Extra-"]),
    }


def status(adapter: SecureAdapter, pki: PKI, cert: tuple[str, str]) -> int:
    try:
        return adapter.get(PATH, cert=cert, headers=HEADERS, timeout=10).status_code
    except httpx.TransportError:
        return 0  # refused in the TLS handshake


def test_rotated_front_proxy_ca_is_trusted_without_restart(secure_adapter, pki: PKI, kube, tmp_path: Path) -> None:
    policy, kubeconfig = kube
    old_ca, new_ca = make_ca("front-proxy-ca-2025"), make_ca("front-proxy-ca-2026")
    old_client = write_pair(make_client_cert(old_ca, "front-proxy-client"), tmp_path, "old-client")
    new_client = write_pair(make_client_cert(new_ca, "front-proxy-client"), tmp_path, "new-client")
    policy.configmap.update(configmap(old_ca.cert_pem()))
    adapter = secure_adapter(
        "--authentication-kubeconfig", str(kubeconfig), "--authentication-configmap-refresh", "0.5"
    )
    assert status(adapter, pki, old_client) == 200
    assert status(adapter, pki, new_client) == 0  # unknown CA: the handshake refuses it

    policy.configmap.update(configmap(new_ca.cert_pem()))  # the cluster rotates its front-proxy CA
    deadline = time.monotonic() + 60
    while status(adapter, pki, new_client) != 200:
        assert time.monotonic() < deadline, f"the new front-proxy CA was never trusted: {adapter.log()}"
        time.sleep(0.2)
    assert adapter.proc is not None and adapter.proc.poll() is None  # same process: no restart
    assert status(adapter, pki, old_client) == 401  # the old CA no longer vouches for X-Remote-*
    assert [r["spec"]["user"] for r in policy.reviews][-1] == HEADERS["X-Remote-User"]


def test_unreadable_configmap_keeps_the_last_settings(secure_adapter, pki: PKI, kube, tmp_path: Path) -> None:
    policy, kubeconfig = kube
    ca = make_ca("front-proxy-ca")
    client = write_pair(make_client_cert(ca, "front-proxy-client"), tmp_path, "client")
    policy.configmap.update(configmap(ca.cert_pem()))
    adapter = secure_adapter(
        "--authentication-kubeconfig", str(kubeconfig), "--authentication-configmap-refresh", "0.5"
    )
    assert status(adapter, pki, client) == 200
    policy.configmap["requestheader-client-ca-file"] = "-----BEGIN CERTIFICATE-----\ngarbage\n"
    deadline = time.monotonic() + 30
    while "extension-apiserver-authentication" not in adapter.log():
        assert time.monotonic() < deadline, "the adapter never re-read the ConfigMap"
        time.sleep(0.2)
    assert status(adapter, pki, client) == 200
    assert adapter.proc is not None and adapter.proc.poll() is None
