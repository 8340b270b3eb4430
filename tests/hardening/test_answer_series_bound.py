"""Issue 26 row 4: a pod that fans one metric out into tens of thousands of series (one label differing) makes
the answer for its own namespace refused while it streams in, not parsed into ~10x its size in memory.

A real VictoriaMetrics holds 60,000 ``vllm:num_requests_waiting`` series of one attacker pod that differ only
in ``exported_pod`` (more than the 50,000-series default bound) and one ordinary victim pod in another
namespace. The attacker's request for its own namespace is a 503 Status naming the metric and the bound (not
the backend's text), counted in ``/metrics`` as ``outcome="too_many_series"``; the victim keeps being served its
own value, and the adapter stays healthy. Peak memory is measured by ``benchmarks/big_answer.py``, not here.
"""

from __future__ import annotations

import re
import time

import httpx

from adapter.settings import Settings
from tests.support.adapter_server import running_adapter
from tests.support.backends import Series, TestBackend

FAN_OUT = 60_000
EVIL, VICTIM = "llama-5d8f7b9c6-evil1", "llama-5d8f7b9c6-good1"


def pod_labels(ns: str, pod: str, ts: list[float]) -> Series:
    labels = {"__name__": "kube_pod_labels", "namespace": ns, "pod": pod, "label_app": "llama"}
    return Series({**labels, "job": "kube-state-metrics"}, [(t, 1.0) for t in ts])


def queue_depth(adapter: str, ns: str) -> httpx.Response:
    return httpx.get(
        f"{adapter}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/inference_queue_depth",
        params={"labelSelector": "app=llama"},
        timeout=60,
        trust_env=False,
    )


def test_fanned_out_answer_is_refused_and_the_victim_served(victoriametrics: TestBackend, unique_ns: str) -> None:
    now = float(int(time.time()) - 20)
    ts = [now - 15, now]
    attacker, victim = f"{unique_ns}-a", f"{unique_ns}-v"
    series = [pod_labels(attacker, EVIL, ts), pod_labels(victim, VICTIM, ts)]
    series.append(
        Series({"__name__": "vllm:num_requests_waiting", "namespace": victim, "pod": VICTIM}, [(t, 3.0) for t in ts])
    )
    series += [
        Series(
            {"__name__": "vllm:num_requests_waiting", "namespace": attacker, "pod": EVIL, "exported_pod": f"x{i}"},
            [(t, 1.0) for t in ts],
        )
        for i in range(FAN_OUT)
    ]
    victoriametrics.load(series)
    settings = Settings(prometheus_url=victoriametrics.url, backend="victoriametrics", pod_source="prometheus")
    with running_adapter(settings) as adapter:
        r = queue_depth(adapter, victim)
        assert r.status_code == 200, r.text
        assert {i["describedObject"]["name"]: i["value"] for i in r.json()["items"]} == {VICTIM: "3"}

        r = queue_depth(adapter, attacker)
        assert r.status_code == 503, r.text[:500]  # before the fix: 200, the whole answer parsed
        doc = r.json()
        assert doc["kind"] == "Status" and doc["reason"] == "ServiceUnavailable", doc
        assert "vllm:num_requests_waiting" in doc["message"] and "50000 series" in doc["message"], doc
        assert victoriametrics.url not in r.text

        metrics = httpx.get(f"{adapter}/metrics", timeout=30).text
        found = re.findall(
            r'llm_hpa_adapter_upstream_queries_total\{[^}]*outcome="too_many_series"[^}]*\} (\S+)', metrics
        )
        assert found and sum(float(v) for v in found) >= 1, found

        assert httpx.get(f"{adapter}/livez", timeout=10).status_code == 200
        r = queue_depth(adapter, victim)  # still served, its own current value
        assert r.status_code == 200, r.text
        assert {i["describedObject"]["name"]: i["value"] for i in r.json()["items"]} == {VICTIM: "3"}
