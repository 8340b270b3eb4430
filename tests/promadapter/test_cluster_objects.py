"""Resources beyond pods as prometheus-adapter resolves them through its cluster: a CRD's plural and ``*``.

prometheus-adapter's RESTMapper is the cluster's API discovery: a rule's override or template naming a CRD
(``inferenceservices`` of ``serving.kserve.io``) serves ``inferenceservices.serving.kserve.io/<metric>``, and
``describedObject`` carries the kind and ``group/version`` discovery gives (``helpers.go`` ``ReferenceFor``).
``*`` lists the namespace's objects matching the ``labelSelector`` from the API (``ListObjectNames``), then
answers the ones with data. No kube-apiserver can run here: a fake serves discovery and the lists
(``tests/support/fake_kube.py``, named as such); the values come from a real Prometheus and a real
VictoriaMetrics, read through the real kubectl.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from adapter.pods.objects import KubeObjects
from adapter.promadapter.config import parse_config
from adapter.promadapter.discovery import RelistSettings
from adapter.provider.promadapter import RulesSetup
from adapter.settings import Settings
from tests.promadapter.test_serve_kubectl import described, get, kubectl, milli, upstream_value
from tests.support.adapter_server import running_adapter
from tests.support.backends import Series, TestBackend
from tests.support.fake_kube import FakeKube

pytestmark = pytest.mark.binary("kubectl")
CUSTOM = "/apis/custom.metrics.k8s.io"
ISVC = "inferenceservices.serving.kserve.io"
RULES = """
rules:
- seriesQuery: 'model_requests_total{namespace!="",inferenceservice!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      inferenceservice: {group: serving.kserve.io, resource: inferenceservices}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: 'queue_depth{namespace!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


def series(ns: str, now: float) -> list[Series]:
    ts = [now - 600 + 15 * i for i in range(41)]
    out = []
    for i, model in enumerate(("llama", "mistral")):
        labels = {"__name__": "model_requests_total", "namespace": ns, "inferenceservice": model}
        out.append(Series(labels, [(t, 10.0 + (i + 1) * 0.5 * (t - ts[0])) for t in ts]))
    # A Service that the cluster no longer has keeps its series: `*` must not list it.
    for i, svc in enumerate(("web", "api", "batch", "gone")):
        depth = {"__name__": "queue_depth", "namespace": ns, "service": svc, "inferenceservice": "llama"}
        out.append(Series(depth, [(t, 3.0 + i) for t in ts]))
    return out


def isvc(name: str, namespace: str) -> dict[str, str]:
    """An InferenceService's ``describedObject``: the kind and version the fake's discovery serves."""
    return described("InferenceService", "serving.kserve.io/v1beta1", name, namespace)


@contextmanager
def serving(backend: TestBackend, now: float, kube: FakeKube | None) -> Iterator[str]:
    objects = None if kube is None else KubeObjects(api_client=kube.api_client())
    setup = RulesSetup(parse_config(RULES), RelistSettings(interval_s=600), objects=objects)
    settings = Settings(prometheus_url=backend.url, backend=backend.kind, pod_source="prometheus")  # type: ignore[arg-type]
    with running_adapter(settings, clock=lambda: now, prometheus_adapter=setup) as url:
        yield url


def cluster(ns: str) -> FakeKube:
    kube = FakeKube().start()
    kube.add_resource("services", "Service", "v1")
    kube.add_resource("inferenceservices", "InferenceService", "serving.kserve.io/v1beta1")
    for name, app in (("web", "shop"), ("api", "shop"), ("batch", "jobs")):
        kube.put_object("services", ns, name, {"app": app})
    kube.put_object("inferenceservices", ns, "llama", {"team": "a"})
    kube.put_object("inferenceservices", ns, "mistral", {"team": "b"})
    return kube


def test_a_crd_is_served_with_the_kind_api_discovery_gives(
    backend: TestBackend, unique_ns: str, tmp_path: Path
) -> None:
    now = float(int(time.time()) - 30)
    backend.load(series(unique_ns, now))
    kube = cluster(unique_ns)
    try:
        with serving(backend, now, kube) as url:
            names = {r["name"] for r in get(url, tmp_path, f"{CUSTOM}/v1beta1")["resources"]}
            # The override, and the template's `inferenceservice` label: the CRD's singular, found by discovery.
            assert {f"{ISVC}/model_requests_per_second", f"{ISVC}/queue_depth", "services/queue_depth"} <= names
            path = f"{CUSTOM}/v1beta2/namespaces/{unique_ns}/{ISVC}/llama/model_requests_per_second"
            (item,) = get(url, tmp_path, path)["items"]
            assert item["describedObject"] == isvc("llama", unique_ns)
            q = f'sum(rate(model_requests_total{{inferenceservice="llama",namespace="{unique_ns}"}}[2m]))'
            q += " by (inferenceservice)"
            assert milli(item["value"]) == upstream_value(backend, q, now, "inferenceservice")["llama"]
            assert milli(item["value"]) == pytest.approx(500, abs=5)
            (item,) = get(url, tmp_path, f"{CUSTOM}/v1beta1/namespaces/{unique_ns}/{ISVC}/llama/queue_depth")["items"]
            assert milli(item["value"]) == 3000 + 4000 + 5000 + 6000  # every queue_depth series names llama
            # The CRD's singular and the kind's case resolve too, as the RESTMapper resolves them.
            alias = f"{CUSTOM}/v1beta1/namespaces/{unique_ns}/inferenceservice.serving.kserve.io/mistral/queue_depth"
            assert "not find the metric" in kubectl(url, tmp_path, alias).stderr  # no queue_depth for mistral
            (item,) = get(url, tmp_path, alias.replace("queue_depth", "model_requests_per_second"))["items"]
            assert item["describedObject"]["kind"] == "InferenceService"
    finally:
        kube.close()


def test_star_lists_the_objects_from_the_api_by_label_selector(
    backend: TestBackend, unique_ns: str, tmp_path: Path
) -> None:
    now = float(int(time.time()) - 30)
    backend.load(series(unique_ns, now))
    kube = cluster(unique_ns)
    try:
        with serving(backend, now, kube) as url:
            base = f"{CUSTOM}/v1beta2/namespaces/{unique_ns}"
            doc = get(url, tmp_path, f"{base}/services/*/queue_depth?labelSelector=app%3Dshop")
            assert [(i["describedObject"], milli(i["value"])) for i in doc["items"]] == [
                (described("Service", "/v1", "api", unique_ns), 4000),
                (described("Service", "/v1", "web", unique_ns), 3000),
            ]
            lists = [r for r in kube.requests if r.path == f"/api/v1/namespaces/{unique_ns}/services"]
            assert [r.query.get("labelSelector") for r in lists] == ["app=shop"]  # the selector went to the API
            # Set-based selectors pass through as they are.
            doc = get(url, tmp_path, f"{base}/services/*/queue_depth?labelSelector=app+notin+%28shop%29")
            assert [i["describedObject"]["name"] for i in doc["items"]] == ["batch"]
            # No selector: the objects the API has, not every label value of the answer ("gone" has data).
            doc = get(url, tmp_path, f"{base}/services/*/queue_depth")
            assert [i["describedObject"]["name"] for i in doc["items"]] == ["api", "batch", "web"]
            assert get(url, tmp_path, f"{base}/services/*/queue_depth?labelSelector=app%3Dnone")["items"] == []
            # A CRD's objects, listed at the version discovery gives.
            doc = get(url, tmp_path, f"{base}/{ISVC}/*/model_requests_per_second?labelSelector=team%3Db")
            (item,) = doc["items"]
            assert item["describedObject"] == isvc("mistral", unique_ns)
            assert milli(item["value"]) == pytest.approx(1000, abs=10)
            listed = f"/apis/serving.kserve.io/v1beta1/namespaces/{unique_ns}/inferenceservices"
            assert any(r.path == listed for r in kube.requests)
            # RBAC refusing the list: a Status naming what to grant, never a value computed without the list.
            kube.forbid(r"/api/v1/namespaces/[a-z0-9-]+/services")
            done = kubectl(url, tmp_path, f"{base}/services/*/queue_depth?labelSelector=app%3Dshop")
            assert done.returncode == 1 and "forbidden; grant the adapter's ServiceAccount list" in done.stderr
            assert "Traceback" not in done.stderr
    finally:
        kube.close()


def test_without_the_kubernetes_api_a_crd_is_served_as_written(
    backend: TestBackend, unique_ns: str, tmp_path: Path
) -> None:
    now = float(int(time.time()) - 30)
    backend.load(series(unique_ns, now))
    with serving(backend, now, None) as url:
        names = {r["name"] for r in get(url, tmp_path, f"{CUSTOM}/v1beta1")["resources"]}
        assert f"{ISVC}/model_requests_per_second" in names
        assert f"{ISVC}/queue_depth" not in names  # no discovery: the template's `inferenceservice` names nothing
        path = f"{CUSTOM}/v1beta1/namespaces/{unique_ns}/{ISVC}/llama/model_requests_per_second"
        (item,) = get(url, tmp_path, path)["items"]
        # The kind guessed from the plural, the version unknown (upstream's `group/version` with no version).
        assert item["describedObject"] == described("Inferenceservice", "serving.kserve.io/", "llama", unique_ns)
        assert milli(item["value"]) == pytest.approx(500, abs=5)
        done = kubectl(
            url, tmp_path, f"{CUSTOM}/v1beta1/namespaces/{unique_ns}/services/*/queue_depth?labelSelector=app%3Dshop"
        )
        assert done.returncode == 1 and "needs the objects' labels" in done.stderr
