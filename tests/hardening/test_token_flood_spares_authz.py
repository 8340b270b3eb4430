"""A flood of random bearer tokens against a slow TokenReview delayed everyone's authorization.

TokenReview and SubjectAccessReview shared the event loop's default executor (6 threads on 2 cores): 60 random
tokens held every thread, and a front-proxy request's SubjectAccessReview queued behind them, with the queue
time outside the 10 s review timeout. Against the real adapter process and a fake kube API whose TokenReview
hangs: the front-proxy request is answered while every flood request is still waiting on its review.
"""

from __future__ import annotations

import threading
import time
import uuid

import httpx

from tests.hardening.conftest import SecureAdapter
from tests.hardening.victim_support import front_proxy_args

FLOOD = 60
PATH = "/apis/custom.metrics.k8s.io/v1beta2"


def _adapter(secure_adapter, pki, kubeconfig) -> SecureAdapter:  # type: ignore[no-untyped-def]
    return secure_adapter(*front_proxy_args(pki, kubeconfig))


def _wait(predicate, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_token_flood_does_not_starve_front_proxy_authorization(secure_adapter, pki, kube) -> None:
    policy, kubeconfig = kube
    adapter = _adapter(secure_adapter, pki, kubeconfig)
    policy.token_gate = threading.Event()  # every TokenReview hangs until released
    flood_answers: list[int] = []

    def bad_token(i: int) -> None:
        try:
            r = httpx.get(
                adapter.url + PATH,
                headers={"Authorization": f"Bearer random-{uuid.uuid4().hex}"},
                verify=pki.context(),
                timeout=120,
            )
            flood_answers.append(r.status_code)
        except httpx.HTTPError:
            flood_answers.append(0)

    flood = [threading.Thread(target=bad_token, args=(i,)) for i in range(FLOOD)]
    for t in flood:
        t.start()
    try:
        _wait(lambda: len(policy.token_reviews) >= 4, "the flood to occupy the TokenReview threads")
        # A front-proxy request from a user never seen before: needs a SubjectAccessReview right now.
        user = f"system:serviceaccount:kube-system:hpa-{uuid.uuid4().hex[:6]}"
        r = adapter.get(PATH, cert=pki.front_proxy, headers={"X-Remote-User": user}, timeout=120)
        answered_during_flood = len(flood_answers)
        assert r.status_code == 200, r.text
        assert answered_during_flood == 0, "the front-proxy request waited for the flood's reviews"
        assert [rv["spec"]["user"] for rv in policy.reviews] == [user]
    finally:
        policy.token_gate.set()
        for t in flood:
            t.join(120)
    assert len(flood_answers) == FLOOD and set(flood_answers) == {401}, sorted(set(flood_answers))


def test_concurrent_requests_with_one_token_make_one_review(secure_adapter, pki, kube) -> None:
    """Per-token deduplication and negative caching, as upstream's cached token authenticator does."""
    policy, kubeconfig = kube
    adapter = _adapter(secure_adapter, pki, kubeconfig)
    policy.token_gate = threading.Event()
    answers: list[int] = []

    def same_token() -> None:
        r = httpx.get(
            adapter.url + PATH, headers={"Authorization": "Bearer the-same-bad-token"}, verify=pki.context(), timeout=60
        )
        answers.append(r.status_code)

    clients = [threading.Thread(target=same_token) for _ in range(20)]
    for t in clients:
        t.start()
    _wait(lambda: "the-same-bad-token" in policy.token_reviews, "the first review")
    time.sleep(1.0)  # let the other 19 requests reach the adapter while the review hangs
    policy.token_gate.set()
    for t in clients:
        t.join(60)
    assert answers == [401] * 20
    assert policy.token_reviews == ["the-same-bad-token"]  # one review for all, and the rejection is cached
    r = httpx.get(
        adapter.url + PATH, headers={"Authorization": "Bearer the-same-bad-token"}, verify=pki.context(), timeout=60
    )
    assert r.status_code == 401 and policy.token_reviews == ["the-same-bad-token"]
