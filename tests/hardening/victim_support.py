"""The victim of the front-door attacks: an HPA controller reaching the adapter through kube-aggregator.

``Victim.load`` writes one namespace's fleet (one vLLM pod behind ``app=web``) into the real backend;
``Victim.value`` asks for its ``llm_composite_load`` the way the HPA controller does through the front proxy
(front-proxy client certificate, ``X-Remote-User`` of the HPA controller) and returns the served value, which
the test compares with the value computed from the generated data (``fleet_data.expected``), never with one
the backend was asked for.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

import pytest

from adapter.quantity import parse_quantity
from tests.hardening.conftest import SecureAdapter
from tests.support.fleet_data import PodSpec, build, expected

METRIC = "llm_composite_load"
HPA_USER = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
HPA_GROUPS = "system:serviceaccounts"


# The flags that make an adapter trust the test's front-proxy CA and ask the fake kube API for reviews.
def front_proxy_args(pki, kubeconfig) -> tuple[str, ...]:  # type: ignore[no-untyped-def]
    return (
        "--authentication-kubeconfig",
        str(kubeconfig),
        "--authentication-skip-lookup",
        "--requestheader-client-ca-file",
        pki.fp_ca_file,
        "--requestheader-allowed-names",
        "front-proxy-client",
    )


@dataclass
class Victim:
    namespace: str
    pod: PodSpec

    @classmethod
    def load(cls, backend) -> Victim:  # type: ignore[no-untyped-def]
        namespace = f"victim-{uuid.uuid4().hex[:6]}"
        pod = PodSpec("web-6f7d8c9b5-vvvv1", gpus=1, layout="honor", labels={"app": "web"}, deployment="web")
        backend.load(build(namespace, [pod], float(int(time.time()) - 30)))
        return cls(namespace, pod)

    @property
    def path(self) -> str:
        return (
            f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{self.namespace}/pods/*/{METRIC}?labelSelector=app%3Dweb"
        )

    @property
    def want(self) -> float:
        value = expected(self.pod, METRIC)
        assert value is not None
        return value

    def value(self, adapter: SecureAdapter, pki, timeout: float = 30) -> float:  # type: ignore[no-untyped-def]
        """The served value, asserting the answer is the victim's own pod with a 200."""
        r = adapter.get(
            self.path,
            cert=pki.front_proxy,
            headers={"X-Remote-User": HPA_USER, "X-Remote-Group": HPA_GROUPS},
            timeout=timeout,
        )
        assert r.status_code == 200, (r.status_code, r.text[:300])
        items = r.json()["items"]
        assert [i["describedObject"]["name"] for i in items] == [self.pod.name]
        return float(parse_quantity(items[0]["value"]))

    def assert_served(self, adapter: SecureAdapter, pki) -> None:  # type: ignore[no-untyped-def]
        assert self.value(adapter, pki) == pytest.approx(self.want, rel=1e-3, abs=1e-3)
