"""The adapter's error tree: the bottom layer, imported by everything, importing nothing of ours.

Every error that can reach a client is an ``AdapterError``; ``api/wire.status`` turns it into a
Kubernetes ``Status`` body in one place (``routes/http.error_response`` sends it). Foreign errors (httpx,
JSON, Kubernetes client) are translated into these at the boundary where they happen and never cross a
layer untranslated.
"""

from __future__ import annotations

from typing import Any


class AdapterError(Exception):
    """Base class. ``code`` is the HTTP status; ``reason`` the Kubernetes StatusReason ('' = none)."""

    code = 500
    reason = "InternalError"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details


class BadRequest(AdapterError):
    code = 400
    reason = "BadRequest"


class NotFound(AdapterError):
    code = 404
    reason = "NotFound"


def route_not_found(why: str | None = None) -> NotFound:
    """The one "could not find the requested resource" 404. Bare, it is what a generic apiserver answers for a
    path under a registered prefix that matches no route (``details: {}``); ``why`` names a known route's
    missing object, e.g. an external metric that is not served (no details, as before)."""
    if why is None:
        return NotFound("the server could not find the requested resource", details={})
    return NotFound(f"the server could not find the requested resource ({why})")


class MethodNotAllowed(AdapterError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(AdapterError):
    code = 406
    reason = "NotAcceptable"


class Unsupported(AdapterError):
    """501: this server was built without what the request needs (e.g. /explain over a provider without it).
    apimachinery has no StatusReason for 501; like its ``NewGenericServerResponse`` we send none."""

    code = 501
    reason = ""


class InternalError(AdapterError):
    """A bug or a catalog query the backend rejected: our fault, never the client's."""

    code = 500
    reason = "InternalError"


class UpstreamError(AdapterError):
    """Prometheus / VictoriaMetrics / the Kubernetes API is unreachable, slow, failing or talking garbage."""

    code = 503
    reason = "ServiceUnavailable"


RETRY_AFTER_S = 1  # a 429 that names no better time: retry after a second


class TooManyRequests(AdapterError):
    """A namespace spent its share of a budget all namespaces share (``adapter/shares.py``); it may retry later.

    ``retry_after_s`` (whole seconds, at least 1) goes into the Status as ``details.retryAfterSeconds`` and into
    the ``Retry-After`` header (``api/wire.retry_after``): the apiserver's own 429s carry both."""

    code = 429
    reason = "TooManyRequests"

    def __init__(self, message: str, *, retry_after_s: int = RETRY_AFTER_S) -> None:
        self.retry_after_s = max(1, int(retry_after_s))
        super().__init__(message, details={"retryAfterSeconds": self.retry_after_s})


class ConfigError(Exception):
    """The catalog or the command line is invalid; raised at start-up, never while serving."""
