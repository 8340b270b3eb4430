"""Acceptance: prometheus-adapter's files, loaded unchanged, served beside the catalog, read by the real kubectl.

For each of a real Prometheus and a real VictoriaMetrics, ``kubectl get --raw`` against a running adapter
serving ``tests/promadapter/data/sample-config-quoted.yaml`` (its documented sample) and
``helm-chart-default-config.yaml`` (its Helm chart's default rules), unchanged. What prometheus-adapter answers
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


def serving(backend: TestBackend, file: str, now: float) -> Any:
    setup = RulesSetup(parse_config((DATA / file).read_text()), RelistSettings(interval_s=600))
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
