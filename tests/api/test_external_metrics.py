"""external.metrics.k8s.io/v1beta1 against real backends and the real adapter (and the real kubectl).

Two Deployments run in one namespace (llama: two pods, mistral: one) with ten hours of request-rate
history, so the forecast has what it needs. Checked: discovery, /apis listing both groups, the queue summed
over the pods whose series match ``labelSelector``, the per-Deployment forecast, boost and boosted
composite (equal to what custom.metrics.k8s.io serves for the Deployment), errors as Status, and that a
selector naming a Deployment that does not exist answers an empty list without registering a workload.
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import httpx
import pytest
import yaml

from adapter.catalog import load_catalog
from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import Series, TestBackend

EXT = "/apis/external.metrics.k8s.io/v1beta1"
PODS = {
    "llama-5d8f7b9c6-aaaa1": ("llama", 3.0, 6.0),
    "llama-5d8f7b9c6-bbbb2": ("llama", 5.0, 4.0),
    "mistral-7c6b5d4f3-cccc3": ("mistral", 7.0, 2.0),
}  # pod -> (deployment, waiting, requests/s)


GPU_UTIL = 60.0
TERMS = {t.metric: t for t in load_catalog(None).composites["llm_composite_load"].terms}


def term(metric: str, v: float) -> float:
    """One weighted composite term as the catalog defines it: weight x max(v - idle, 0) / (target - idle)."""
    t = TERMS[metric]
    return t.weight * max(v - t.idle, 0.0) / (t.target - t.idle)


def load(backend: TestBackend, ns: str) -> float:
    now = float(int(time.time()) - 20)
    hist = [now - 11 * 3600 + 60 * i for i in range(11 * 60 + 1)]
    series = []
    for pod, (dep, waiting, rps) in PODS.items():
        engine = {"namespace": ns, "pod": pod, "model_name": dep, "job": "vllm"}
        series.append(Series({"__name__": "vllm:num_requests_waiting", **engine}, [(t, waiting) for t in hist[-10:]]))
        # Every composite term needs its series (a GPU term missing for all pods makes the composite a 503).
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
                [(t, GPU_UTIL) for t in hist[-10:]],
            )
        )
        series.append(
            Series({"__name__": "vllm:request_success_total", **engine}, [(t, rps * (t - hist[0])) for t in hist])
        )
        ksm = {"namespace": ns, "pod": pod, "job": "kube-state-metrics"}
        rs = pod.rsplit("-", 1)[0]
        series.append(Series({"__name__": "kube_pod_labels", **ksm, "label_app": dep}, [(t, 1.0) for t in hist[-10:]]))
        series.append(
            Series(
                {"__name__": "kube_pod_owner", **ksm, "owner_kind": "ReplicaSet", "owner_name": rs},
                [(t, 1.0) for t in hist[-10:]],
            )
        )
        series.append(
            Series(
                {
                    "__name__": "kube_replicaset_owner",
                    "namespace": ns,
                    "replicaset": rs,
                    "owner_kind": "Deployment",
                    "owner_name": dep,
                    "job": "kube-state-metrics",
                },
                [(t, 1.0) for t in hist[-10:]],
            )
        )
    backend.load(series)
    return now


def ext(url: str, ns: str, metric: str, selector: str | None = None, method: str = "GET") -> httpx.Response:
    params = {"labelSelector": selector} if selector is not None else {}
    return httpx.request(method, f"{url}{EXT}/namespaces/{ns}/{metric}", params=params, timeout=30)


def items(r: httpx.Response) -> list[dict[str, Any]]:
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["kind"] == "ExternalMetricValueList" and doc["apiVersion"] == "external.metrics.k8s.io/v1beta1"
    for item in doc["items"]:
        assert list(item) in (
            ["metricName", "metricLabels", "timestamp", "value"],
            ["metricName", "metricLabels", "timestamp", "window", "value"],
        )
    return doc["items"]  # type: ignore[no-any-return]


def value(item: dict[str, Any]) -> float:
    return float(parse_quantity(item["value"]))


def wait_for_forecasts(url: str, ns: str, deployments: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = items(ext(url, ns, "llm_load_forecast", f"deployment in ({','.join(deployments)})"))
        if len(got) == len(deployments):
            return
        # The first request registers the workloads; the background loop fits them.
        time.sleep(0.3)
    raise AssertionError(f"no forecast for {deployments} after {timeout:g}s")


def test_external_metrics(backend: TestBackend, unique_ns: str) -> None:
    load(backend, unique_ns)
    settings = Settings(
        prometheus_url=backend.url,
        backend=backend.kind,  # type: ignore[arg-type]
        pod_source="prometheus",
        forecast_tick_s=0.2,
    )
    with running_adapter(settings) as url:
        groups = httpx.get(f"{url}/apis", timeout=10).json()
        assert [g["name"] for g in groups["groups"]] == ["custom.metrics.k8s.io", "external.metrics.k8s.io"]
        group = httpx.get(f"{url}/apis/external.metrics.k8s.io", timeout=10).json()
        assert group["preferredVersion"] == {"groupVersion": "external.metrics.k8s.io/v1beta1", "version": "v1beta1"}
        discovery = httpx.get(f"{url}{EXT}", timeout=10).json()
        assert discovery["kind"] == "APIResourceList" and discovery["groupVersion"] == "external.metrics.k8s.io/v1beta1"
        names = {r["name"]: r for r in discovery["resources"]}
        assert {
            "inference_queue_depth",
            "llm_composite_load",
            "llm_composite_load_boosted",
            "llm_load_forecast",
            "llm_load_boost",
        } <= set(names)
        assert names["inference_queue_depth"] == {
            "name": "inference_queue_depth",
            "singularName": "",
            "namespaced": True,
            "kind": "ExternalMetricValueList",
            "verbs": ["get"],
        }

        # The queue summed over every pod whose series match the selector.
        (everything,) = items(ext(url, unique_ns, "inference_queue_depth"))
        assert everything["metricName"] == "inference_queue_depth" and everything["metricLabels"] == {}
        assert value(everything) == 15
        (llama,) = items(ext(url, unique_ns, "inference_queue_depth", "model_name=llama"))
        assert llama["metricLabels"] == {"model_name": "llama"} and value(llama) == 8
        assert items(ext(url, unique_ns, "inference_queue_depth", "model_name=nothing")) == []
        (composite,) = items(ext(url, unique_ns, "llm_composite_load", "model_name=mistral"))
        # GPU 60 % and 7 waiting; no request finished in the window, so the latency term (when_missing: idle) is 0.
        assert value(composite) == pytest.approx(
            term("gpu_utilization_p90", GPU_UTIL) + term("inference_queue_depth", 7), abs=1e-3
        )

        # A catalog metric for a Deployment: a selector on `deployment` alone reads each named Deployment's pods
        # (from the pod source), one item each, equal to its Object metric; no series carries that label here.
        queues = items(ext(url, unique_ns, "inference_queue_depth", "deployment in (llama,mistral)"))
        assert [(i["metricLabels"], value(i)) for i in queues] == [
            ({"deployment": "llama"}, 8),
            ({"deployment": "mistral"}, 7),
        ]
        for name in ("inference_queue_depth", "llm_composite_load", "inference_itl_p99_guard_seconds"):
            (item,) = items(ext(url, unique_ns, name, "deployment=llama"))
            custom = httpx.get(
                f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}/deployments.apps/llama/{name}",
                timeout=30,
            ).json()
            assert item["value"] == custom["items"][0]["value"], name
        # No request in any window: the SLO guard's metric reads 0, not nothing (an idle fleet can scale down).
        (guard,) = items(ext(url, unique_ns, "inference_ttft_p99_guard_seconds", "deployment=mistral"))
        assert value(guard) == 0
        assert items(ext(url, unique_ns, "inference_ttft_p99_seconds", "deployment=mistral")) == []
        assert items(ext(url, unique_ns, "inference_queue_depth", "deployment=ghost")) == []
        # With another requirement beside it, the selector is on the series' labels, as before.
        assert items(ext(url, unique_ns, "inference_queue_depth", "deployment=llama,model_name=llama")) == []

        # Per Deployment: forecast (the summed request rate), boost, boosted composite.
        wait_for_forecasts(url, unique_ns, ["llama", "mistral"])
        forecast = {
            i["metricLabels"]["deployment"]: value(i)
            for i in items(ext(url, unique_ns, "llm_load_forecast", "deployment in (llama,mistral)"))
        }
        assert forecast == {"llama": pytest.approx(10, rel=0.02), "mistral": pytest.approx(2, rel=0.02)}
        (boost,) = items(ext(url, unique_ns, "llm_load_boost", "deployment=llama"))
        assert boost["metricLabels"] == {"deployment": "llama"} and 1 <= value(boost) <= 3
        boosted = items(ext(url, unique_ns, "llm_composite_load_boosted", "deployment in (llama,mistral)"))
        assert [i["metricLabels"] for i in boosted] == [{"deployment": "llama"}, {"deployment": "mistral"}]
        for item in boosted:
            dep = item["metricLabels"]["deployment"]
            custom = httpx.get(
                f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{unique_ns}/deployments.apps/"
                f"{dep}/llm_composite_load_boosted",
                timeout=30,
            ).json()
            assert item["value"] == custom["items"][0]["value"]
        # The SLO guard at the forecast's load (what the External example HPA reads): the Deployment's guard x
        # its boost, equal to the Object metric; 0 stays 0 on the quiet Deployment.
        (guard,) = items(ext(url, unique_ns, "inference_itl_p99_guard_seconds", "deployment=llama"))
        (boosted_guard,) = items(ext(url, unique_ns, "inference_itl_p99_guard_seconds_boosted", "deployment=llama"))
        assert boosted_guard["metricLabels"] == {"deployment": "llama"}
        assert value(boosted_guard) == pytest.approx(value(guard) * value(boost), rel=0.002, abs=0.0011)
        (quiet,) = items(ext(url, unique_ns, "inference_ttft_p99_guard_seconds_boosted", "deployment=mistral"))
        assert value(quiet) == 0
        # Without a deployment requirement: the Deployments already forecast in the namespace.
        listed = items(ext(url, unique_ns, "llm_load_boost"))
        assert sorted(i["metricLabels"]["deployment"] for i in listed) == ["llama", "mistral"]
        assert items(ext(url, unique_ns, "llm_load_boost", "deployment!=llama"))[0]["metricLabels"] == {
            "deployment": "mistral"
        }

        # A Deployment that does not exist: nothing served, nothing registered.
        assert items(ext(url, unique_ns, "llm_composite_load_boosted", "deployment=ghost")) == []
        assert all(k.deployments != ("ghost",) for k in APPS[url].state.forecasts.workloads())

        # Errors are Status documents.
        many = ",".join(f"d{i}" for i in range(51))
        for r, code in (
            (ext(url, unique_ns, "no_such_metric"), 404),
            (ext(url, unique_ns, "inference_queue_depth", "a in (b"), 400),
            (ext(url, unique_ns, "inference_queue_depth", "replicas>1"), 400),
            (ext(url, unique_ns, "inference_queue_depth", method="POST"), 405),
            (ext(url, unique_ns, "llm_load_boost", f"deployment in ({many})"), 400),
            (ext(url, "Not_A_Namespace", "inference_queue_depth"), 400),
            (httpx.get(f"{url}/apis/external.metrics.k8s.io/v1beta2", timeout=10), 404),
            (httpx.get(f"{url}{EXT}/namespaces/{unique_ns}/a/b", timeout=10), 404),
        ):
            assert r.status_code == code, r.text
            assert r.json()["kind"] == "Status" and r.json()["code"] == code


@pytest.mark.binary("kubectl")
def test_external_metrics_with_kubectl(prometheus: TestBackend, unique_ns: str, tmp_path) -> None:
    load(prometheus, unique_ns)
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with running_adapter(settings) as url:
        done = subprocess.run(
            [
                "kubectl",
                f"--server={url}",
                "get",
                "--raw",
                f"{EXT}/namespaces/{unique_ns}/inference_queue_depth?labelSelector=model_name%3Dllama",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin:/usr/local/bin"},
        )
        assert done.returncode == 0, done.stderr
        doc = json.loads(done.stdout)
        assert doc["items"][0]["metricLabels"] == {"model_name": "llama"} and doc["items"][0]["value"] == "8"


def test_external_hpa_example_reads_a_served_metric(prometheus: TestBackend, unique_ns: str) -> None:
    """apiservice-manifests/examples/external/: a valid autoscaling/v2 HPA whose metric and selector the
    adapter serves (one item, so the HPA's sum over items is the Deployment's value)."""
    from tests.support.manifests import EXAMPLES, check_object

    hpa = yaml.safe_load((EXAMPLES / "external" / "vllm-hpa-external.yaml").read_text())
    assert check_object(hpa) == "schema"
    metrics = hpa["spec"]["metrics"]
    assert len(metrics) == 3  # the boosted composite and the SLO guard
    for metric in metrics:
        assert metric["type"] == "External" and metric["external"]["target"]["type"] == "Value"
        labels = metric["external"]["metric"]["selector"]["matchLabels"]
        assert labels == {"deployment": hpa["spec"]["scaleTargetRef"]["name"]}
    load(prometheus, unique_ns)
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus")
    with running_adapter(settings) as url:
        # The same metrics and selector against this test's Deployment "llama": one item each.
        for metric in metrics:
            (item,) = items(ext(url, unique_ns, metric["external"]["metric"]["name"], "deployment=llama"))
            assert item["metricLabels"] == {"deployment": "llama"}


def test_external_request_is_authorized_as_list_of_the_metric() -> None:
    """The SubjectAccessReview attributes of an external metrics request, as the kube-apiserver forms them:
    verb list (no object name), resource = the metric, in the namespace; what rbac.yaml grants the HPA."""
    from adapter.auth.user import UserInfo, request_attributes

    attrs = request_attributes(
        UserInfo("system:serviceaccount:kube-system:horizontal-pod-autoscaler"),
        "GET",
        f"{EXT}/namespaces/llm/llm_composite_load_boosted",
        b"labelSelector=deployment%3Dvllm",
    )
    assert (
        attrs.resource_request,
        attrs.verb,
        attrs.group,
        attrs.version,
        attrs.namespace,
        attrs.resource,
        attrs.name,
    ) == (True, "list", "external.metrics.k8s.io", "v1beta1", "llm", "llm_composite_load_boosted", "")


def test_external_requests_have_their_own_route_label() -> None:
    from adapter.routes.observability import classify

    assert classify(f"{EXT}/namespaces/llm/inference_queue_depth") == ("external", "v1beta1", None, None)
    assert classify(EXT) == ("external", "v1beta1", None, None)
    assert classify("/apis/external.metrics.k8s.io") == ("external", "", None, None)
    assert classify("/apis/external.metrics.k8s.io/v9/x") == ("external", "other", None, None)
