"""``explain`` against a scripted fleet in a real Prometheus: it shows what the API serves, and why.

The fleet: four pods of Deployment ``llama`` in three label layouts; one has no GPU series at all, one has
no latency histogram; there is no load history, so the forecast is degraded (insufficient_history). The API
is asked first; explain (HTTP endpoint and CLI) must report the same values and name the missing pieces.
Expected per-GPU samples and P90s come from the generated numbers (numpy), not from the backend.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import yaml

from adapter.__main__ import main
from adapter.api.wire import quantity
from adapter.quantity import milli_value, parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import get, running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build, expected

BASE = "/apis/custom.metrics.k8s.io/v1beta2"
BOOSTED = "llm_composite_load_boosted"


class Fleet:
    def __init__(self, backend: TestBackend, ns: str, pods: list[PodSpec], url: str) -> None:
        self.backend, self.ns, self.pods, self.url = backend, ns, pods, url

    def served(self, metric: str) -> dict[str, str]:
        r = get(f"{self.url}{BASE}/namespaces/{self.ns}/pods/*/{metric}", params={"labelSelector": "app=llama"})
        assert r.status_code == 200, r.text
        return {i["describedObject"]["name"]: i["value"] for i in r.json()["items"]}

    def served_object(self, metric: str) -> str:
        r = get(f"{self.url}{BASE}/namespaces/{self.ns}/deployments.apps/llama/{metric}")
        assert r.status_code == 200, r.text
        value: str = r.json()["items"][0]["value"]
        return value

    def explain(self, **params: str) -> dict[str, Any]:
        r = get(f"{self.url}/explain", params={"namespace": self.ns, **params})
        assert r.status_code == 200, r.text
        doc: dict[str, Any] = r.json()
        return doc


@pytest.fixture
def fleet(prometheus: TestBackend, unique_ns: str) -> Iterator[Fleet]:
    now = float(int(time.time()) - 30)
    pods = [
        PodSpec("llama-7f9b8c6d4-aaaa1", gpus=4, layout="honor", labels={"app": "llama"}, deployment="llama"),
        PodSpec("llama-7f9b8c6d4-aaaa2", gpus=2, layout="exported", labels={"app": "llama"}, deployment="llama"),
        PodSpec(
            "llama-7f9b8c6d4-aaaa3",
            gpus=2,
            layout="honor",
            labels={"app": "llama"},
            deployment="llama",
            with_gpu=False,
        ),
        PodSpec(
            "llama-7f9b8c6d4-aaaa4",
            gpus=1,
            layout="old",
            labels={"app": "llama"},
            deployment="llama",
            with_latency=False,
        ),
    ]
    prometheus.load(build(unique_ns, pods, now))
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", forecast_tick_s=0.2)
    with running_adapter(settings) as url:
        f = Fleet(prometheus, unique_ns, pods, url)
        # Register the workload and wait for its (degraded) forecast, so the boost the API applies is settled.
        f.served(BOOSTED)
        deadline = time.monotonic() + 30
        while get(f"{url}{BASE}/namespaces/{unique_ns}/deployments.apps/llama/llm_load_boost").status_code != 200:
            assert time.monotonic() < deadline, "no forecast state"
            time.sleep(0.1)
        yield f


def check_matches_api(doc: dict[str, Any], fleet: Fleet, metric: str) -> None:
    served = fleet.served(metric)
    by_pod = {p["pod"]: p for p in doc["pods"]}
    assert set(by_pod) == {p.name for p in fleet.pods}
    for spec in fleet.pods:
        pod = by_pod[spec.name]
        want_value = expected(spec, "llm_composite_load")
        if want_value is None:  # a pod missing a required term is left out of the answer, and explain says so
            assert spec.name not in served and pod["quantity"] is None and pod["value"] is None
            assert any("no value for llm_composite_load" in m for m in pod["missing"])
        else:
            assert pod["quantity"] == served[spec.name]
            assert math.isclose(pod["value"], want_value, rel_tol=1e-9)
        terms = {t["metric"]: t for t in pod["terms"]}
        assert list(terms) == [
            "gpu_utilization_p90",
            "inference_queue_depth",
            "inference_itl_p99_seconds",
        ]
        for name, term in terms.items():
            want = expected(spec, name)
            if want is None:
                assert term["value"] is None and term["contribution"] is None and term["missing"]
            else:
                assert math.isclose(term["value"], want, rel_tol=1e-9, abs_tol=1e-12)
        # The contributions add up to the composite.
        if want_value is not None:
            assert math.isclose(sum(t["contribution"] or 0.0 for t in terms.values()), pod["value"], rel_tol=1e-12)
        gpu = terms["gpu_utilization_p90"]
        assert sorted(s["value"] for s in gpu["gpu_samples"]) == sorted(spec.gpu_util)
        if spec.with_gpu:
            assert {s["gpu"]["UUID"] for s in gpu["gpu_samples"]} == {
                f"GPU-{fleet.ns}-{i:04d}"
                for i in range(gpu_offset(fleet.pods, spec), gpu_offset(fleet.pods, spec) + spec.gpus)
            }
            assert math.isclose(gpu["gpu_p90"], float(np.percentile(spec.gpu_util, 90)), rel_tol=1e-12)
        else:
            assert gpu["gpu_samples"] == [] and gpu["gpu_p90"] is None
            assert "no GPU series" in gpu["missing"] and "DCGM_FI_DEV_GPU_UTIL" in gpu["missing"]
            assert any("no GPU series" in m for m in pod["missing"])
        if not spec.with_latency:
            assert "inference_itl_p99_seconds" in terms["inference_itl_p99_seconds"]["missing"]


def gpu_offset(pods: list[PodSpec], spec: PodSpec) -> int:
    """fleet_data numbers the UUIDs of the GPU pods in order."""
    offset = 0
    for p in pods:
        if p is spec:
            return offset
        if p.with_gpu:
            offset += p.gpus
    raise AssertionError(spec.name)


def test_http_explain_matches_the_api_and_names_what_is_missing(fleet: Fleet) -> None:
    doc = fleet.explain(selector="app=llama", metric=BOOSTED)
    assert (doc["metric"], doc["base_metric"]) == (BOOSTED, "llm_composite_load")
    check_matches_api(doc, fleet, BOOSTED)
    # The PromQL shown is the one the provider sends: it names every pod, and the raw query reads the
    # per-GPU series behind the P90 (GPU metrics only).
    assert set(doc["queries"]) == {
        "gpu_utilization_p90",
        "inference_queue_depth",
        "inference_itl_p99_seconds",
    }
    assert all(p.name in doc["queries"]["gpu_utilization_p90"] for p in fleet.pods)
    assert list(doc["raw_queries"]) == ["gpu_utilization_p90"]
    assert "quantile" not in doc["raw_queries"]["gpu_utilization_p90"]
    # No load history: the forecast is degraded, the boost is 1, and every pod says so.
    assert doc["forecast"]["reason"] == "insufficient_history" and doc["forecast"]["boost"] == 1.0
    for pod in doc["pods"]:
        assert "forecast degraded (insufficient_history): boost is 1" in pod["missing"]
        assert pod["boost"] == 1.0


def test_http_explain_of_a_boosted_guard_metric_reads_its_plain_metric(fleet: Fleet) -> None:
    """A metric of the catalog's ``forecast.also`` is explained through the metric it boosts: its query, each pod's
    value, the workload's boost, and what the API serves (here boost 1: the fleet has no load history)."""
    metric = "inference_itl_p99_guard_seconds_boosted"
    doc = fleet.explain(selector="app=llama", metric=metric)
    assert (doc["metric"], doc["base_metric"]) == (metric, "inference_itl_p99_guard_seconds")
    assert set(doc["queries"]) == {"inference_itl_p99_guard_seconds"}
    assert doc["forecast"]["reason"] == "insufficient_history" and doc["forecast"]["boost"] == 1.0
    served = fleet.served(metric)
    for pod in doc["pods"]:
        spec = next(p for p in fleet.pods if p.name == pod["pod"])
        assert pod["boost"] == 1.0 and pod["quantity"] == served.get(spec.name)
        assert math.isclose(pod["value"], expected(spec, "inference_itl_p99_guard_seconds"), abs_tol=1e-12)


