"""``serve``: run the adapter."""

from __future__ import annotations

import argparse
import os

from adapter.errors import ConfigError
from adapter.settings import Settings, load_catalog


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="serve custom.metrics.k8s.io from Prometheus or VictoriaMetrics")
    p.add_argument("--prometheus-url", required=True, help="base URL of Prometheus or VictoriaMetrics")
    p.add_argument("--backend", choices=["prometheus", "victoriametrics"], default="prometheus",
                   help="what answers at --prometheus-url (VictoriaMetrics gets nocache=1)")
    p.add_argument("--bind", default="0.0.0.0:6443", help="HOST:PORT to listen on (default 0.0.0.0:6443)")
    p.add_argument("--insecure-plain-http", action="store_true",
                   help="serve plain HTTP without authentication: local use only")
    p.add_argument("--config", default=None, help="metric catalog YAML (default: the embedded catalog)")
    p.add_argument("--pod-source", choices=["auto", "kubernetes", "prometheus"], default="auto",
                   help="where pods behind a selector come from: the Kubernetes API, or kube-state-metrics "
                        "series (auto: kubernetes when in a cluster or a kubeconfig exists)")
    p.add_argument("--kubeconfig", default=None)
    p.add_argument("--query-timeout", type=float, default=5.0, help="seconds per backend query (default 5)")
    p.set_defaults(func=run)


def _pod_source(choice: str, kubeconfig: str | None) -> str:
    if choice != "auto":
        return choice
    if os.environ.get("KUBERNETES_SERVICE_HOST") or kubeconfig or os.environ.get("KUBECONFIG") \
            or os.path.exists(os.path.expanduser("~/.kube/config")):
        return "kubernetes"
    return "prometheus"


def parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise ConfigError(f"--bind {bind!r}: expected HOST:PORT")
    return host.strip("[]") or "0.0.0.0", int(port)


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from adapter.app import create_app

    if not args.insecure_plain_http:
        raise ConfigError("TLS serving is not built yet in this version: pass --insecure-plain-http "
                          "(plain HTTP, no authentication; for local use only)")
    host, port = parse_bind(args.bind)
    settings = Settings(prometheus_url=args.prometheus_url, backend=args.backend,
                        catalog=load_catalog(args.config),
                        pod_source=_pod_source(args.pod_source, args.kubeconfig),  # type: ignore[arg-type]
                        kubeconfig=args.kubeconfig, query_timeout_s=args.query_timeout)
    uvicorn.run(create_app(settings), host=host, port=port, log_level=args.log_level, access_log=False)
    return 0
