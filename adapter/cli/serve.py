"""``serve``: run the adapter."""

from __future__ import annotations

import argparse
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING

from adapter.catalog import load_catalog
from adapter.connection import DEFAULT_LIMITS, ServingLimits
from adapter.errors import ConfigError
from adapter.promadapter.discovery import (
    DEFAULT_RELIST_INTERVAL_S,
    MAX_AGE_FLAG,
    RELIST_INTERVAL_FLAG,
    RelistSettings,
    flag_seconds,
)
from adapter.query.backend import add_backend_arguments, backend_settings
from adapter.settings import Settings

if TYPE_CHECKING:  # imported where used: the Kubernetes client costs every command line ~0.3 s to import
    from adapter.auth.setup import Security
    from adapter.provider.promadapter import RulesSetup

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="serve custom.metrics.k8s.io from Prometheus or VictoriaMetrics")
    p.add_argument("--bind", default="0.0.0.0:6443", help="HOST:PORT to listen on (default 0.0.0.0:6443)")
    p.add_argument(
        "--insecure-plain-http", action="store_true", help="serve plain HTTP without authentication: local use only"
    )
    tls = p.add_argument_group("TLS and authentication (HTTPS, the default)")
    tls.add_argument("--tls-cert-file", help="serving certificate (PEM); reloaded when it changes")
    tls.add_argument("--tls-private-key-file", help="its private key (PEM)")
    tls.add_argument("--client-ca-file", help="CA for plain client certificates (user = CN, groups = O)")
    tls.add_argument(
        "--requestheader-client-ca-file",
        help="CA of the front proxy (kube-aggregator); default: from the cluster's "
        "kube-system/extension-apiserver-authentication ConfigMap",
    )
    tls.add_argument(
        "--requestheader-allowed-names",
        default=None,
        help="comma-separated CNs allowed to assert X-Remote-* headers (empty: any CN of the CA)",
    )
    tls.add_argument("--requestheader-username-headers", default="X-Remote-User")
    tls.add_argument("--requestheader-group-headers", default="X-Remote-Group")
    tls.add_argument("--requestheader-extra-headers-prefix", default="X-Remote-Extra-")
    tls.add_argument(
        "--authentication-kubeconfig",
        "--authorization-kubeconfig",
        dest="auth_kubeconfig",
        help="kubeconfig for TokenReview/SubjectAccessReview (default: in-cluster)",
    )
    tls.add_argument(
        "--authentication-skip-lookup",
        action="store_true",
        help="do not read kube-system/extension-apiserver-authentication",
    )
    tls.add_argument(
        "--no-kubernetes-auth",
        action="store_true",
        help="no TokenReview/SubjectAccessReview: only system:masters and health paths (local use)",
    )
    lim = p.add_argument_group("limits against hostile clients (see adapter/connection.py)")
    lim.add_argument(
        "--max-connections",
        type=int,
        default=DEFAULT_LIMITS.max_connections,
        help="open connections at most; one more is answered 503 and closed (default %(default)s)",
    )
    lim.add_argument(
        "--request-header-timeout",
        type=float,
        default=DEFAULT_LIMITS.header_timeout_s,
        help="seconds a TLS handshake, then each request head, may take; then 408 and close "
        "(default %(default)g, kube-apiserver's ReadHeaderTimeout)",
    )
    lim.add_argument(
        "--max-connections-per-address",
        type=int,
        default=DEFAULT_LIMITS.max_connections_per_address,
        help="of those, open connections from one client address at most; front-proxy connections are "
        "not counted (default %(default)s)",
    )
    lim.add_argument(
        "--front-proxy-connections",
        type=int,
        default=DEFAULT_LIMITS.front_proxy_connections,
        help="connections reserved for clients with a valid front-proxy certificate (kube-aggregator), "
        "outside --max-connections (default %(default)s)",
    )
    lim.add_argument(
        "--request-body-timeout",
        type=float,
        default=DEFAULT_LIMITS.body_timeout_s,
        help="seconds a request body may take after its head, plus its length at 64 KiB/s; then 408 and "
        "close (default %(default)g)",
    )
    lim.add_argument(
        "--max-reviews-per-user",
        type=int,
        default=4,
        help="SubjectAccessReviews one caller that is not front-proxied may have in flight; one more is "
        "answered 429 with Retry-After (default %(default)s)",
    )
    lim.add_argument(
        "--authentication-configmap-refresh",
        type=float,
        default=60.0,
        help="seconds between re-reads of kube-system/extension-apiserver-authentication "
        "(front-proxy CA rotation; default %(default)g)",
    )
    p.add_argument("--config", default=None, help="metric catalog YAML (default: the embedded catalog)")
    p.add_argument(
        "--pod-source",
        choices=["auto", "kubernetes", "prometheus"],
        default="auto",
        help="where pods behind a selector come from: the Kubernetes API, or kube-state-metrics "
        "series (auto: kubernetes when in a cluster or a kubeconfig exists)",
    )
    p.add_argument(
        "--prometheus-adapter-config",
        default=None,
        metavar="FILE",
        help="prometheus-adapter's configuration file (the YAML its --config reads): its rules and externalRules "
        "are served beside the catalog (docs/prometheus-adapter.md)",
    )
    p.add_argument(
        RELIST_INTERVAL_FLAG,
        dest="metrics_relist_interval",
        default=f"{DEFAULT_RELIST_INTERVAL_S:g}s",
        help="how often the rules' series are re-listed (prometheus-adapter's flag and default, 10m)",
    )
    p.add_argument(
        MAX_AGE_FLAG, dest="metrics_max_age", default="0s", help="how far back a listing looks (0: the interval)"
    )
    p.add_argument("--kubeconfig", default=None)
    p.add_argument(
        "--pod-cache-ttl",
        type=float,
        default=10.0,
        help="seconds kube-state-metrics pod membership is reused (pod source prometheus; default 10)",
    )
    p.add_argument(
        "--forecast-tick", type=float, default=5.0, help="seconds between looks for workloads due a refit (default 5)"
    )
    p.add_argument(
        "--readyz-unreachable-after",
        type=float,
        default=30.0,
        help="seconds without any answer from the backend (queries and probes failing) after which /readyz "
        "answers 503; the first answer makes it ready again (default %(default)g)",
    )
    add_backend_arguments(p)
    p.set_defaults(func=run)


