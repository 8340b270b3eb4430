"""Delegated authorization: SubjectAccessReview with a decision cache (kubernetes/apiserver semantics).

``/healthz``, ``/readyz`` and ``/livez`` are always allowed, ``system:masters`` is allowed without a review
(apiserver ``pkg/server/options/authorization.go``); every other decision comes from a SubjectAccessReview
built by ``kubeapi.py``, cached 10 s when allowed and 10 s when denied; identical reviews in flight at the
same time are made once.

The cache key is exactly what the review asks (user, uid, groups, extra and the resource or non-resource
attributes), as upstream's webhook authorizer keys its cache on the marshalled review spec (kubernetes/apiserver
``plugin/pkg/authorizer/webhook/webhook.go``). No coarser key is exact: for custom metrics the metric name is the
*subresource* (``pods/qps``), and RBAC may allow one metric and not another, so one decision can never stand
for another metric, name, verb or namespace.

**Fair shares of the review lane.** A caller that is not front-proxied (a bearer token, a plain client
certificate) may have at most ``max_reviews_per_user`` reviews in flight at once; one more is refused at once
with ``429`` and ``Retry-After`` (``TooManyReviews``) and counted. Asking a different metric each time defeats
the cache, so without this one ServiceAccount token could occupy every review thread. Front-proxied callers
(the HPA controller through kube-aggregator) are not capped here: their reviews take their own lane
(``kubeapi.py``), and kube-apiserver's API Priority and Fairness has already shared that traffic out per user
before proxying it; capping the HPA controller would refuse its cold-start burst of one review per HPA.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from adapter.auth.user import MASTERS, Attributes
from adapter.errors import AdapterError, TooManyRequests
from adapter.ttlcache import TtlCache

# (attributes) -> (allowed, reason)
AccessReviewer = Callable[[Attributes], Awaitable[tuple[bool, str]]]
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")


class Forbidden(AdapterError):
    code = 403
    reason = "Forbidden"


class TooManyReviews(TooManyRequests):
    """A caller over its share of the review lane (429; the client retries after ``retry_after_s``)."""


def review_key(attrs: Attributes) -> str:
    """What the review for ``attrs`` asks, and nothing coarser (the cache key; see the module docstring)."""
    user = attrs.user
    who = {"user": user.name, "uid": user.uid, "groups": list(user.groups), "extra": dict(user.extra)}
    # The lane too, not sent in the review: a front-proxied request never waits on a direct caller's load.
    who["lane"] = "front_proxy" if user.front_proxied else "direct"
    if attrs.resource_request:
        what = {
            "namespace": attrs.namespace,
            "verb": attrs.verb,
            "group": attrs.group,
            "version": attrs.version,
            "resource": attrs.resource,
            "subresource": attrs.subresource,
            "name": attrs.name,
        }
        return json.dumps({**who, "resourceAttributes": what}, sort_keys=True, default=list)
    return json.dumps({**who, "nonResourceAttributes": {"path": attrs.path, "verb": attrs.verb}}, sort_keys=True)


def _html_escape(text: str) -> str:
    # responsewriters/errors.go escapes the message for HTML before it is JSON-encoded.
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def forbidden(attrs: Attributes, reason: str = "") -> Forbidden:
    """The Status upstream answers for a denied request (responsewriters.ForbiddenStatusError)."""
    user = attrs.user.name
    if not attrs.resource_request:
        msg = f'User "{user}" cannot {attrs.verb} path "{attrs.path}"'
        if reason:
            msg += f": {reason}"
        return Forbidden("forbidden: " + _html_escape(msg), details={})
    resource = attrs.resource + (f"/{attrs.subresource}" if attrs.subresource else "")
    msg = f'User "{user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.group}"'
    msg += f' in the namespace "{attrs.namespace}"' if attrs.namespace else " at the cluster scope"
    if reason:
        msg += f": {reason}"
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    details: dict[str, object] = {}
    if attrs.name:
        details["name"] = attrs.name
        head = f'{qualified} "{attrs.name}" is forbidden: '
    else:
        head = f"{qualified} is forbidden: "
    details["group"] = attrs.group
    details["kind"] = attrs.resource
    return Forbidden(head + _html_escape(msg), details=details)


@dataclass
class Authorizer:
    reviewer: AccessReviewer | None
    always_allow_paths: Sequence[str] = ALWAYS_ALLOW_PATHS
    always_allow_groups: Sequence[str] = (MASTERS,)
    allowed_ttl_s: float = 10.0
    denied_ttl_s: float = 10.0
    max_reviews_per_user: int = 4
    reviews_sent: int = 0
    refused_over_share: int = 0  # reviews refused with 429 (a caller over its share)
    _cache: TtlCache[str, tuple[bool, str]] = field(init=False, repr=False)
    _in_flight: Counter[str] = field(init=False, repr=False, default_factory=Counter)

    def __post_init__(self) -> None:
        self._cache = TtlCache(lambda answer: self.allowed_ttl_s if answer[0] else self.denied_ttl_s)

    async def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason). Without a reviewer (not configured) nothing but the fast paths is allowed."""
        if not attrs.resource_request and attrs.path in self.always_allow_paths:
            return True, ""
        if any(g in self.always_allow_groups for g in attrs.user.groups):
            return True, ""
        if self.reviewer is None:
            return False, "no authorizer configured"
        return await self._cache.get(review_key(attrs), lambda: self._review(attrs))

    async def _review(self, attrs: Attributes) -> tuple[bool, str]:
        assert self.reviewer is not None
        user = attrs.user
        capped = not user.front_proxied
        if capped and self._in_flight[user.name] >= self.max_reviews_per_user:
            self.refused_over_share += 1
            raise TooManyReviews(
                f"too many authorization reviews in flight for this user (at most {self.max_reviews_per_user}); "
                "retry later"
            )
        self.reviews_sent += 1
        if capped:
            self._in_flight[user.name] += 1
        try:
            return await self.reviewer(attrs)
        finally:
            if capped:
                self._in_flight[user.name] -= 1
                if self._in_flight[user.name] <= 0:
                    del self._in_flight[user.name]
