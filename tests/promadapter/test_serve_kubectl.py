"""Acceptance: prometheus-adapter's files, loaded unchanged, served beside the catalog, read by the real kubectl.

For each of a real Prometheus and a real VictoriaMetrics, ``kubectl get --raw`` against a running adapter
serving ``tests/promadapter/data/sample-config-quoted.yaml`` (its documented sample),
``helm-chart-default-config.yaml`` (its Helm chart's default rules) and the rules of ``docs/config-walkthrough.md``
and ``docs/externalmetrics.md`` (``namespaced: false`` included), unchanged: pods, namespaces, a Deployment, a
Service, a Job (``jobs.batch``) and external metrics. What prometheus-adapter answers
(``docs/config-walkthrough.md``, ``pkg/custom-provider/provider.go`` ``metricFor``, ``helpers.go``
``ReferenceFor``, ``pkg/external-provider``): discovery names ``<resource>/<metric>``; each item's
``describedObject`` is the object with ``apiVersion`` ``group/version`` (``/v1`` for the core group); its value
is ``int64(v*1000)`` milli-units of the query the rule renders, which is computed here by asking the same
backend that query, written out by hand as upstream renders it; external items carry all the sample's labels.
"""

from __future__ import annotations

import json
import math
import subprocess
import time
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from adapter.promadapter.config import parse_config
from adapter.promadapter.discovery import RelistSettings
from adapter.provider.promadapter import RulesSetup
from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.promadapter.test_documented_examples import EXTERNAL, WALKTHROUGH
from tests.support.adapter_server import running_adapter
from tests.support.backends import Series, TestBackend
from tests.support.kubectl_raw import kubectl_raw

pytestmark = pytest.mark.binary("kubectl")
DATA = Path(__file__).parent / "data"
NS = "shop"
PODS = ("web-6f7d8c9b5-a1", "web-6f7d8c9b5-b2", "worker-5d9c7-c3")


def kubectl(url: str, home: Path, path: str) -> subprocess.CompletedProcess[str]:
    return kubectl_raw(url, str(home), path)


def get(url: str, home: Path, path: str) -> Any:
    done = kubectl(url, home, path)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def series(now: float) -> list[Series]:
    """An application's requests (a counter per pod, Service, Deployment and method), a gauge, cAdvisor's CPU
    counter, a queue's lag, and kube-state-metrics' pod labels (the pod source for ``pods/*``)."""
    ts = [now - 600 + 15 * i for i in range(41)]
    out: list[Series] = []

    def counter(labels: dict[str, str], slope: float) -> None:
        out.append(Series(labels, [(t, 100.0 + slope * (t - ts[0])) for t in ts]))

    def gauge(labels: dict[str, str], value: float) -> None:
        out.append(Series(labels, [(t, value) for t in ts]))

    for i, pod in enumerate(PODS):
        app = pod.split("-")[0]
        where = {"namespace": NS, "pod": pod, "service": app, "deployment": app}
        counter({"__name__": "http_requests_total", **where, "method": "GET"}, 0.5 + i)
        counter({"__name__": "http_requests_total", **where, "method": "POST"}, 0.125)
        gauge({"__name__": "inflight_requests", **where}, 3.0 + i)
        counter(
            {"__name__": "container_cpu_usage_seconds_total", "namespace": NS, "pod": pod, "container": app},
            0.25 * (i + 1),
        )
        gauge(
            {"__name__": "kube_pod_labels", "namespace": NS, "pod": pod, "job": "kube-state-metrics",
             "label_app": app},
            1.0,
        )  # fmt: skip
    # A Job's pods: kube-state-metrics-like ``job`` labels name jobs.batch under the template <<.Resource>>.
    for job, pod, pending in [("nightly-report", "a7", 200.0), ("nightly-report", "b8", 50.0), ("weekly", "c9", 9.0)]:
        gauge({"__name__": "batch_items_pending", "namespace": NS, "job": job, "pod": f"{job}-{pod}"}, pending)
    gauge({"__name__": "queue_consumer_lag", "namespace": NS, "name": "orders", "topic": "t1"}, 42.0)
    gauge({"__name__": "queue_consumer_lag", "namespace": NS, "name": "orders", "topic": "t2"}, 8.0)
    gauge({"__name__": "queue_consumer_lag", "namespace": NS, "name": "refunds", "topic": "t1"}, 7.0)
    gauge({"__name__": "queue_consumer_lag", "namespace": "elsewhere", "name": "orders", "topic": "t1"}, 1000.0)
    return out


