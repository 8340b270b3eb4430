"""Issue 11 row 11: one extreme value must omit that pod, not fail the list for every pod.

Through real backends: a pod whose engine reports 1e25 waiting requests, and (via a rewriting proxy in
front of the real backend, since a backend stamps instant-query samples with the evaluation time) a pod
whose sample arrives with a NaN or an absurd timestamp. The other pods are served with their values; the
bad ones are omitted and counted.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from adapter.forecast_service import WorkloadKey
from adapter.settings import Settings
from tests.hardening.test_forecast_range_custom_path import deployment_history
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import Series, TestBackend

GOOD, HUGE, BAD_TS = "llama-5d8f7b9c6-good1", "llama-5d8f7b9c6-huge1", "llama-5d8f7b9c6-badts"


class TimestampRewriter:
    """Forwards /api/v1/query* to a real backend; gives the samples of pod ``victim`` timestamp ``ts``."""

    def __init__(self, upstream: str, victim: str) -> None:
        self.upstream, self.victim, self.ts = upstream, victim, "NaN"
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                resp = httpx.post(
                    proxy.upstream + self.path,
                    content=body,
                    timeout=30,
                    trust_env=False,
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
                doc = resp.json()
                for item in (doc.get("data") or {}).get("result") or []:
                    if isinstance(item, dict) and item.get("metric", {}).get("pod") == proxy.victim and "value" in item:
                        item["value"][0] = "__TS__"
                payload = json.dumps(doc).replace('"__TS__"', proxy.ts).encode()
                self.send_response(resp.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def load(backend: TestBackend, ns: str) -> None:
    now = float(int(time.time()) - 20)
    ts = [now - 60 + 15 * i for i in range(5)]
    series = []
    for pod, waiting in ((GOOD, 3.0), (HUGE, 1e25), (BAD_TS, 4.0)):
        series.append(
            Series({"__name__": "vllm:num_requests_waiting", "namespace": ns, "pod": pod}, [(t, waiting) for t in ts])
        )
        # Every composite term needs its series (a missing GPU term would make the whole list a 503).
        series.append(
            Series(
                {
                    "__name__": "DCGM_FI_DEV_GPU_UTIL",
                    "namespace": ns,
                    "pod": pod,
                    "gpu": "0",
                    "UUID": f"GPU-{pod}",
                    "Hostname": "node-1",
                },
                [(t, 50.0) for t in ts],
            )
        )
        series.append(
            Series(
                {
                    "__name__": "kube_pod_labels",
                    "namespace": ns,
                    "pod": pod,
                    "label_app": "llama",
                    "job": "kube-state-metrics",
                },
                [(t, 1.0) for t in ts],
            )
        )
    backend.load(series)


@pytest.fixture
def rewriter(backend: TestBackend) -> Iterator[TimestampRewriter]:
    proxy = TimestampRewriter(backend.url, BAD_TS)
    yield proxy
    proxy.close()


def items(adapter: str, ns: str, metric: str) -> dict[str, str]:
    r = httpx.get(
        f"{adapter}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/{metric}",
        params={"labelSelector": "app=llama"},
        timeout=30,
        trust_env=False,
    )
    assert r.status_code == 200, r.text
    return {i["describedObject"]["name"]: i["value"] for i in r.json()["items"]}


@pytest.mark.parametrize("bad_ts", ["NaN", "1e20", "-5"])
def test_tenant_extreme_value_omits_only_that_pod(
    backend: TestBackend, unique_ns: str, rewriter: TimestampRewriter, bad_ts: str
) -> None:
    load(backend, unique_ns)
    rewriter.ts = bad_ts
    settings = Settings(prometheus_url=rewriter.url, backend=backend.kind, pod_source="prometheus")  # type: ignore[arg-type]
    with running_adapter(settings) as adapter:
        # Before the fix: a 500 for every pod (Decimal overflow formatting 1e25, gmtime of NaN).
        assert items(adapter, unique_ns, "inference_queue_depth") == {GOOD: "3"}
        composite = items(adapter, unique_ns, "llm_composite_load")
        assert set(composite) == {GOOD}
        metrics = httpx.get(f"{adapter}/metrics", timeout=30).text
        for reason in ("extreme_value", "bad_timestamp"):
            found = re.search(
                rf'llm_hpa_adapter_series_rejected_total\{{metric="inference_queue_depth",'
                rf'reason="{reason}"\}} (\S+)',
                metrics,
            )
            assert found is not None and float(found.group(1)) >= 1, reason


def test_tenant_extreme_forecast_omits_only_that_deployment(prometheus: TestBackend, unique_ns: str) -> None:
    """An absurd request rate (1e19/s) in one Deployment's history: its forecast is beyond what an HPA can
    read, so the external per-Deployment list omits it and still serves the other Deployment."""
    series = deployment_history(unique_ns, {"small": 4.0, "huge": 1e19})
    prometheus.load(series)
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", forecast_tick_s=0.2)
    path = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{unique_ns}/llm_load_forecast"
    with running_adapter(settings) as adapter:
        deadline = time.monotonic() + 60
        while True:
            r = httpx.get(adapter + path, params={"labelSelector": "deployment in (huge,small)"}, timeout=30)
            assert r.status_code == 200, r.text
            got = {i["metricLabels"]["deployment"]: i["value"] for i in r.json()["items"]}
            forecasts = APPS[adapter].state.forecasts.workloads()
            if got and all(s is not None for s in forecasts.values()) and len(forecasts) == 2:
                break
            assert time.monotonic() < deadline, (got, forecasts)
            time.sleep(0.3)
        assert set(got) == {"small"}
        huge = forecasts[WorkloadKey(unique_ns, ("huge",))]
        assert huge is not None and huge.peak is not None and huge.peak > 1e18  # it was fitted, not lost
