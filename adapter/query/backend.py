"""How the adapter reaches its metrics backend: flavour, TLS, credentials, extra headers and answer limits.

One frozen ``BackendAccess`` (everything but the URL and the flavour, which ``Settings`` has always carried),
built from argv by ``access_from_args`` after ``add_backend_arguments`` declared the flags. Every command that
talks to the backend (``serve``, ``explain``, ``backtest``, ``calibrate``) uses the same three functions, and
``open_http`` / ``sync_http`` build the configured ``httpx`` clients, so an option added here reaches them all.

Contracts:

- Secrets (bearer token, basic-auth password, extra header values, the client key) never appear in ``repr``,
  logs, ``/metrics``, ``explain`` output or error messages: the dataclass holds file *paths*, header values
  are ``repr=False``, and ``describe()`` (what the start-up log line prints) names headers without values.
- The bearer token, basic-auth and TLS files are re-read when they change (``query/credentials.py``).
- Bad options (a missing CA file, a client certificate without its key, a VictoriaMetrics-cluster URL that is
  not ``/select/<accountID>/prometheus``) are a ``ConfigError`` at start-up.
"""

from __future__ import annotations

import argparse
import logging
import re
import ssl
from typing import TypedDict
from urllib.parse import urlsplit, urlunsplit

import httpx

from adapter.backend_access import (
    DEFAULT_MAX_ANSWER_BYTES,
    DEFAULT_MAX_ANSWER_SERIES,
    DEFAULT_MAX_PARSE_BYTES,
    FLAVOURS,
    BackendAccess,
    Flavour,
)
from adapter.errors import ConfigError
from adapter.log_redaction import register_secret
from adapter.query.credentials import FileAuth, TLSReloader

__all__ = [
    "DEFAULT_MAX_ANSWER_BYTES",
    "DEFAULT_MAX_ANSWER_SERIES",
    "DEFAULT_MAX_PARSE_BYTES",
    "FLAVOURS",
    "BackendAccess",
    "Flavour",
]  # re-exported: callers import them here

log = logging.getLogger(__name__)

# Mimir / Cortex read the tenant from this header (grafana/dskit tenant/resolver.go, weaveworks/common
# user/http.go: OrgIDHeaderName = "X-Scope-OrgID").
TENANT_HEADER = "X-Scope-OrgID"
# vmselect's read path: /select/<accountID>[:<projectID>]/prometheus (VictoriaMetrics docs/Cluster-VictoriaMetrics.md,
# "URL format").
_VM_CLUSTER_PATH = re.compile(r"^(.*)/select/(\d+(:\d+)?)/prometheus/?$")
_ACCOUNT = re.compile(r"^\d+(:\d+)?$")
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")  # RFC 9110 token


def flavour_params(flavour: str) -> dict[str, str]:
    """Query parameters every backend query carries, per flavour (sent in the URL, so gateways see them too).

    - VictoriaMetrics (both): ``nocache=1`` (its answer cache would hide fresh samples) and
      ``deny_partial_response=1``: vmselect answers an error instead of a partial result when a vmstorage node is
      down (VictoriaMetrics docs/Cluster-VictoriaMetrics.md; app/vmselect/searchutils GetDenyPartialResponse).
      Single-node VictoriaMetrics ignores the latter and is never partial.
    - Thanos Querier: ``dedup=true`` (merge HA replicas) and ``partial_response=false`` (fail rather than answer
      without an unreachable store; thanos pkg/api/query/v1.go dedupParam / partialResponseParam).
    - Prometheus and Mimir/Cortex take no extra parameter: partial answers show as ``warnings`` (checked by
      ``results``), and Mimir fails a query whose store-gateways cannot be reached.
    """
    if flavour in ("victoriametrics", "victoriametrics-cluster"):
        return {"nocache": "1", "deny_partial_response": "1"}
    if flavour == "thanos":
        return {"dedup": "true", "partial_response": "false"}
    return {}