def upstream_value(backend: TestBackend, promql: str, at: float, label: str) -> dict[str, int]:
    """What prometheus-adapter serves for the query it renders: per object, ``int64(v*1000)`` milli-units."""
    return {s["metric"].get(label, ""): math.trunc(float(s["value"][1]) * 1000) for s in backend.query(promql, at)}


def milli(text: str) -> int:
    return int(Decimal(parse_quantity(text)) * 1000)


def described(kind: str, api_version: str, name: str, namespace: str | None = NS) -> dict[str, str]:
    out = {"kind": kind, "namespace": namespace, "name": name, "apiVersion": api_version}
    return {k: v for k, v in out.items() if v is not None}


def serving(backend: TestBackend, file: str, now: float, text: str = "") -> Any:
    setup = RulesSetup(parse_config(text or (DATA / file).read_text()), RelistSettings(interval_s=600))
    settings = Settings(prometheus_url=backend.url, backend=backend.kind, pod_source="prometheus")  # type: ignore[arg-type]
    return running_adapter(settings, clock=lambda: now, prometheus_adapter=setup)


def test_documented_sample_config(own_backend: TestBackend, tmp_path: Path) -> None:
    now = float(int(time.time()) - 30)
    own_backend.load(series(now))
    custom = "/apis/custom.metrics.k8s.io"
    with serving(own_backend, "sample-config-quoted.yaml", now) as url:
        names = {r["name"] for r in get(url, tmp_path, f"{custom}/v1beta1")["resources"]}
        # Rule 3 (template <<.Resource>>, ^(.*)_total$) names every resource a label names; rule 1 cAdvisor's.
        assert {
            "pods/http_requests",
            "services/http_requests",
            "deployments.apps/http_requests",
            "namespaces/http_requests",
            "pods/cpu_usage",
            "namespaces/cpu_usage",
        } <= names
        assert "pods/llm_composite_load" in names  # the catalog is served too
        external = get(url, tmp_path, "/apis/external.metrics.k8s.io/v1beta1")["resources"]
        assert "queue_consumer_lag" in {r["name"] for r in external}

        # Pods, by selector (kube-state-metrics' labels): one item per pod with data.
        doc = get(url, tmp_path, f"{custom}/v1beta2/namespaces/{NS}/pods/*/http_requests?labelSelector=app%3Dweb")
        web = [p for p in PODS if p.startswith("web")]
        q = f'sum(rate(http_requests_total{{namespace="{NS}",pod=~"{"|".join(web)}",container!="POD"}}[2m])) by (pod)'
        want = upstream_value(own_backend, q, now, "pod")
        assert [i["describedObject"] for i in doc["items"]] == [described("Pod", "/v1", p) for p in web]
        assert {i["describedObject"]["name"]: milli(i["value"]) for i in doc["items"]} == want
        assert [i["metric"] for i in doc["items"]] == [{"name": "http_requests", "selector": None}] * 2

        # A Service, with a metricLabelSelector: echoed in metric.selector and added to the matchers.
        doc = get(
            url,
            tmp_path,
            f"{custom}/v1beta2/namespaces/{NS}/services/web/http_requests?metricLabelSelector={quote('method=GET')}",
        )
        (item,) = doc["items"]
        assert item["describedObject"] == described("Service", "/v1", "web")
        assert item["metric"] == {"name": "http_requests", "selector": {"matchLabels": {"method": "GET"}}}
        q = (
            f'sum(rate(http_requests_total{{method="GET",namespace="{NS}",service="web",container!="POD"}}[2m]))'
            " by (service)"
        )
        assert milli(item["value"]) == upstream_value(own_backend, q, now, "service")["web"]
        assert milli(item["value"]) == pytest.approx(2000, abs=20)  # pods a1 (0.5/s) and b2 (1.5/s)

        # A Deployment, v1beta1.
        (item,) = get(url, tmp_path, f"{custom}/v1beta1/namespaces/{NS}/deployments.apps/worker/http_requests")["items"]
        assert item["describedObject"] == described("Deployment", "apps/v1", "worker")
        assert item["metricName"] == "http_requests"
        q = (
            f'sum(rate(http_requests_total{{namespace="{NS}",deployment="worker",container!="POD"}}[2m]))'
            " by (deployment)"
        )
        assert milli(item["value"]) == upstream_value(own_backend, q, now, "deployment")["worker"]

        # The namespace itself.
        (item,) = get(url, tmp_path, f"{custom}/v1beta1/namespaces/{NS}/metrics/cpu_usage")["items"]
        assert item["describedObject"] == described("Namespace", "/v1", NS, None)
        q = f'sum(rate(container_cpu_usage_seconds_total{{namespace="{NS}",container!="POD"}}[2m])) by (namespace)'
        assert milli(item["value"]) == upstream_value(own_backend, q, now, "namespace")[NS]
        assert milli(item["value"]) == pytest.approx(1500, abs=15)

        # An external metric: the namespace and the selector are matchers; metricLabels are the sample's.
        doc = get(url, tmp_path, f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/queue_consumer_lag")
        assert sorted((i["metricLabels"]["name"], i["metricLabels"], i["value"]) for i in doc["items"]) == [
            ("orders", {"name": "orders"}, "50"),
            ("refunds", {"name": "refunds"}, "7"),
        ]
        doc = get(
            url,
            tmp_path,
            f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{NS}/queue_consumer_lag?labelSelector=topic%3Dt1",
        )
        assert [(i["metricName"], i["metricLabels"], i["value"]) for i in sorted(doc["items"], key=str)] == [
            ("queue_consumer_lag", {"name": "orders"}, "42"),
            ("queue_consumer_lag", {"name": "refunds"}, "7"),
        ]

        # What the rules do not serve is the upstream 404.
        done = kubectl(url, tmp_path, f"{custom}/v1beta1/namespaces/{NS}/services/web/cpu_usage")
        assert done.returncode == 1
        assert "the server could not find the metric cpu_usage for services" in done.stderr


def test_helm_chart_default_rules(own_backend: TestBackend, tmp_path: Path) -> None:
    now = float(int(time.time()) - 30)
    own_backend.load(series(now))
    custom = "/apis/custom.metrics.k8s.io/v1beta1"
    with serving(own_backend, "helm-chart-default-config.yaml", now) as url:
        names = {r["name"] for r in get(url, tmp_path, custom)["resources"]}
        assert {
            "pods/cpu_usage",  # rule 0: cAdvisor seconds counters
            "namespaces/cpu_usage",
            "pods/http_requests",  # rule 4: other counters, template <<.Resource>>
            "services/http_requests",
            "deployments.apps/http_requests",
            "pods/inflight_requests",  # rule 3: gauges
            "services/inflight_requests",
        } <= names
        assert get(url, tmp_path, "/apis/external.metrics.k8s.io/v1beta1")["resources"]  # the catalog's

        doc = get(url, tmp_path, f"{custom}/namespaces/{NS}/pods/*/cpu_usage?labelSelector=app%3Dworker")
        (item,) = doc["items"]
        assert item["describedObject"] == described("Pod", "/v1", "worker-5d9c7-c3")
        q = (
            f'sum(rate(container_cpu_usage_seconds_total{{namespace="{NS}",pod="worker-5d9c7-c3",container!="POD"}}'
            "[5m])) by (pod)"
        )
        assert milli(item["value"]) == upstream_value(own_backend, q, now, "pod")["worker-5d9c7-c3"]

        (item,) = get(url, tmp_path, f"{custom}/namespaces/{NS}/services/web/inflight_requests")["items"]
        assert item["describedObject"] == described("Service", "/v1", "web")
        assert milli(item["value"]) == 7000  # sum(inflight_requests{service="web"}) by (service): 3 + 4

        (item,) = get(url, tmp_path, f"{custom}/namespaces/{NS}/deployments.apps/web/http_requests")["items"]
        assert item["describedObject"] == described("Deployment", "apps/v1", "web")
        q = f'sum(rate(http_requests_total{{namespace="{NS}",deployment="web"}}[5m])) by (deployment)'
        assert milli(item["value"]) == upstream_value(own_backend, q, now, "deployment")["web"]

        (item,) = get(url, tmp_path, f"{custom}/namespaces/{NS}/metrics/inflight_requests")["items"]
        assert item["describedObject"] == described("Namespace", "/v1", NS, None)
        assert milli(item["value"]) == 12000

        # A Job (rule 3, gauges): the ``job`` label names jobs.batch; describedObject is batch/v1 Job.
        assert "jobs.batch/batch_items_pending" in names
        v1beta2 = "/apis/custom.metrics.k8s.io/v1beta2"
        doc = get(url, tmp_path, f"{v1beta2}/namespaces/{NS}/jobs.batch/nightly-report/batch_items_pending")
        assert [{k: v for k, v in i.items() if k != "timestamp"} for i in doc["items"]] == [
            {
                "describedObject": described("Job", "batch/v1", "nightly-report"),
                "metric": {"name": "batch_items_pending", "selector": None},
                "value": "250",  # sum(batch_items_pending{namespace="shop",job="nightly-report"}) by (job)
            }
        ]
        # The singular resource name, v1beta1: the same object.
        (item,) = get(url, tmp_path, f"{custom}/namespaces/{NS}/job/nightly-report/batch_items_pending")["items"]
        assert (item["describedObject"], item["metricName"], item["value"]) == (
            described("Job", "batch/v1", "nightly-report"),
            "batch_items_pending",
            "250",
        )
        # Every Job with data (no Kubernetes API: an empty labelSelector lists what the answer has).
        doc = get(url, tmp_path, f"{v1beta2}/namespaces/{NS}/jobs.batch/*/batch_items_pending")
        assert sorted(
            (i["describedObject"]["name"], i["describedObject"]["kind"], i["value"]) for i in doc["items"]
        ) == [
            ("nightly-report", "Job", "250"),
            ("weekly", "Job", "9"),
        ]
        done = kubectl(url, tmp_path, f"{v1beta2}/namespaces/{NS}/jobs.batch/monthly/batch_items_pending")
        assert done.returncode == 1  # provider.go metricFor: NewMetricNotFoundForError(resource, metric, name)
        assert "(NotFound): the server could not find the metric batch_items_pending for jobs.batch monthly" in (
            done.stderr
        )


def documented_series(now: float) -> list[Series]:
    """The series ``docs/config-walkthrough.md`` and ``docs/externalmetrics.md`` speak of: the walkthrough's two
    frontend pods at 16 and 22 milli-requests per second (its ``kubernetes_*`` labels), their kube-state-metrics
    labels (the pod source), and queues in the HPA's namespace ``default`` and in ``queue``."""
    ts = [now - 600 + 15 * i for i in range(41)]
    out: list[Series] = []
    for pod, rate in [("frontend-server-abcd-0123", 0.016), ("frontend-server-abcd-4567", 0.022)]:
        where = {"kubernetes_namespace": "production", "kubernetes_pod_name": pod}
        out.append(Series({"__name__": "http_requests_total", **where}, [(t, rate * (t - ts[0])) for t in ts]))
        ksm = {"namespace": "production", "pod": pod, "job": "kube-state-metrics", "label_app": "frontend"}
        out.append(Series({"__name__": "kube_pod_labels", **ksm}, [(t, 1.0) for t in ts]))
    for name, namespace, value in [
        ("queue_consumer_lag", "default", 30.0),
        ("queue_consumer_lag", "queue", 500.0),
        ("queue_depth", "queue", 120.0),
        ("queue_depth", "default", 7.0),
    ]:
        labels = {"__name__": name, "namespace": namespace, "name": "my-sample-queue"}
        out.append(Series(labels, [(t, value) for t in ts]))
    out.append(Series({"__name__": "queue_depth", "namespace": "queue", "name": "other"}, [(t, 3.0) for t in ts]))
    return out


def test_walkthrough_and_external_metrics_documents(own_backend: TestBackend, tmp_path: Path) -> None:
    """The rules of ``docs/config-walkthrough.md`` and ``docs/externalmetrics.md``, unchanged, asked what those
    documents ask, answer what they show."""
    now = float(int(time.time()) - 30)
    own_backend.load(documented_series(now))
    custom = "/apis/custom.metrics.k8s.io/v1beta1"
    with serving(own_backend, "", now, WALKTHROUGH + EXTERNAL) as url:
        # The walkthrough's discovery entries (named by its rule's `as`, see test_config_walkthrough).
        resources = get(url, tmp_path, custom)["resources"]
        entry = {"singularName": "", "kind": "MetricValueList", "verbs": ["get"]}
        for name, namespaced in [
            ("pods/http_requests_per_second", True),
            ("namespaces/http_requests_per_second", False),
        ]:
            assert {"name": name, "namespaced": namespaced, **entry} in resources

        # Its request and its answer: one item per pod, 16m and 22m.
        doc = get(url, tmp_path, f"{custom}/namespaces/production/pods/*/http_requests_per_second")
        q = (
            'sum(rate(http_requests_total{kubernetes_namespace="production",'
            'kubernetes_pod_name=~"frontend-server-abcd-0123|frontend-server-abcd-4567"}[2m])) by (kubernetes_pod_name)'
        )
        want = upstream_value(own_backend, q, now, "kubernetes_pod_name")
        got = sorted(doc["items"], key=lambda i: i["describedObject"]["name"])
        assert [(i["describedObject"], i["metricName"]) for i in got] == [
            (described("Pod", "/v1", "frontend-server-abcd-0123", "production"), "http_requests_per_second"),
            (described("Pod", "/v1", "frontend-server-abcd-4567", "production"), "http_requests_per_second"),
        ]
        assert {i["describedObject"]["name"]: milli(i["value"]) for i in got} == want
        # The document's 16m and 22m; int64(v*1000) truncates, and VictoriaMetrics' rate of 0.022/s is a hair
        # under it (21m), as prometheus-adapter would serve it from that backend.
        assert [milli(i["value"]) for i in got] == [pytest.approx(16, abs=1), pytest.approx(22, abs=1)]

        # externalmetrics.md's own command: the HPA's namespace is a matcher.
        external = "/apis/external.metrics.k8s.io/v1beta1"
        doc = get(url, tmp_path, f"{external}/namespaces/default/queue_consumer_lag")
        assert [{k: v for k, v in i.items() if k != "timestamp"} for i in doc["items"]] == [
            {"metricName": "queue_consumer_lag", "metricLabels": {"name": "my-sample-queue"}, "value": "30"}
        ]

        # namespaced: false: the HPA in `default` reads namespace `queue` through its metricSelector ...
        selector = quote("namespace=queue,name=my-sample-queue")
        doc = get(url, tmp_path, f"{external}/namespaces/default/queue_depth?labelSelector={selector}")
        assert [{k: v for k, v in i.items() if k != "timestamp"} for i in doc["items"]] == [
            {"metricName": "queue_depth", "metricLabels": {"name": "my-sample-queue"}, "value": "120"}
        ]
        # ... and without one, every namespace's series, whatever namespace asks.
        for namespace in ("default", "elsewhere"):
            doc = get(url, tmp_path, f"{external}/namespaces/{namespace}/queue_depth")
            assert sorted((i["metricLabels"]["name"], i["value"]) for i in doc["items"]) == [
                ("my-sample-queue", "127"),
                ("other", "3"),
            ]
