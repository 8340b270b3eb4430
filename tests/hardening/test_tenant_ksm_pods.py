"""The kube-state-metrics pod source leaves out pods that are terminating or finished (issue 11 bullet).

Real backends hold what kube-state-metrics exports for five pods of one Deployment: one running, one being
deleted (``kube_pod_deletion_timestamp``), one Succeeded, one Failed, and one that was Pending and is now
Running (its ``phase="Succeeded"`` series is 0). Only the running ones may be served, both for a selector
and for the Deployment (the HPA averages every item it gets), as the Kubernetes source does.
"""

from __future__ import annotations

import time

import httpx

from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import Series, TestBackend

DEP, RS = "llama", "llama-5d8f7b9c6"
RUNNING, DELETING, SUCCEEDED, FAILED, RESTARTED = (f"{RS}-{s}" for s in ("run01", "del01", "suc01", "fai01", "run02"))
PHASES = {RUNNING: "Running", DELETING: "Running", SUCCEEDED: "Succeeded", FAILED: "Failed", RESTARTED: "Running"}
WAITING = {RUNNING: 2.0, DELETING: 40.0, SUCCEEDED: 30.0, FAILED: 20.0, RESTARTED: 4.0}


def load(backend: TestBackend, ns: str) -> None:
    now = float(int(time.time()) - 20)
    ts = [now - 60 + 15 * i for i in range(5)]

    def gauge(name: str, labels: dict[str, str], value: float) -> Series:
        return Series({"__name__": name, "namespace": ns, **labels}, [(t, value) for t in ts])

    ksm = {"job": "kube-state-metrics"}
    series = [
        gauge("kube_replicaset_owner", {**ksm, "replicaset": RS, "owner_kind": "Deployment", "owner_name": DEP}, 1.0)
    ]
    for pod, phase in PHASES.items():
        series.append(gauge("vllm:num_requests_waiting", {"pod": pod, "job": "vllm"}, WAITING[pod]))
        series.append(gauge("kube_pod_labels", {**ksm, "pod": pod, "label_app": "llama"}, 1.0))
        series.append(gauge("kube_pod_owner", {**ksm, "pod": pod, "owner_kind": "ReplicaSet", "owner_name": RS}, 1.0))
        for p in ("Pending", "Running", "Succeeded", "Failed", "Unknown"):
            series.append(gauge("kube_pod_status_phase", {**ksm, "pod": pod, "phase": p}, float(p == phase)))
    series.append(gauge("kube_pod_deletion_timestamp", {**ksm, "pod": DELETING}, now - 5))
    backend.load(series)


def test_tenant_ksm_source_skips_terminating_and_finished_pods(backend: TestBackend, unique_ns: str) -> None:
    load(backend, unique_ns)
    settings = Settings(prometheus_url=backend.url, backend=backend.kind, pod_source="prometheus")  # type: ignore[arg-type]
    base = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}"
    with running_adapter(settings) as adapter:
        r = httpx.get(
            f"{adapter}{base}/pods/%2A/inference_queue_depth", params={"labelSelector": "app=llama"}, timeout=30
        )
        assert r.status_code == 200, r.text
        assert {i["describedObject"]["name"]: i["value"] for i in r.json()["items"]} == {RUNNING: "2", RESTARTED: "4"}
        r = httpx.get(f"{adapter}{base}/deployments.apps/{DEP}/inference_queue_depth", timeout=30)
        assert r.status_code == 200, r.text
        assert r.json()["items"][0]["value"] == "6"  # 2 + 4, not 96 with the pods on their way out