def test_http_explain_of_a_deployment_gives_the_object_value(fleet: Fleet) -> None:
    doc = fleet.explain(deployment="llama", metric="llm_composite_load")
    assert doc["object_quantity"] == fleet.served_object("llm_composite_load")
    check_matches_api(doc, fleet, "llm_composite_load")
    assert doc["forecast"] is None  # the plain composite has no forecast


def test_http_explain_text_and_errors(fleet: Fleet) -> None:
    r = get(
        f"{fleet.url}/explain",
        params={"namespace": fleet.ns, "selector": "app=llama", "metric": BOOSTED, "format": "text"},
    )
    assert r.status_code == 200
    for p in fleet.pods:
        assert f"pod {p.name}" in r.text
    served = fleet.served(BOOSTED)
    assert f"HPA receives {BOOSTED} = {served['llama-7f9b8c6d4-aaaa1']}" in r.text
    assert "missing: no GPU series" in r.text
    r = get(f"{fleet.url}/explain", params={"namespace": fleet.ns, "selector": "app=llama", "metric": "nope"})
    # Errors are metav1.Status objects like every other error of the server (they were {"error": ...}).
    assert r.status_code == 404 and r.json()["kind"] == "Status" and r.json()["reason"] == "NotFound"
    assert r.json()["code"] == 404 and "llm_composite_load" in r.json()["message"]  # lists what it does serve
    r = get(f"{fleet.url}/explain", params={"namespace": fleet.ns, "metric": BOOSTED})
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest"
    assert r.json()["message"] == "give exactly one of selector or deployment"


