"""Delegated authorization: SubjectAccessReview with a decision cache (kubernetes/apiserver semantics).

``/healthz``, ``/readyz`` and ``/livez`` are always allowed, ``system:masters`` is allowed without a review
(apiserver ``pkg/server/options/authorization.go``); every other decision comes from a SubjectAccessReview
built by ``kubeapi.py``, cached 10 s when allowed and 10 s when denied; identical reviews in flight at the
same time are made once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field

from adapter.auth.single import shared_call
from adapter.auth.user import MASTERS, Attributes
from adapter.errors import AdapterError

# (attributes) -> (allowed, reason)
AccessReviewer = Callable[[Attributes], Awaitable[tuple[bool, str]]]
ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")


class Forbidden(AdapterError):
    code = 403
    reason = "Forbidden"


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
    _cache: dict[str, tuple[float, bool, str]] = field(default_factory=dict)
    _in_flight: dict[str, asyncio.Future[tuple[bool, str]]] = field(default_factory=dict)
    reviews_sent: int = 0

    async def authorize(self, attrs: Attributes) -> tuple[bool, str]:
        """(allowed, reason). Without a reviewer (not configured) nothing but the fast paths is allowed."""
        if not attrs.resource_request and attrs.path in self.always_allow_paths:
            return True, ""
        if any(g in self.always_allow_groups for g in attrs.user.groups):
            return True, ""
        if self.reviewer is None:
            return False, "no authorizer configured"
        key = json.dumps(asdict(attrs), sort_keys=True, default=list)
        hit = self._cache.get(key)
        if hit is not None and hit[0] > time.monotonic():
            return hit[1], hit[2]
        return await shared_call(self._in_flight, key, lambda: self._review_and_cache(key, attrs))

    async def _review_and_cache(self, key: str, attrs: Attributes) -> tuple[bool, str]:
        assert self.reviewer is not None
        self.reviews_sent += 1
        allowed, reason = await self.reviewer(attrs)
        if len(self._cache) > 10_000:
            self._cache.clear()
        ttl = self.allowed_ttl_s if allowed else self.denied_ttl_s
        self._cache[key] = (time.monotonic() + ttl, allowed, reason)
        return allowed, reason
