"""What a request names, checked before any provider is asked: object names and label selectors.

The one home of these checks for both metric APIs (``api/storage.py``: custom.metrics.k8s.io,
``api/external.py``: external.metrics.k8s.io). Object names as Kubernetes validates them (apimachinery
``validation.go``): a namespace is a DNS-1123 label, pods and Deployments are DNS-1123 subdomains; anything else
cannot name a real object: 400, not a query. A selector is parsed with the Kubernetes grammar
(``labels.parse_selector``) and capped in length.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from adapter.errors import BadRequest
from adapter.labels import EVERYTHING, Selector, parse_selector

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_SELECTOR_CHARS = 16 * 1024


def check_name(kind: str, value: str, label: bool) -> None:
    """BadRequest unless ``value`` is a DNS-1123 label (``label``) or subdomain, as Kubernetes names are."""
    pattern, limit = (_DNS1123_LABEL, 63) if label else (_DNS1123_SUBDOMAIN, 253)
    if len(value) > limit or not pattern.match(value):
        shown = value if len(value) <= 80 else value[:80] + "..."
        raise BadRequest(
            f"invalid {kind} name {shown!r}: must be a lowercase RFC 1123 "
            f"{'label' if label else 'subdomain'} of at most {limit} characters"
        )


# Parsed selectors by their text: every HPA sends the same labelSelector at every poll, and parsing one costs
# ~20 µs. Bounded (cleared when full); only valid selectors are kept.
_PARSED: dict[str, Selector] = {}
_MAX_PARSED = 10_000


def selector(params: Mapping[str, str], key: str) -> Selector:
    """The selector of query parameter ``key`` (everything when absent or empty); BadRequest when it is longer
    than ``MAX_SELECTOR_CHARS`` or does not parse."""
    text = params.get(key)
    if not text:
        return EVERYTHING
    hit = _PARSED.get(text)
    if hit is not None:
        return hit
    if len(text) > MAX_SELECTOR_CHARS:
        raise BadRequest(f"invalid {key}: longer than {MAX_SELECTOR_CHARS} characters")
    try:
        parsed = parse_selector(text)
    except ValueError as exc:
        raise BadRequest(f"invalid {key} {text!r}: {exc}") from None
    if len(_PARSED) >= _MAX_PARSED:
        _PARSED.clear()
    _PARSED[text] = parsed
    return parsed
