"""Build the security stack from settings: TLS context, authenticator, authorizer, reloader.

Front-proxy settings come from flags/files when given, else from the cluster's
``kube-system/extension-apiserver-authentication`` ConfigMap: read at start-up, then re-read every
``configmap_refresh_s`` (60 s, the period of upstream's dynamic CA content,
kubernetes/apiserver ``pkg/server/dynamiccertificates/dynamic_cafile_content.go`` FileRefreshDuration; upstream
watches the ConfigMap, ``pkg/authentication/request/headerrequest/requestheader_controller.go``), so a rotated
front-proxy CA is trusted without a restart and the old one stops vouching for ``X-Remote-*`` headers.

Without any Kubernetes access (local use) there is no TokenReview and no SubjectAccessReview: only
``system:masters`` (e.g. a local client certificate with O=system:masters) is allowed, and the health paths.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import ssl
from dataclasses import dataclass, field

from cryptography.hazmat.primitives.serialization import Encoding

from adapter.auth.authn import Authenticator, RequestHeaderConfig, load_pem_certs
from adapter.auth.authz import ALWAYS_ALLOW_PATHS, Authorizer
from adapter.auth.kubeapi import KubeAuthAPI, api_client_from
from adapter.auth.tls import CertReloader, TLSFiles, build_context
from adapter.errors import ConfigError, UpstreamError
from adapter.tasks import BackgroundLoop

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SecurityOptions:
    tls: TLSFiles
    allowed_names: tuple[str, ...] | None = None  # None: from the ConfigMap (or any CN with a CA file)
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)
    uid_headers: tuple[str, ...] = ("X-Remote-Uid",)
    kubeconfig: str | None = None  # for TokenReview, SubjectAccessReview, the ConfigMap
    use_cluster: bool = False  # talk to the Kubernetes API (in-cluster or kubeconfig)
    lookup_configmap: bool = True
    always_allow_paths: tuple[str, ...] = ALWAYS_ALLOW_PATHS
    cache_ttl_s: float = 10.0
    configmap_refresh_s: float = 60.0  # re-read the authentication ConfigMap this often
    max_reviews_per_user: int = 4  # a direct (not front-proxied) caller's share of the review lane (authz.py)


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None


@dataclass
class Security:
    options: SecurityOptions
    authenticator: Authenticator = field(init=False)
    authorizer: Authorizer = field(init=False)
    ssl_context: ssl.SSLContext = field(init=False)
    reloader: CertReloader = field(init=False)
    _configmap_rh: RequestHeaderConfig | None = field(init=False, default=None)
    _kube: KubeAuthAPI | None = field(init=False, default=None)
    _configmap_loop: BackgroundLoop | None = field(init=False, default=None)
    configmap_reloads: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        opts = self.options
        for path in opts.tls.paths():
            if not os.path.exists(path):
                raise ConfigError(f"{path} does not exist (make certificates with `python -m adapter certs`)")
        kube = None
        if opts.use_cluster:
            kube = KubeAuthAPI(api_client_from(opts.kubeconfig))
        extra_pem = ""
        self._kube = kube
        if kube is not None and opts.lookup_configmap and opts.tls.requestheader_ca_file is None:
            extra_pem = self._lookup(kube)
            self._configmap_loop = BackgroundLoop(
                "auth-configmap", self._refresh_quietly, opts.configmap_refresh_s, log=log
            )
        try:
            self.ssl_context = build_context(opts.tls, extra_pem)
        except (ssl.SSLError, OSError) as exc:
            raise ConfigError(f"cannot load TLS files: {exc}") from None
        self.authenticator = Authenticator(
            token_reviewer=kube.review_token if kube else None, token_ttl_s=opts.cache_ttl_s
        )
        self.reload_cas()
        self.authorizer = Authorizer(
            kube.review_access if kube else None,
            always_allow_paths=opts.always_allow_paths,
            allowed_ttl_s=opts.cache_ttl_s,
            denied_ttl_s=opts.cache_ttl_s,
            max_reviews_per_user=opts.max_reviews_per_user,
        )
        self.reloader = CertReloader(self.ssl_context, opts.tls, on_ca_change=self.reload_cas)

    def _lookup(self, kube: KubeAuthAPI) -> str:
        try:
            rh, client_cas = asyncio.run(kube.request_header_config())
        except UpstreamError as exc:
            raise ConfigError(f"cannot read kube-system/extension-apiserver-authentication: {exc.message}") from None
        self._configmap_rh = rh
        self._configmap_client_cas = client_cas
        return _pem(rh)

    async def refresh_configmap(self) -> bool:
        """Re-read the authentication ConfigMap; True if its front-proxy settings changed and were applied.

        A new CA is added to the TLS trust store (new handshakes accept its client certificates); the
        authenticator is given the ConfigMap's current settings, so only the current CA vouches for
        ``X-Remote-*`` headers (an old CA's certificate may still complete a handshake, and is then 401).
        A read that fails keeps the last settings (and is logged and counted by the loop)."""
        assert self._kube is not None
        rh, client_cas = await self._kube.request_header_config()
        if rh == self._configmap_rh:
            return False
        pem = _pem(rh)
        if pem:
            self.ssl_context.load_verify_locations(cadata=pem)
            self.ssl_context.verify_mode = ssl.CERT_OPTIONAL
        self._configmap_rh, self._configmap_client_cas = rh, client_cas
        self.reload_cas()
        self.configmap_reloads += 1
        log.info("front-proxy settings changed in kube-system/extension-apiserver-authentication: reloaded")
        return True

    async def _refresh_quietly(self) -> None:
        try:
            await self.refresh_configmap()
        except UpstreamError as exc:
            log.warning(
                "cannot re-read kube-system/extension-apiserver-authentication (keeping the last settings): %s",
                exc.message,
            )

    def start(self) -> None:
        """Start polling the TLS files (and the authentication ConfigMap when it is the source)."""
        self.reloader.start()
        if self._configmap_loop is not None:
            self._configmap_loop.start()

    async def close(self) -> None:
        await self.reloader.close()
        if self._configmap_loop is not None:
            await self._configmap_loop.stop()

    def reload_cas(self) -> None:
        """(Re)read the CA files into the authenticator: the current files decide who is trusted."""
        opts = self.options
        if opts.tls.requestheader_ca_file:
            self.authenticator.request_header = RequestHeaderConfig(
                client_cas=load_pem_certs(_read(opts.tls.requestheader_ca_file)),
                allowed_names=opts.allowed_names or (),
                username_headers=opts.username_headers,
                uid_headers=opts.uid_headers,
                group_headers=opts.group_headers,
                extra_prefixes=opts.extra_prefixes,
            )
        elif self._configmap_rh is not None:
            rh = self._configmap_rh
            if opts.allowed_names is not None:  # a copy: the ConfigMap's own value is compared on refresh
                rh = dataclasses.replace(rh, allowed_names=opts.allowed_names)
            self.authenticator.request_header = rh
        elif self._configmap_loop is not None:
            self.authenticator.request_header = None  # the ConfigMap no longer names a front-proxy CA
        if opts.tls.client_ca_file:
            self.authenticator.client_cas = load_pem_certs(_read(opts.tls.client_ca_file))


def _pem(rh: RequestHeaderConfig | None) -> str:
    return "".join(c.public_bytes(Encoding.PEM).decode() for c in (rh.client_cas if rh else []))
