"""The one rule for reaching the Kubernetes API (adapter/kubeconfig.py), shared by the pod source and auth."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kubernetes.config.config_exception import ConfigException

from adapter.kubeconfig import api_client


def _kubeconfig(path: Path, server: str, token: str) -> Path:
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "one",
                "clusters": [{"name": "one", "cluster": {"server": server}}],
                "users": [{"name": "one", "user": {"token": token}}],
                "contexts": [{"name": "one", "context": {"cluster": "one", "user": "one"}}],
            }
        )
    )
    return path


def test_a_named_kubeconfig_wins_even_inside_a_pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    path = _kubeconfig(tmp_path / "config", "https://127.0.0.1:6443", "abc")
    before = path.read_text()
    client = api_client(str(path))
    assert client.configuration.host == "https://127.0.0.1:6443"
    assert list(client.configuration.api_key.values()) == ["Bearer abc"]
    assert path.read_text() == before  # never written back


def test_inside_a_pod_without_a_kubeconfig_the_service_account_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    # No service-account token on this machine: the in-cluster loader (not the kubeconfig one) refuses.
    with pytest.raises(ConfigException, match="[Ss]ervice"):
        api_client(None)


def test_outside_a_pod_the_kubeconfig_and_context_are_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    path = _kubeconfig(tmp_path / "config", "https://127.0.0.2:6443", "xyz")
    assert api_client(str(path), context="one").configuration.host == "https://127.0.0.2:6443"
    with pytest.raises(ConfigException):
        api_client(str(path), context="missing")
