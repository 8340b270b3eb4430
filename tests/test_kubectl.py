"""The real kubectl reads the adapter: `kubectl get --raw` for pods/* with a selector and a Deployment."""

from __future__ import annotations

import json
import time

import pytest

from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build, expected
from tests.support.kubectl_raw import kubectl_raw

pytestmark = pytest.mark.binary("kubectl")


kubectl = kubectl_raw


def test_kubectl_get_raw(prometheus: TestBackend, unique_ns: str, tmp_path) -> None:
    now = float(int(time.time()) - 30)
    pods = [
        PodSpec(f"web-6f7d8c9b5-p{i}", gpus=2, layout="honor", labels={"app": "web"}, deployment="web")
        for i in range(3)
    ]
    prometheus.load(build(unique_ns, pods, now))
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with running_adapter(settings, clock=lambda: now) as url:
        done = kubectl(
            url,
            str(tmp_path),
            f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}/pods/*/llm_composite_load"
            "?labelSelector=app%3Dweb",
        )
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert sorted(i["describedObject"]["name"] for i in doc["items"]) == [p.name for p in pods]

        done = kubectl(
            url,
            str(tmp_path),
            f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{unique_ns}/deployments.apps/web/inference_queue_depth",
        )
        assert done.returncode == 0, done.stderr
        (item,) = json.loads(done.stdout)["items"]
        assert item["metricName"] == "inference_queue_depth"
        assert float(item["value"]) == sum(expected(p, "inference_queue_depth") for p in pods)

        done = kubectl(
            url, str(tmp_path), f"/apis/custom.metrics.k8s.io/v1beta1/namespaces/{unique_ns}/pods/*/no_such_metric"
        )
        assert done.returncode == 1
        assert "Error from server (NotFound)" in done.stderr
        assert "the server could not find the metric no_such_metric for pods" in done.stderr
