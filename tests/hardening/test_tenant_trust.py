"""Issue 11 row 1: a tenant must not be able to write another namespace's metrics.

The attack, reproduced against a real Prometheus and a real VictoriaMetrics that scrape real HTTP targets,
and the real adapter process reading them: a pod in namespace ``evil`` exposes the victim's queue depth and
GPU utilization under ``exported_namespace``/``exported_pod`` (kept by the backend, even with
``honor_labels: false``) and under ``namespace``/``pod`` (renamed ``exported_*`` by the backend), with a
huge and a negative value. The victim's served values must be exactly what its own targets say.
"""

from __future__ import annotations

import re
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from adapter.api.wire import quantity
from adapter.catalog import load_catalog
from tests.hardening.tenant_support import Exporter, scrape_job, scraped

BASE = "/apis/custom.metrics.k8s.io/v1beta2"
VICTIM_NS, VICTIM = "victim-ns", "llama-5d8f7b9c6-vvvv1"
VICTIM2 = "llama-5d8f7b9c6-vvvv2"
ATTACKER_NS, ATTACKER = "evil", "attacker-6c9d8f7b5-aaaa1"

# The victim's engine, scraped per pod: its own series carry no pod labels; the target gives them.
VICTIM_ENGINE = 'vllm:num_requests_waiting{model_name="llama"} 0\n'
# A second victim pod whose engine reports a negative queue (a bug, or a forged engine): never served.
VICTIM2_ENGINE = 'vllm:num_requests_waiting{model_name="llama"} -40\n'
# dcgm-exporter in the GPU Operator's namespace speaks for the pods on its node.
DCGM = (
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-1",Hostname="node-1",namespace="{VICTIM_NS}",pod="{VICTIM}"}} 50\n'
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="GPU-2",Hostname="node-1",namespace="{VICTIM_NS}",pod="{VICTIM2}"}} 60\n'
)
# kube-state-metrics, scraped with honor_labels: true (it speaks for every pod of the cluster).
KSM = "".join(f'kube_pod_labels{{namespace="{VICTIM_NS}",pod="{p}",label_app="llama"}} 1\n' for p in (VICTIM, VICTIM2))
FAKE = "llama-5d8f7b9c6-fake1"
# The attacker: every way of naming the victim's pod it has, with a huge and a negative value, plus a fake
# member of the victim's selector (kube_pod_labels) with a queue of its own.
ATTACK = (
    f'vllm:num_requests_waiting{{exported_namespace="{VICTIM_NS}",exported_pod="{VICTIM}"}} 500\n'
    f'vllm:num_requests_waiting{{namespace="{VICTIM_NS}",pod="{VICTIM}",engine="1"}} -40\n'
    f'vllm:num_requests_waiting{{pod_namespace="{VICTIM_NS}",pod_name="{VICTIM}",engine="2"}} 500\n'
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="0",UUID="GPU-X",exported_namespace="{VICTIM_NS}",exported_pod="{VICTIM}"}} 100\n'
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="1",UUID="GPU-Y",namespace="{VICTIM_NS}",pod="{VICTIM}"}} 100\n'
    f'DCGM_FI_DEV_GPU_UTIL{{gpu="2",UUID="GPU-Z",pod_namespace="{VICTIM_NS}",pod_name="{VICTIM}"}} -5\n'
    f'kube_pod_labels{{namespace="{VICTIM_NS}",pod="{FAKE}",label_app="llama"}} 1\n'
    f'kube_pod_labels{{exported_namespace="{VICTIM_NS}",exported_pod="{FAKE}",label_app="llama"}} 1\n'
    f'vllm:num_requests_waiting{{exported_namespace="{VICTIM_NS}",exported_pod="{FAKE}"}} 900\n'
)


TERMS = {t.metric: t for t in load_catalog(None).composites["llm_composite_load"].terms}


def term(metric: str, v: float) -> float:
    """One weighted composite term as the catalog defines it: weight x max(v - idle, 0) / (target - idle)."""
    t = TERMS[metric]
    return t.weight * max(v - t.idle, 0.0) / (t.target - t.idle)


def value(adapter: str, ns: str, pod: str, metric: str) -> httpx.Response:
    return httpx.get(f"{adapter}{BASE}/namespaces/{ns}/pods/{pod}/{metric}", timeout=30, trust_env=False)