def redact_url(url: str) -> str:
    """``url`` without a password in its userinfo (``https://user:***@host/...``): for logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def resolve_url(url: str, flavour: str, access: BackendAccess) -> str:
    """The base URL the client appends ``/api/v1/...`` to; checks the layout a flavour needs.

    VictoriaMetrics cluster: either the full ``.../select/<accountID>/prometheus`` URL, or vmselect's root plus
    ``--backend-tenant <accountID>[:<projectID>]``. ConfigError otherwise (a vmselect root without a tenant
    answers 400 to every query, a confusing failure to meet at the first HPA sync).
    """
    base = url.rstrip("/")
    scheme = urlsplit(base).scheme
    if scheme not in ("http", "https"):
        raise ConfigError(f"--prometheus-url {redact_url(url)!r}: expected an http:// or https:// URL")
    tls_opts = access.ca_file or access.cert_file or access.insecure_skip_verify
    if tls_opts and scheme != "https":
        raise ConfigError(
            "--backend-ca-file / --backend-cert-file / --backend-insecure-skip-verify need an https:// --prometheus-url"
        )
    if flavour == "victoriametrics-cluster":
        match = _VM_CLUSTER_PATH.match(urlsplit(base).path)
        if match is None:
            if access.tenant is None:
                raise ConfigError(
                    "--backend victoriametrics-cluster: --prometheus-url must end in "
                    "/select/<accountID>/prometheus (e.g. http://vmselect:8481/select/0/prometheus), "
                    "or give vmselect's root URL and --backend-tenant <accountID>"
                )
            if not _ACCOUNT.match(access.tenant):
                raise ConfigError(
                    f"--backend-tenant {access.tenant!r}: VictoriaMetrics cluster tenants are "
                    "<accountID> or <accountID>:<projectID> (numbers)"
                )
            return f"{base}/select/{access.tenant}/prometheus"
        if access.tenant is not None and access.tenant != match.group(2):
            raise ConfigError(f"--backend-tenant {access.tenant!r} contradicts the URL's tenant {match.group(2)!r}")
    elif access.tenant is not None and flavour != "mimir":
        raise ConfigError(
            "--backend-tenant applies to --backend mimir (X-Scope-OrgID) and victoriametrics-cluster "
            "(the URL's accountID); for another header use --backend-header NAME=VALUE"
        )
    return base


def request_headers(flavour: str, access: BackendAccess) -> dict[str, str]:
    """Static headers for every backend request: ``--backend-header`` plus the Mimir tenant."""
    headers = dict(access.headers)
    if flavour == "mimir" and access.tenant is not None:
        headers[TENANT_HEADER] = access.tenant
    return headers


def ssl_context(access: BackendAccess) -> ssl.SSLContext:
    """The TLS context for https backends: system CAs or ``ca_file``, an optional client certificate (mTLS).

    ``insecure_skip_verify`` turns verification off and says so loudly in the log at every start.
    """
    try:
        ctx = ssl.create_default_context(cafile=access.ca_file)
        if access.cert_file:
            ctx.load_cert_chain(access.cert_file, access.key_file)
    except (OSError, ssl.SSLError) as exc:
        # The exception names the file and the reason (no key material).
        raise ConfigError(f"backend TLS files: {exc}") from None
    if access.insecure_skip_verify:
        log.warning(
            "BACKEND TLS VERIFICATION IS OFF (--backend-insecure-skip-verify): the backend's certificate "
            "is not checked; anyone on the path can read and forge metrics. Use --backend-ca-file instead."
        )
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    return ctx


def _client_kwargs(url: str, flavour: str, access: BackendAccess) -> dict[str, object]:
    if access.token_file and access.basic_auth_file:
        raise ConfigError("give --backend-token-file or --backend-basic-auth-file, not both")
    if bool(access.cert_file) != bool(access.key_file):
        raise ConfigError("--backend-cert-file and --backend-key-file go together (mTLS)")
    if access.max_answer_bytes < 1024:
        raise ConfigError("--backend-max-answer-bytes must be at least 1024")
    if access.max_answer_series < 1:
        raise ConfigError("--backend-max-answer-series must be at least 1")
    if access.max_parse_bytes < access.max_answer_bytes:
        raise ConfigError("--backend-max-parse-bytes must be at least --backend-max-answer-bytes")
    ctx = ssl_context(access) if urlsplit(url).scheme == "https" else None
    auth = FileAuth(
        access, TLSReloader(ctx, access) if ctx is not None and (access.cert_file or access.ca_file) else None
    )
    auth.check()
    # trust_env stays httpx's default (HTTPS_PROXY / NO_PROXY honoured), as before these options existed.
    kwargs: dict[str, object] = {"headers": request_headers(flavour, access), "auth": auth}
    if ctx is not None:
        kwargs["verify"] = ctx
    return kwargs


def open_http(
    url: str,
    flavour: str,
    access: BackendAccess,
    *,
    limits: httpx.Limits | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
) -> httpx.AsyncClient:
    """The configured async client (the caller closes it: ``async with open_http(...) as http``).

    ``url`` is the resolved base URL (``resolve_url``). Raises ConfigError for unusable options.
    """
    kwargs = _client_kwargs(url, flavour, access)
    if limits is not None:
        kwargs["limits"] = limits
    return httpx.AsyncClient(transport=transport, **kwargs)  # type: ignore[arg-type]


def sync_http(url: str, flavour: str, access: BackendAccess, *, timeout_s: float) -> httpx.Client:
    """The same configuration for a blocking client (``backtest``)."""
    return httpx.Client(timeout=timeout_s, **_client_kwargs(url, flavour, access))  # type: ignore[arg-type]


# -- argv ----------------------------------------------------------------------------------------------------------


def add_backend_arguments(
    p: argparse.ArgumentParser, *, required_url: bool = True, query_timeout_default: float = 5.0
) -> None:
    """Declare ``--prometheus-url``, ``--backend`` and the connection flags on ``p`` (one group)."""
    g = p.add_argument_group("metrics backend (Prometheus, VictoriaMetrics, Thanos, Mimir/Cortex)")
    g.add_argument(
        "--prometheus-url",
        required=required_url,
        help="base URL the backend's /api/v1/query answers under, e.g. http://prometheus:9090, "
        "https://thanos-querier:9091, http://mimir/prometheus, http://vmselect:8481/select/0/prometheus",
    )
    g.add_argument(
        "--backend",
        choices=FLAVOURS,
        default="prometheus",
        help="what answers at --prometheus-url: sets the partial-answer rules and parameters "
        "(thanos: dedup=true&partial_response=false; victoriametrics[-cluster]: nocache=1&"
        "deny_partial_response=1; mimir: tenant header). Default prometheus",
    )
    g.add_argument(
        "--query-timeout",
        type=float,
        default=query_timeout_default,
        help=f"seconds one backend query may take in total, body included (default {query_timeout_default:g})",
    )
    g.add_argument(
        "--backend-ca-file", help="CA bundle (PEM) that signs the backend's certificate (default: the system's CAs)"
    )
    g.add_argument(
        "--backend-cert-file", help="client certificate (PEM) for mTLS to the backend; reloaded when it changes"
    )
    g.add_argument("--backend-key-file", help="its private key (PEM)")
    g.add_argument(
        "--backend-token-file",
        help="file holding a bearer token, re-read when it changes (e.g. the projected ServiceAccount "
        "token /var/run/secrets/kubernetes.io/serviceaccount/token)",
    )
    g.add_argument("--backend-basic-auth-file", help="file holding one line USER:PASSWORD, re-read when it changes")
    g.add_argument(
        "--backend-header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="extra header on every backend request; repeatable (values are never logged)",
    )
    g.add_argument(
        "--backend-tenant",
        default=None,
        help="tenant: sent as X-Scope-OrgID for --backend mimir; the <accountID>[:<projectID>] of the "
        "URL for victoriametrics-cluster",
    )
    g.add_argument(
        "--backend-insecure-skip-verify",
        action="store_true",
        help="do not verify the backend's TLS certificate (logged loudly; testing only)",
    )
    g.add_argument(
        "--backend-max-answer-bytes",
        type=int,
        default=DEFAULT_MAX_ANSWER_BYTES,
        help=f"largest backend answer read; bigger ones are a 503 (default {DEFAULT_MAX_ANSWER_BYTES})",
    )
    g.add_argument(
        "--backend-max-answer-series",
        type=int,
        default=DEFAULT_MAX_ANSWER_SERIES,
        help="most series one backend answer may hold, counted as it streams in; more is a 503 naming the "
        f"metric (default {DEFAULT_MAX_ANSWER_SERIES})",
    )
    g.add_argument(
        "--backend-max-parse-bytes",
        type=int,
        default=DEFAULT_MAX_PARSE_BYTES,
        help="backend answer bytes held (read or being parsed) at once, all queries together; a query that "
        "would exceed it is a 503 (default %(default)s; at least --backend-max-answer-bytes)",
    )


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep:
        name, sep, value = text.partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not _HEADER_NAME.match(name) or any(c in value for c in "\r\n\0"):
        raise ConfigError(f"--backend-header {name or text[:20]!r}...: expected NAME=VALUE with an HTTP header name")
    register_secret(value)
    return name, value


def access_from_args(args: argparse.Namespace) -> BackendAccess:
    """The ``BackendAccess`` the flags of ``add_backend_arguments`` describe."""
    return BackendAccess(
        ca_file=args.backend_ca_file,
        cert_file=args.backend_cert_file,
        key_file=args.backend_key_file,
        token_file=args.backend_token_file,
        basic_auth_file=args.backend_basic_auth_file,
        headers=tuple(_header(h) for h in args.backend_header),
        tenant=args.backend_tenant,
        insecure_skip_verify=args.backend_insecure_skip_verify,
        max_answer_bytes=args.backend_max_answer_bytes,
        max_answer_series=args.backend_max_answer_series,
        max_parse_bytes=args.backend_max_parse_bytes,
    )


def check_access(url: str, flavour: str, access: BackendAccess) -> str:
    """Validate everything at start-up (URL layout, files readable, TLS context builds); the resolved URL.

    Raises ConfigError with the flag to fix. Logs one line saying where and how the adapter reads (no secrets).
    """
    password = urlsplit(url).password
    if password:
        register_secret(password)
    resolved = resolve_url(url, flavour, access)
    _client_kwargs(resolved, flavour, access)
    log.info("metrics backend: %s (%s) %s", redact_url(resolved), flavour, access.describe())
    return resolved


class BackendSettings(TypedDict):
    prometheus_url: str
    backend: Flavour
    query_timeout_s: float
    backend_access: BackendAccess


def backend_settings(args: argparse.Namespace) -> BackendSettings:
    """``Settings`` keyword arguments for the flags of ``add_backend_arguments``, checked (``check_access``):
    ``Settings(**backend_settings(args), catalog=...)``. For serve, explain, calibrate."""
    access = access_from_args(args)
    if args.query_timeout <= 0:
        raise ConfigError("--query-timeout must be positive")
    check_access(args.prometheus_url, args.backend, access)
    return BackendSettings(
        prometheus_url=args.prometheus_url,
        backend=args.backend,
        query_timeout_s=args.query_timeout,
        backend_access=access,
    )
