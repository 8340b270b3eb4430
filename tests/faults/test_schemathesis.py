"""schemathesis against the served OpenAPI v3 document: no generated request may produce a 5xx.

The backend is a real Prometheus holding a small fleet, so generated requests that name real objects
exercise the full read path, and the rest exercise validation and routing.
"""

from __future__ import annotations

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error

from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build


@pytest.fixture(scope="module")
def served(prometheus: TestBackend):
    now = float(int(time.time()) - 30)
    pods = [
        PodSpec(f"web-6f7d8c9b5-s{i}", gpus=2, layout="honor", labels={"app": "web"}, deployment="web")
        for i in range(2)
    ]
    prometheus.load(build("default", pods, now))
    with running_adapter(Settings(prometheus_url=prometheus.url, pod_source="prometheus"), clock=lambda: now) as url:
        yield url


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_no_server_errors(served: str, version: str) -> None:
    # Driven by hand rather than through schemathesis' pytest plugin, which does not load under pytest 9.
    schema = schemathesis.openapi.from_url(f"{served}/openapi/v3/apis/custom.metrics.k8s.io/{version}")
    schema.config.base_url = served  # the document's paths are absolute, served from the same origin
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 4
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        def check(case) -> None:
            response = case.call(timeout=30)
            case.validate_response(response, checks=[not_a_server_error])

        check()