def hpa_manifest(ns: str, target: str) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "llama", "namespace": ns},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "llama"},
            "minReplicas": 1,
            "maxReplicas": 20,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": BOOSTED},
                        "target": {"type": "AverageValue", "averageValue": target},
                    },
                },
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}},
                },
            ],
        },
    }


def expected_replicas(served: dict[str, str], target_milli: int) -> int:
    """The HPA's formula written from its documentation: desired = ceil(current x usage / target), no change
    within 10 %, at most max(2 x current, 4) in one step without a behavior (k8s-metrics-protocol.md §6)."""
    milli = [milli_value(parse_quantity(v)) for v in served.values()]
    current = len(milli)
    ratio = (sum(milli) // current) / target_milli
    desired = current if abs(ratio - 1.0) <= 0.1 else math.ceil(ratio * current)
    return max(1, min(desired, 20, max(2 * current, 4)))


def post_explain(fleet: Fleet, manifest: dict[str, Any], **params: str) -> dict[str, Any]:
    """``POST /explain`` of BOOSTED with an HPA manifest: the answer's ``hpa`` part."""
    r = httpx.post(
        f"{fleet.url}/explain",
        params={"namespace": fleet.ns, "metric": BOOSTED, **params},
        content=yaml.safe_dump(manifest),
        timeout=30,
    )
    assert r.status_code == 200, r.text
    hpa: dict[str, Any] = r.json()["hpa"]
    return hpa


def test_explain_with_an_hpa_gives_its_desired_replicas(fleet: Fleet, tmp_path: Path) -> None:
    served = fleet.served(BOOSTED)
    average = sum(milli_value(parse_quantity(v)) for v in served.values()) // len(served)
    target_milli = int(Decimal(average) / Decimal("1.6"))
    manifest = hpa_manifest(fleet.ns, f"{target_milli}m")
    hpa = post_explain(fleet, manifest, selector="app=llama")
    # 3 of the 4 pods are served (the one without GPU series has no composite). The HPA reads 1.6 x target
    # from them, scales up, and then counts the pod without a value as 0 (replica_calculator.go): 1.6 x 3 / 4
    # = 1.2, ceil(1.2 x 4) = 5.
    assert len(served) == 3
    assert expected_replicas(served, target_milli) == 5  # ceil(1.6 x 3) from the served pods alone
    want = 5
    assert (hpa["desired_replicas"], hpa["metric_replicas"], hpa["current_replicas"]) == (want, want, 4)
    assert hpa["metrics"] == [f"Pods/{BOOSTED}"] and hpa["ignored"] == ["Resource/cpu"]

    # The CLI, with the manifest in a file, agrees.
    path = tmp_path / "hpa.yaml"
    path.write_text(yaml.safe_dump(manifest))
    doc = run_cli(fleet, "--selector", "app=llama", "--metric", BOOSTED, "--hpa", str(path), "--json")
    assert doc["hpa"]["desired_replicas"] == want


def served_external(fleet: Fleet, metric: str) -> str:
    r = get(
        f"{fleet.url}/apis/external.metrics.k8s.io/v1beta1/namespaces/{fleet.ns}/{metric}",
        params={"labelSelector": "deployment=llama"},
    )
    assert r.status_code == 200, r.text
    items = r.json()["items"]
    assert [i["metricLabels"] for i in items] == [{"deployment": "llama"}]
    value: str = items[0]["value"]
    return value


def test_explain_with_an_hpa_runs_every_metric_it_serves_and_takes_the_largest(fleet: Fleet, tmp_path: Path) -> None:
    """The shipped HPAs hold three metrics; the HPA takes the largest proposal, so explain runs them all."""
    boosted, queue = fleet.served(BOOSTED), fleet.served("inference_queue_depth")
    composite = milli_value(parse_quantity(served_external(fleet, "llm_composite_load")))
    assert len(boosted) == 3 and len(queue) == 4  # every pod has a queue gauge
    average = {
        name: sum(milli_value(parse_quantity(v)) for v in vals.values()) // len(vals)
        for name, vals in (("boosted", boosted), ("queue", queue))
    }
    assert average["queue"] > 0 and composite > 0
    # Each entry's usage as a multiple of its target: 1.6 (the test above: 5 replicas), 1.65, 1.3.
    queue_target = int(Decimal(average["queue"]) / Decimal("1.65"))
    composite_target = int(Decimal(composite) / Decimal("1.3"))
    manifest = hpa_manifest(fleet.ns, f"{int(Decimal(average['boosted']) / Decimal('1.6'))}m")
    metrics = manifest["spec"]["metrics"]
    metrics.insert(
        1,
        {
            "type": "Pods",
            "pods": {
                "metric": {"name": "inference_queue_depth"},
                "target": {"type": "AverageValue", "averageValue": f"{queue_target}m"},
            },
        },
    )
    ours = {"name": "llm_composite_load", "selector": {"matchLabels": {"deployment": "llama"}}}
    metrics.append(
        {"type": "External", "external": {"metric": ours, "target": {"type": "Value", "value": f"{composite_target}m"}}}
    )
    # Not ours: another Deployment's Object metric, an External metric selected by another label.
    other = {"kind": "Deployment", "name": "other", "apiVersion": "apps/v1"}
    metrics.append(
        {
            "type": "Object",
            "object": {
                "describedObject": other,
                "metric": {"name": "llm_composite_load"},
                "target": {"type": "Value", "value": "1"},
            },
        }
    )
    metrics.append(
        {
            "type": "External",
            "external": {
                "metric": {"name": "inference_queue_depth", "selector": {"matchLabels": {"app": "llama"}}},
                "target": {"type": "Value", "value": "1"},
            },
        }
    )
    hpa = post_explain(fleet, manifest, deployment="llama")
    assert hpa["metrics"] == [f"Pods/{BOOSTED}", "Pods/inference_queue_depth", "External/llm_composite_load"]
    assert hpa["ignored"] == [
        "Resource/cpu",
        "Object(Deployment/other)/llm_composite_load",
        "External/inference_queue_depth",
    ]
    # The HPA's formula from its documentation, per entry: ceil(4 x 1.65) = 7 from the queue (all 4 pods
    # served); External Value: ceil(4 x usage / target) = ceil(5.2) = 6; the boosted composite 5 as above.
    want_queue = expected_replicas(queue, queue_target)
    want_external = max(1, min(math.ceil(4 * composite / composite_target), 8))
    assert (want_queue, want_external) == (7, 6)
    by_entry = {p["metric"]: p for p in hpa["proposals"]}
    assert {k: v["replicas"] for k, v in by_entry.items()} == {
        f"Pods/{BOOSTED}": 5,
        "Pods/inference_queue_depth": want_queue,
        "External/llm_composite_load": want_external,
    }
    assert milli_value(parse_quantity(by_entry["External/llm_composite_load"]["usage"])) == composite
    assert by_entry["External/llm_composite_load"]["target"] == f"Value {quantity(composite_target / 1000)}"
    assert hpa["decided_by"] == "Pods/inference_queue_depth"
    assert (hpa["metric_replicas"], hpa["desired_replicas"]) == (7, 7)
    assert hpa["usage"] == by_entry[f"Pods/{BOOSTED}"]["usage"]  # the explained metric's own

    path = tmp_path / "hpa.yaml"
    path.write_text(yaml.safe_dump(manifest))
    text = " ".join(run_cli_text(fleet, "--deployment", "llama", "--metric", BOOSTED, "--hpa", str(path)).split())
    queue_usage = by_entry["Pods/inference_queue_depth"]["usage"]
    assert (
        f"Pods/inference_queue_depth: usage {queue_usage} against AverageValue {quantity(queue_target / 1000)}, "
        "proposes 7 <- the largest: the HPA takes it" in text
    )
    assert (
        f"External/llm_composite_load: usage {by_entry['External/llm_composite_load']['usage']} against Value "
        f"{quantity(composite_target / 1000)}, proposes 6 " in text
    )
    assert "not explained (not served by this adapter): Resource/cpu" in text


def run_cli_text(fleet: Fleet, *args: str) -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explain", "--prometheus-url", fleet.backend.url, "--namespace", fleet.ns, *args])
    assert code == 0
    return out.getvalue()


def run_cli(fleet: Fleet, *args: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(run_cli_text(fleet, *args))
    return doc


@pytest.mark.parametrize("metric", ["llm_composite_load", BOOSTED])
def test_cli_json_matches_the_api(fleet: Fleet, metric: str) -> None:
    doc = run_cli(fleet, "--selector", "app=llama", "--metric", metric, "--json")
    check_matches_api(doc, fleet, metric)
    if metric == BOOSTED:
        # The CLI fits its own forecast from the same (absent) history: degraded the same way.
        assert doc["forecast"]["reason"] == "insufficient_history"


def test_cli_tables_and_errors(fleet: Fleet, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "explain",
            "--prometheus-url",
            fleet.backend.url,
            "--namespace",
            fleet.ns,
            "--deployment",
            "llama",
            "--metric",
            "gpu_utilization_p90",
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    for p in fleet.pods:
        assert f"pod {p.name}" in out
    assert (
        "no GPU series" in out
        and f"Deployment llama: gpu_utilization_p90 = {fleet.served_object('gpu_utilization_p90')}" in out
    )
    code = main(
        [
            "explain",
            "--prometheus-url",
            fleet.backend.url,
            "--namespace",
            fleet.ns,
            "--selector",
            "app=llama",
            "--metric",
            "no_such_metric",
        ]
    )
    assert code == 1 and "no_such_metric" in capsys.readouterr().err
