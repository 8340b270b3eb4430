"""Issue 26 row 6: one valid ServiceAccount token took the SubjectAccessReview lane from the HPA controller.

Every request of a valid token needs a SubjectAccessReview, and asking a different metric each time defeats
the decision cache (the metric is the review's subresource, so no decision may stand for another). All
reviews shared one 8-thread lane with a 256-entry queue, so the front-proxied HPA controller's polls got
``503 too many SubjectAccessReview reviews waiting`` or waited seconds. Against the real adapter process
(front-proxy authentication, TokenReview and SubjectAccessReview from the fake kube API, whose reviews for the
attacker hang, as a loaded kube-apiserver's would, values from a real Prometheus): the attacker gets its share
(4 reviews in flight) and 429 with Retry-After beyond it, counted in /metrics; another token user still gets
its own share; the HPA controller's reviews take their own lane and it gets its own values throughout.
"""

from __future__ import annotations

import threading
import time

import httpx

from adapter.auth.authz import review_key
from adapter.auth.user import UserInfo, request_attributes
from tests.hardening.victim_support import HPA_USER, Victim, front_proxy_args

FLOOD = 40
SHARE = 4  # the default --max-reviews-per-user
ATTACKER = "system:serviceaccount:tenant:attacker"


def _wait(predicate, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_token_flood_gets_its_share_and_the_hpa_controller_its_own_lane(
    secure_adapter, pki, kube, prometheus
) -> None:
    policy, kubeconfig = kube
    victim = Victim.load(prometheus)
    policy.tokens["attacker-token"] = {"username": ATTACKER, "groups": ["system:serviceaccounts"]}
    policy.tokens["bob-token"] = {"username": "bob", "groups": ["devs"]}
    gate = threading.Event()
    policy.sar_gates[ATTACKER] = gate  # the attacker's reviews hang: every one it is given stays in flight
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig))
    answers: list[httpx.Response | None] = []

    def attack(i: int) -> None:
        path = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/tenant/pods/*/metric_{i}"  # a new review each
        try:
            answers.append(
                httpx.get(
                    adapter.url + path,
                    headers={"Authorization": "Bearer attacker-token"},
                    verify=pki.context(),
                    timeout=120,
                )
            )
        except httpx.HTTPError:
            answers.append(None)

    flood = [threading.Thread(target=attack, args=(i,)) for i in range(FLOOD)]
    for t in flood:
        t.start()
    try:
        _wait(lambda: len(answers) >= FLOOD - SHARE, "the requests over the attacker's share to be refused")
        attacker_reviews = [rv for rv in policy.reviews if rv["spec"]["user"] == ATTACKER]
        assert len(attacker_reviews) == SHARE
        refused = [r for r in answers if r is not None]
        assert len(refused) == FLOOD - SHARE and {r.status_code for r in refused} == {429}
        assert {r.headers["retry-after"] for r in refused} == {"1"}
        status = refused[0].json()
        assert (status["reason"], status["code"], status["details"]["retryAfterSeconds"]) == ("TooManyRequests", 429, 1)
        # While the attacker holds its share: the HPA controller's new review is made and it is served.
        victim.assert_served(adapter, pki)
        assert any(rv["spec"]["user"] == HPA_USER for rv in policy.reviews)
        # Another token user has a share of its own.
        r = httpx.get(
            adapter.url + "/apis/custom.metrics.k8s.io/v1beta2/namespaces/devs/pods/*/metric_x",
            headers={"Authorization": "Bearer bob-token"},
            verify=pki.context(),
            timeout=30,
        )
        assert r.status_code != 429 and r.status_code < 500, (r.status_code, r.text)
        metrics = adapter.get("/metrics", cert=pki.admin).text
        assert f'llm_hpa_adapter_reviews_refused_total{{reason="user_share"}} {float(FLOOD - SHARE)}' in metrics
    finally:
        gate.set()
        for t in flood:
            t.join(120)
    assert len(answers) == FLOOD
    victim.assert_served(adapter, pki)


def test_the_decision_cache_is_never_coarser_than_the_review() -> None:
    """The metric is the review's subresource: a decision for one metric never stands for another, nor for
    another name, verb, namespace or version; only the query string (not part of the review) is ignored."""
    user = UserInfo("u", groups=("g",))
    base = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/qps"

    def key(path: str, query: bytes = b"", method: str = "GET", who: UserInfo = user) -> str:
        return review_key(request_attributes(who, method, path, query))

    assert key(base) == key(base, b"labelSelector=app%3Dweb")
    others = {
        key(base.replace("/qps", "/latency")),
        key(base.replace("/*/", "/web-1/")),
        key(base.replace("/ns/", "/other/")),
        key(base.replace("v1beta2", "v1beta1")),
        key(base, method="POST"),
        key(base, who=UserInfo("u", groups=("g", "h"))),
        key(base, who=UserInfo("v", groups=("g",))),
        key(base, who=UserInfo("u", groups=("g",), front_proxied=True)),
    }
    assert key(base) not in others and len(others) == 8
