"""A direct caller's share of the review lane (auth/authz.py), without processes: the rule itself."""

from __future__ import annotations

import asyncio

import pytest

from adapter.auth.authz import Authorizer, TooManyReviews
from adapter.auth.user import Attributes, UserInfo, request_attributes


def _attrs(user: UserInfo, metric: str) -> Attributes:
    return request_attributes(user, "GET", f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/ns/pods/*/{metric}", b"")


def test_a_direct_caller_is_refused_past_its_share_and_nobody_else_is() -> None:
    async def scenario() -> None:
        release = asyncio.Event()
        sent: list[str] = []

        async def reviewer(attrs: Attributes) -> tuple[bool, str]:
            sent.append(f"{attrs.user.name}/{attrs.subresource}")
            await release.wait()
            return True, ""

        authz = Authorizer(reviewer, max_reviews_per_user=2)
        mallory, bob = UserInfo("mallory"), UserInfo("bob")
        held = [asyncio.ensure_future(authz.authorize(_attrs(mallory, f"m{i}"))) for i in range(2)]
        await asyncio.sleep(0)
        with pytest.raises(TooManyReviews) as refused:
            await authz.authorize(_attrs(mallory, "m2"))
        assert refused.value.code == 429 and refused.value.details == {"retryAfterSeconds": 1}
        # The same question again shares the review in flight: not a new one, so not refused.
        shared = asyncio.ensure_future(authz.authorize(_attrs(mallory, "m0")))
        other = asyncio.ensure_future(authz.authorize(_attrs(bob, "m0")))  # another user: its own share
        hpa = UserInfo("hpa", front_proxied=True)  # never capped here: its own lane, kube-apiserver's APF
        front = [asyncio.ensure_future(authz.authorize(_attrs(hpa, f"m{i}"))) for i in range(5)]
        await asyncio.sleep(0)
        release.set()
        assert await asyncio.gather(*held, shared, other, *front) == [(True, "")] * 9
        assert authz.refused_over_share == 1
        assert sorted(sent) == sorted(["mallory/m0", "mallory/m1", "bob/m0"] + [f"hpa/m{i}" for i in range(5)])
        # Once its reviews are answered the caller has its whole share again.
        assert await authz.authorize(_attrs(mallory, "m3")) == (True, "")

    asyncio.run(scenario())
