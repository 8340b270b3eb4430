"""``certs``: make the CA and serving certificate an aggregated API server needs, and the APIService caBundle.

stdout gets exactly one line, the base64 ``caBundle`` (so ``$(llm-hpa-adapter certs ...)`` captures it); what
was written goes to stderr. Running it again with the same Service keeps valid certificates (the registered
caBundle stays valid); certificates that do not fit are never overwritten without ``--force``.
"""

from __future__ import annotations

import argparse
import sys

from adapter.certs import (
    DEFAULT_CLIENT_GROUPS,
    DEFAULT_CLIENT_USER,
    DEFAULT_DAYS,
    BundleExistsError,
    write_bundle,
)
from adapter.errors import ConfigError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``certs`` command to the top-level parser."""
    p = sub.add_parser(
        "certs",
        help="make a CA, a serving certificate and the APIService caBundle",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument("--out", default="certs", help="directory to write into (default: certs)")
    p.add_argument(
        "--service", required=True, help="the adapter's Service name (apiservice-manifests/: llm-hpa-adapter)"
    )
    p.add_argument(
        "--namespace", required=True, help="the adapter's namespace (apiservice-manifests/: llm-hpa-adapter)"
    )
    p.add_argument(
        "--days", type=int, default=DEFAULT_DAYS, help=f"validity of new certificates in days (default: {DEFAULT_DAYS})"
    )
    p.add_argument(
        "--front-proxy",
        action="store_true",
        help="also a separate request-header CA with a 'front-proxy-client' client certificate, "
        "and a plain client certificate for kubectl (local use and tests)",
    )
    p.add_argument(
        "--client-user",
        default=DEFAULT_CLIENT_USER,
        help=f"CN of the plain client certificate (default: {DEFAULT_CLIENT_USER})",
    )
    p.add_argument(
        "--client-group",
        action="append",
        default=None,
        metavar="GROUP",
        help=f"O of the plain client certificate, repeatable (default: {', '.join(DEFAULT_CLIENT_GROUPS)})",
    )
    p.add_argument("--force", action="store_true", help="replace certificates already in --out")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the bundle; print the caBundle on stdout. Bad input or a refused overwrite: ``ConfigError``."""
    groups = tuple(args.client_group) if args.client_group is not None else DEFAULT_CLIENT_GROUPS
    try:
        bundle = write_bundle(
            args.out,
            args.service,
            args.namespace,
            days=args.days,
            front_proxy=args.front_proxy,
            force=args.force,
            client_user=args.client_user,
            client_groups=groups,
        )
    except (ValueError, BundleExistsError) as exc:
        raise ConfigError(str(exc)) from None
    except OSError as exc:
        raise ConfigError(f"cannot write {args.out}: {exc.strerror or exc}") from None
    verb = "wrote" if bundle.created else "kept existing (valid, same Service; --force replaces)"
    print(f"{verb} in {bundle.out}/: {' '.join(p.name for p in bundle.files)}", file=sys.stderr)
    print(f"serving names: {args.service}.{args.namespace}.svc and variants, localhost, 127.0.0.1", file=sys.stderr)
    print(bundle.ca_bundle)
    return 0
