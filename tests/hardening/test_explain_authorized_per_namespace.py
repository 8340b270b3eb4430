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
