"""Issue 11 row 5, end to end: a composite term with no series for any pod in scope is a 503, never a value.

Before, with the GPU series missing the composite silently re-weighted the other terms (0.99 -> 0.84 for every
pod). Now: no GPU series for any pod of the Deployment -> 503 naming the term; no finished request anywhere
(the latency term says ``when_missing: idle``) -> still served, the latency term reading 0.
"""

from __future__ import annotations

import math
import time

from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import get, running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build, expected

BASE = "/apis/custom.metrics.k8s.io/v1beta2/namespaces"


def test_no_gpu_series_for_any_pod_is_a_503_and_no_latency_anywhere_is_served(
    prometheus: TestBackend, unique_ns: str
) -> None:
    app = {"app": "nogpu"}
    pods = [
        PodSpec(f"nogpu-5d8f7b9c6-aaaa{i}", gpus=0, layout="honor", labels=app, deployment="nogpu", with_gpu=False)
        for i in range(2)
    ]
    quiet = {"app": "quiet"}
    pods += [
        PodSpec(
            f"quiet-5d8f7b9c6-bbbb{i}", gpus=1, layout="honor", labels=quiet, deployment="quiet", with_latency=False
        )
        for i in range(2)
    ]
    now = float(int(time.time()) - 30)
    prometheus.load(build(unique_ns, pods, now))
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with running_adapter(settings, clock=lambda: now) as url:
        for path, params in (
            (f"{BASE}/{unique_ns}/pods/*/llm_composite_load", {"labelSelector": "app=nogpu"}),
            (f"{BASE}/{unique_ns}/deployments.apps/nogpu/llm_composite_load", {}),
        ):
            r = get(f"{url}{path}", params=params)
            assert r.status_code == 503, r.text
            status = r.json()
            assert status["kind"] == "Status" and status["reason"] == "ServiceUnavailable"
            assert "gpu_utilization_p90" in status["message"]
        # One named pod without GPU series: that pod has no value (404), as for any metric it lacks.
        r = get(f"{url}{BASE}/{unique_ns}/pods/{pods[0].name}/llm_composite_load")
        assert r.status_code == 404, r.text
        # No request finished on any pod: the latency term reads 0, the composite is still served.
        r = get(f"{url}{BASE}/{unique_ns}/pods/*/llm_composite_load", params={"labelSelector": "app=quiet"})
        assert r.status_code == 200, r.text
        items = {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}
        assert set(items) == {p.name for p in pods[2:]}
        for p in pods[2:]:
            want = expected(p, "llm_composite_load")
            assert want is not None and math.isclose(items[p.name], want, abs_tol=0.0006)