def _pod_source(choice: str, kubeconfig: str | None) -> str:
    if choice != "auto":
        return choice
    if (
        os.environ.get("KUBERNETES_SERVICE_HOST")
        or kubeconfig
        or os.environ.get("KUBECONFIG")
        or os.path.exists(os.path.expanduser("~/.kube/config"))
    ):
        return "kubernetes"
    return "prometheus"


def rules_setup(path: str | None, relist_interval: str, max_age: str) -> RulesSetup | None:
    """The prometheus-adapter file read and checked now: ``ConfigError`` names the rule and field."""
    relist = RelistSettings(flag_seconds(RELIST_INTERVAL_FLAG, relist_interval), flag_seconds(MAX_AGE_FLAG, max_age))
    if path is None:
        return None
    from adapter.promadapter.config import parse_config
    from adapter.provider.promadapter import RulesSetup

    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"--prometheus-adapter-config {path}: {exc}") from None
    try:
        config = parse_config(text)
    except ConfigError as exc:
        raise ConfigError(f"--prometheus-adapter-config {path}: {exc}") from None
    for warning in config.warnings:
        log.warning("--prometheus-adapter-config %s: %s", path, warning)
    return RulesSetup(config, relist)


def parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--bind {bind!r}: expected HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def _csv(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


def security_from(args: argparse.Namespace) -> Security:
    from adapter.auth.setup import Security, SecurityOptions
    from adapter.auth.tls import TLSFiles

    if not (args.tls_cert_file and args.tls_private_key_file):
        raise ConfigError(
            "HTTPS needs --tls-cert-file and --tls-private-key-file (make them with "
            "`python -m adapter certs`), or pass --insecure-plain-http for local plain HTTP"
        )
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
    use_cluster = not args.no_kubernetes_auth and bool(args.auth_kubeconfig or in_cluster)
    opts = SecurityOptions(
        tls=TLSFiles(
            args.tls_cert_file, args.tls_private_key_file, args.client_ca_file, args.requestheader_client_ca_file
        ),
        allowed_names=None if args.requestheader_allowed_names is None else _csv(args.requestheader_allowed_names),
        username_headers=_csv(args.requestheader_username_headers),
        group_headers=_csv(args.requestheader_group_headers),
        extra_prefixes=_csv(args.requestheader_extra_headers_prefix),
        kubeconfig=args.auth_kubeconfig,
        use_cluster=use_cluster,
        lookup_configmap=not args.authentication_skip_lookup,
        configmap_refresh_s=args.authentication_configmap_refresh,
        max_reviews_per_user=args.max_reviews_per_user,
    )
    return Security(opts)


def run(args: argparse.Namespace) -> int:
    from adapter.server import make_server

    security = None if args.insecure_plain_http else security_from(args)
    host, port = parse_bind(args.bind)
    settings = Settings(
        **backend_settings(args),
        catalog=load_catalog(args.config),
        pod_source=_pod_source(args.pod_source, args.kubeconfig),  # type: ignore[arg-type]
        kubeconfig=args.kubeconfig,
        pod_cache_ttl_s=args.pod_cache_ttl,
        forecast_tick_s=args.forecast_tick,
        readyz_unreachable_after_s=args.readyz_unreachable_after,
    )
    if args.readyz_unreachable_after < 0:
        raise ConfigError("--readyz-unreachable-after must not be negative")
    if min(args.max_connections, args.max_connections_per_address, args.front_proxy_connections) < 1:
        raise ConfigError("--max-connections, --max-connections-per-address and --front-proxy-connections must be >= 1")
    if args.request_header_timeout <= 0 or args.request_body_timeout <= 0:
        raise ConfigError("--request-header-timeout and --request-body-timeout must be positive")
    if args.max_reviews_per_user < 1:
        raise ConfigError("--max-reviews-per-user must be at least 1")
    limits = ServingLimits(
        max_connections=args.max_connections,
        header_timeout_s=args.request_header_timeout,
        body_timeout_s=args.request_body_timeout,
        max_connections_per_address=args.max_connections_per_address,
        front_proxy_connections=args.front_proxy_connections,
    )
    rules = rules_setup(args.prometheus_adapter_config, args.metrics_relist_interval, args.metrics_max_age)
    make_server(
        settings,
        host=host,
        port=port,
        security=security,
        log_level=args.log_level,
        limits=limits,
        prometheus_adapter=rules,
    ).run()
    return 0
