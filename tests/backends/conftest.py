"""The gateway world shared by the backend tests: a fleet loaded into the session's real Prometheus and
VictoriaMetrics, and an nginx gateway in front of both (tests/support/gateway.py)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from adapter.query.backend import BackendAccess
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build
from tests.support.gateway import NginxGateway

PODS = [
    PodSpec(f"web-6f7d8c9b5-g{i}", gpus=2, layout="honor", labels={"app": "web"}, deployment="web") for i in range(3)
]


@dataclasses.dataclass
class World:
    ns: str
    now: float
    gw: NginxGateway
    secrets_dir: Path

    def path(self, metric: str = "gpu_utilization_p90") -> str:
        return f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{self.ns}/pods/%2A/{metric}?labelSelector=app%3Dweb"

    def file(self, name: str, text: str) -> str:
        path = self.secrets_dir / name
        path.write_text(text)
        return str(path)

    def tls(self, **overrides: object) -> BackendAccess:
        """Everything the mTLS + bearer server wants."""
        base = BackendAccess(
            ca_file=self.gw.ca_file,
            cert_file=self.gw.client_cert,
            key_file=self.gw.client_key,
            token_file=self.file("token", self.gw.token + "\n"),
        )
        return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def world(
    prometheus: TestBackend, victoriametrics: TestBackend, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    ns = f"gw-{uuid.uuid4().hex[:8]}"
    now = float(int(time.time()) - 30)
    for backend in (prometheus, victoriametrics):
        backend.load(build(ns, PODS, now))
    gw = NginxGateway(prometheus.url, victoriametrics.url).start()
    try:
        yield World(ns, now, gw, tmp_path_factory.mktemp("secrets"))
    finally:
        gw.close()