@pytest.mark.parametrize(
    "kind",
    [
        pytest.param("prometheus", marks=pytest.mark.binary("prometheus")),
        pytest.param("victoriametrics", marks=pytest.mark.binary("victoria-metrics")),
    ],
)
def test_tenant_cannot_write_another_namespaces_metrics(kind: str, tmp_path: Path) -> None:
    with ExitStack() as stack:
        exporters = {
            name: Exporter(text)
            for name, text in (
                ("victim", VICTIM_ENGINE),
                ("victim2", VICTIM2_ENGINE),
                ("dcgm", DCGM),
                ("ksm", KSM),
                ("attacker", ATTACK),
            )
        }
        for e in exporters.values():
            stack.callback(e.close)
        jobs = [
            scrape_job("vllm", exporters["victim"], namespace=VICTIM_NS, pod=VICTIM),
            scrape_job("vllm-2", exporters["victim2"], namespace=VICTIM_NS, pod=VICTIM2),
            scrape_job("dcgm-exporter", exporters["dcgm"], namespace="gpu-operator", pod="nvidia-dcgm-exporter-x1"),
            scrape_job(
                "kube-state-metrics",
                exporters["ksm"],
                namespace="monitoring",
                pod="kube-state-metrics-0",
                honor_labels=True,
            ),
            scrape_job("attacker", exporters["attacker"], namespace=ATTACKER_NS, pod=ATTACKER),
        ]
        _, adapter = stack.enter_context(scraped(kind, jobs, tmp_path))

        # The backend really holds the forged series under the victim's exported_* labels.
        queue = value(adapter, VICTIM_NS, VICTIM, "inference_queue_depth")
        assert queue.status_code == 200, queue.text
        assert queue.json()["items"][0]["value"] == "0"  # not 500, not -40
        gpu = value(adapter, VICTIM_NS, VICTIM, "gpu_utilization_p90")
        assert gpu.status_code == 200, gpu.text
        assert gpu.json()["items"][0]["value"] == "50"  # the dcgm-exporter's, not the attacker's 100
        composite = value(adapter, VICTIM_NS, VICTIM, "llm_composite_load")
        # GPU 50 (the exporter's) and queue 0 (the victim's own); no request finished, so the latency term
        # (when_missing: idle) reads 0. The attacker's 100s and 500s would move this.
        expected = term("gpu_utilization_p90", 50) + term("inference_queue_depth", 0)
        assert composite.json()["items"][0]["value"] == quantity(expected)

        # A pod's own negative queue is never served: dropped (404), and the composite loses the term.
        negative = value(adapter, VICTIM_NS, VICTIM2, "inference_queue_depth")
        assert negative.status_code == 404, negative.text
        # Without its (refused) queue the pod has no composite at all -- never one pulled down by the -40,
        # and never the GPU term re-weighted into a different metric.
        composite2 = value(adapter, VICTIM_NS, VICTIM2, "llm_composite_load")
        assert composite2.status_code == 404, composite2.text

        # The victim's selector: only its real pods (the fake member is refused), the negative one omitted.
        listed = httpx.get(
            f"{adapter}{BASE}/namespaces/{VICTIM_NS}/pods/%2A/inference_queue_depth",
            params={"labelSelector": "app=llama"},
            timeout=30,
            trust_env=False,
        )
        assert listed.status_code == 200, listed.text
        assert {i["describedObject"]["name"]: i["value"] for i in listed.json()["items"]} == {VICTIM: "0"}
        # explain says why the second pod has no queue value.
        explained = httpx.get(
            f"{adapter}/explain",
            params={"namespace": VICTIM_NS, "metric": "llm_composite_load", "selector": "app=llama"},
            timeout=30,
            trust_env=False,
        )
        assert explained.status_code == 200, explained.text
        problems = explained.json()["problems"]
        assert any("refused" in p and VICTIM2 in p and "negative" in p for p in problems), problems

        # The attacker's series still count for the attacker's own pod, through its own target labels;
        # the forged exported_* claim is refused and counted.
        own = value(adapter, ATTACKER_NS, ATTACKER, "gpu_utilization_p90")
        assert own.status_code == 200 and own.json()["items"][0]["value"] == "100", own.text
        metrics = httpx.get(f"{adapter}/metrics", timeout=30, trust_env=False).text
        untrusted = re.search(
            r'llm_hpa_adapter_series_rejected_total\{metric="gpu_utilization_p90",'
            r'reason="untrusted"\} (\S+)',
            metrics,
        )
        assert untrusted is not None and float(untrusted.group(1)) >= 1, metrics[-3000:]
        negatives = re.search(
            r'llm_hpa_adapter_series_rejected_total\{metric="inference_queue_depth",'
            r'reason="negative"\} (\S+)',
            metrics,
        )
        assert negatives is not None and float(negatives.group(1)) >= 1
