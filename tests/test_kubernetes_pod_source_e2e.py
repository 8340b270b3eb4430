"""End to end with the Kubernetes-API pod source: the pods behind a selector and a Deployment come from a
watch (through the official client) of a small fake of the pods/deployments list+watch endpoints — no
kube-apiserver can run here — and the values from a real Prometheus."""

from __future__ import annotations

import time

import httpx

from adapter.pods.kubernetes import KubernetesPodSource
from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend
from tests.support.fake_kube import FakeKube
from tests.support.fleet_data import PodSpec, build, expected


def test_selector_and_deployment_pods_come_from_the_watch(prometheus: TestBackend, unique_ns: str) -> None:
    now = float(int(time.time()) - 30)
    pods = [PodSpec(f"llama-5d8f7b9c6-k{i}", gpus=2, layout="honor", labels={"app": "llama"}) for i in range(3)]
    # A pod whose series linger in Prometheus but that Kubernetes says is terminating: never served.
    gone = PodSpec("llama-5d8f7b9c6-gone", gpus=2, layout="honor", labels={"app": "llama"})
    prometheus.load(build(unique_ns, [*pods, gone], now))
    with FakeKube() as kube:
        for p in pods:
            kube.put_pod(unique_ns, p.name, {"app": "llama", "pod-template-hash": "5d8f7b9c6"})
        kube.put_pod(unique_ns, gone.name, {"app": "llama"}, terminating=True)
        kube.put_deployment(unique_ns, "llama", {"app": "llama"})
        source = KubernetesPodSource(api_client=kube.api_client())
        settings = Settings(prometheus_url=prometheus.url, pod_source="kubernetes")
        with running_adapter(settings, clock=lambda: now, pod_source=source) as url:
            deadline = time.monotonic() + 20
            while httpx.get(url + "/readyz").status_code != 200 and time.monotonic() < deadline:
                time.sleep(0.1)
            base = f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}"
            r = httpx.get(f"{base}/pods/*/gpu_utilization_p90", params={"labelSelector": "app=llama"})
            assert r.status_code == 200, r.text
            assert sorted(i["describedObject"]["name"] for i in r.json()["items"]) == [p.name for p in pods]
            r = httpx.get(f"{base}/deployments.apps/llama/inference_queue_depth")
            assert r.status_code == 200, r.text
            value = float(parse_quantity(r.json()["items"][0]["value"]))
            assert value == sum(expected(p, "inference_queue_depth") for p in pods)
            # A pod added to the cluster appears without any restart (the watch delivers it).
            extra = PodSpec("llama-5d8f7b9c6-new", gpus=1, layout="honor", labels={"app": "llama"})
            prometheus.load(build(unique_ns, [extra], now))
            kube.put_pod(unique_ns, extra.name, {"app": "llama"})
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                names = {
                    i["describedObject"]["name"]
                    for i in httpx.get(
                        f"{base}/pods/*/gpu_utilization_p90", params={"labelSelector": "app=llama"}
                    ).json()["items"]
                }
                if extra.name in names:
                    break
                time.sleep(0.2)
            assert extra.name in names
            assert httpx.get(f"{base}/deployments.apps/nope/inference_queue_depth").status_code == 404
