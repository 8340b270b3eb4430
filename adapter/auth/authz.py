"""Delegated authorization: SubjectAccessReview with a decision cache (kubernetes/apiserver semantics).

``/healthz``, ``/readyz`` and ``/livez`` are always allowed, ``system:masters`` is allowed without a review
(apiserver ``pkg/server/options/authorization.go``); every other decision comes from a SubjectAccessReview
built by ``kubeapi.py``, cached 10 s when allowed and 10 s when denied; identical reviews in flight at the
same time are made once.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field

from adapter.auth.user import MASTERS, Attributes
from adapter.errors import AdapterError
from adapter.ttlcache import TtlCache

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
    reviews_sent: int = 0
    _cache: TtlCache[str, tuple[bool, str]] = field(init=False, repr=False)

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
        key = json.dumps(asdict(attrs), sort_keys=True, default=list)
        return await self._cache.get(key, lambda: self._review(attrs))

    async def _review(self, attrs: Attributes) -> tuple[bool, str]:
        assert self.reviewer is not None
        self.reviews_sent += 1
        return await self.reviewer(attrs)
