"""``/explain`` ignored namespace permissions.

It was authorized as the non-resource URL only, so anyone allowed ``/explain`` read every namespace's
per-pod values. Against the real adapter process (front-proxy authentication, SubjectAccessReviews from a
fake kube API): a user denied the metric in the victim's namespace gets 403 there, and gets their own
namespace's explanation, decided by a review for exactly what the equivalent custom-metrics request reads.
"""

from __future__ import annotations

import time
import uuid

from tests.hardening.victim_support import front_proxy_args
from tests.support.fleet_data import PodSpec, build

METRIC = "llm_composite_load"


def specs(policy) -> list[dict]:  # type: ignore[no-untyped-def]
    """The attributes of each review received, without the user."""
    return [{k: v for k, v in rv["spec"].items() if k not in ("user", "groups")} for rv in policy.reviews]


def test_explain_is_authorized_per_namespace(secure_adapter, pki, kube, prometheus) -> None:
    policy, kubeconfig = kube
    victim, own = f"victim-{uuid.uuid4().hex[:6]}", f"tenant-{uuid.uuid4().hex[:6]}"
    now = float(int(time.time()) - 30)
    for ns, pod in ((victim, "web-6f7d8c9b5-vvvv1"), (own, "web-6f7d8c9b5-tttt1")):
        prometheus.load(build(ns, [PodSpec(pod, gpus=1, layout="honor", labels={"app": "web"}, deployment="web")], now))
    user = "tenant-user"
    policy.denied.append({"user": user, "namespace": victim})  # RBAC: the tenant may not read the victim's
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig))
    headers = {"X-Remote-User": user, "X-Remote-Group": "tenants"}
    policy.reviews.clear()

    r = adapter.get(
        f"/explain?namespace={victim}&metric={METRIC}&selector=app%3Dweb", cert=pki.front_proxy, headers=headers
    )
    assert r.status_code == 403, r.text
    assert "vvvv1" not in r.text
    assert [next(iter(spec)) for spec in specs(policy)] == ["nonResourceAttributes", "resourceAttributes"]
    assert r.json()["message"] == (
        f'pods.custom.metrics.k8s.io "*" is forbidden: User "{user}" cannot get resource "pods/{METRIC}" in API '
        f'group "custom.metrics.k8s.io" in the namespace "{victim}": RBAC: no rule allows it'
    )

    policy.reviews.clear()
    r = adapter.get(
        f"/explain?namespace={own}&metric={METRIC}&selector=app%3Dweb", cert=pki.front_proxy, headers=headers
    )
    assert r.status_code == 200, r.text
    assert "web-6f7d8c9b5-tttt1" in r.text and "vvvv1" not in r.text
    # The path decision is cached from the first call; the namespace's data needs its own review.
    assert specs(policy) == [
        {
            "resourceAttributes": {
                "namespace": own,
                "verb": "get",
                "group": "custom.metrics.k8s.io",
                "version": "v1beta2",
                "resource": "pods",
                "subresource": METRIC,
                "name": "*",
            }
        }
    ]

    # Without a namespace nothing is read, and the route says what is missing.
    r = adapter.get(f"/explain?metric={METRIC}&selector=app%3Dweb", cert=pki.front_proxy, headers=headers)
    assert r.status_code == 400


def test_explain_reads_an_hpas_further_metrics_only_where_the_caller_may(secure_adapter, pki, kube, prometheus) -> None:
    """An HPA manifest names more metrics than the one explained; each is read only after the same review as
    reading it through the API, so a caller denied one metric cannot read it through ``POST /explain``."""
    import httpx
    import yaml

    policy, kubeconfig = kube
    ns = f"tenant-{uuid.uuid4().hex[:6]}"
    prometheus.load(
        build(
            ns,
            [PodSpec("web-6f7d8c9b5-tttt1", gpus=1, layout="honor", labels={"app": "web"}, deployment="web")],
            float(int(time.time()) - 30),
        )
    )
    user = "tenant-user"
    policy.denied.append({"user": user, "namespace": ns, "subresource": "inference_queue_depth"})
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig))
    headers = {"X-Remote-User": user, "X-Remote-Group": "tenants"}

    def pods_metric(name: str) -> dict:  # type: ignore[type-arg]
        return {
            "type": "Pods",
            "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": "1"}},
        }

    manifest = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "web", "namespace": ns},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
            "maxReplicas": 10,
            "metrics": [pods_metric(METRIC), pods_metric("inference_queue_depth"), pods_metric("gpu_utilization_p90")],
        },
    }
    policy.reviews.clear()
    with httpx.Client(verify=pki.context(pki.front_proxy), timeout=30) as client:
        r = client.post(
            f"{adapter.url}/explain?namespace={ns}&metric={METRIC}&selector=app%3Dweb",
            content=yaml.safe_dump(manifest),
            headers=headers,
        )
    assert r.status_code == 200, r.text
    hpa = r.json()["hpa"]
    assert hpa["metrics"] == [f"Pods/{METRIC}", "Pods/gpu_utilization_p90"]
    assert [p["metric"] for p in hpa["proposals"]] == hpa["metrics"]
    assert hpa["ignored"] == ["Pods/inference_queue_depth"]
    assert (
        f"Pods/inference_queue_depth: not read, the caller may not get pods/inference_queue_depth in {ns}"
        in (r.json()["problems"])
    )
    reviewed = [s["resourceAttributes"]["subresource"] for s in specs(policy) if "resourceAttributes" in s]
    assert reviewed == [METRIC, "inference_queue_depth", "gpu_utilization_p90"]
