"""Authentication: front-proxy request headers, x509 client certificates, bearer tokens (TokenReview).

The order follows kubernetes/apiserver ``pkg/authentication/authenticatorfactory/delegating.go``: request
headers (trusted only from a client certificate issued by the request-header CA whose CN is allowed),
then x509 client certificates (user = CN, groups = O), then bearer tokens through a TokenReview cached for
10 s. Every authenticated user gets ``system:authenticated``.

The TLS layer has already verified the presented chain against the union of trusted CAs (ssl
CERT_OPTIONAL); here we check which CA issued the leaf, so a certificate from the client CA can never
vouch for ``X-Remote-*`` headers, and the CA files' current content decides (they are reloaded on change).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from urllib.parse import unquote

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from adapter.auth.user import UserInfo
from adapter.ttlcache import TtlCache

# (token) -> user or None; the Kubernetes-backed implementation lives in kubeapi.py.
TokenReviewer = Callable[[str], Awaitable[UserInfo | None]]


class AuthenticationError(Exception):
    """The request presented credentials that are invalid (→ 401)."""


@dataclass
class RequestHeaderConfig:
    """What kube-apiserver publishes in ``kube-system/extension-apiserver-authentication``."""

    client_cas: list[x509.Certificate]
    allowed_names: tuple[str, ...] = ()
    username_headers: tuple[str, ...] = ("X-Remote-User",)
    uid_headers: tuple[str, ...] = ("X-Remote-Uid",)
    group_headers: tuple[str, ...] = ("X-Remote-Group",)
    extra_prefixes: tuple[str, ...] = ("X-Remote-Extra-",)


def load_pem_certs(data: bytes) -> list[x509.Certificate]:
    return list(x509.load_pem_x509_certificates(data)) if data.strip() else []


def _issued_by(cert: x509.Certificate, cas: Sequence[x509.Certificate]) -> bool:
    for ca in cas:
        try:
            cert.verify_directly_issued_by(ca)
            return True
        except (ValueError, TypeError, Exception):  # noqa: BLE001 - any mismatch or bad signature: not this CA
            continue
    return False


def _valid_now(cert: x509.Certificate) -> bool:
    now = dt.datetime.now(dt.UTC)
    return cert.not_valid_before_utc <= now <= cert.not_valid_after_utc


def _has_client_auth(cert: x509.Certificate) -> bool:
    try:
        eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    except x509.ExtensionNotFound:
        return True  # no EKU extension: any usage (Go's x509 verification treats it the same way)
    return ExtendedKeyUsageOID.CLIENT_AUTH in eku or ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE in eku


def _cn(cert: x509.Certificate) -> str:
    attrs = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return str(attrs[0].value) if attrs else ""


def _header_values(headers: Sequence[tuple[bytes, bytes]], name: str) -> list[str]:
    key = name.lower().encode("latin-1")
    return [v.decode("latin-1") for k, v in headers if k == key]


@dataclass
class Authenticator:
    """Union authenticator; ``authenticate`` returns the user, None (no credentials), or raises."""

    request_header: RequestHeaderConfig | None = None
    client_cas: list[x509.Certificate] = field(default_factory=list)
    token_reviewer: TokenReviewer | None = None
    token_ttl_s: float = 10.0
    _token_cache: TtlCache[str, UserInfo | None] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._token_cache = TtlCache(lambda _: self.token_ttl_s)

    async def authenticate(self, headers: Sequence[tuple[bytes, bytes]], peer_der: bytes | None) -> UserInfo | None:
        cert = x509.load_der_x509_certificate(peer_der) if peer_der else None
        if cert is not None and self.request_header is not None and _issued_by(cert, self.request_header.client_cas):
            user = self._from_request_headers(cert, headers)
            if user is not None:
                return user.with_authenticated_group()
        if cert is not None and self.client_cas and _issued_by(cert, self.client_cas):
            if not (_valid_now(cert) and _has_client_auth(cert)):
                raise AuthenticationError("client certificate is expired or not for client authentication")
            groups = tuple(str(a.value) for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME))
            return UserInfo(_cn(cert), groups=groups).with_authenticated_group()
        token = self._bearer(headers)
        if token is not None and self.token_reviewer is not None:
            user = await self._review(token)
            if user is None:
                raise AuthenticationError("invalid bearer token")
            return user.with_authenticated_group()
        return None

    def is_front_proxy(self, peer_der: bytes) -> bool:
        """True when ``peer_der`` is a certificate that may vouch for ``X-Remote-*`` headers: issued by the
        request-header CA, valid now, for client authentication, with an allowed CN. The connection layer
        gives such connections their own pool (``adapter/connection.py``); the request still authenticates."""
        cfg = self.request_header
        if cfg is None:
            return False
        try:
            cert = x509.load_der_x509_certificate(peer_der)
        except ValueError:
            return False
        if not _issued_by(cert, cfg.client_cas) or not (_valid_now(cert) and _has_client_auth(cert)):
            return False
        return not cfg.allowed_names or _cn(cert) in cfg.allowed_names

    def _from_request_headers(self, cert: x509.Certificate, headers: Sequence[tuple[bytes, bytes]]) -> UserInfo | None:
        cfg = self.request_header
        assert cfg is not None
        name = next((v for h in cfg.username_headers for v in _header_values(headers, h) if v), "")
        if not name:
            return None  # this authenticator does not apply (requestheader.go)
        if not (_valid_now(cert) and _has_client_auth(cert)):
            raise AuthenticationError("front-proxy client certificate is expired or not for client authentication")
        if cfg.allowed_names and _cn(cert) not in cfg.allowed_names:
            raise AuthenticationError(f"front-proxy client certificate CN {_cn(cert)!r} is not allowed")
        uid = next((v for h in cfg.uid_headers for v in _header_values(headers, h) if v), "")
        groups = tuple(v for h in cfg.group_headers for v in _header_values(headers, h))
        extra: dict[str, tuple[str, ...]] = {}
        for key, value in headers:
            hname = key.decode("latin-1")
            for prefix in cfg.extra_prefixes:
                if hname.lower().startswith(prefix.lower()):
                    extra_key = unquote(hname[len(prefix) :].lower())
                    extra[extra_key] = (*extra.get(extra_key, ()), value.decode("latin-1"))
        return UserInfo(name, uid, groups, extra, front_proxied=True)

    @staticmethod
    def _bearer(headers: Sequence[tuple[bytes, bytes]]) -> str | None:
        for value in _header_values(headers, "authorization"):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
        return None

    async def _review(self, token: str) -> UserInfo | None:
        """Cached 10 s whether accepted or rejected, and one review per token at a time: concurrent requests
        with the same token share the review in flight (apiserver ``cached_token_authenticator.go`` caches
        both outcomes and deduplicates with singleflight). A failed review (UpstreamError) is not cached."""
        assert self.token_reviewer is not None
        key = hashlib.sha256(token.encode()).hexdigest()  # never keep raw tokens in memory longer than needed
        reviewer = self.token_reviewer
        return await self._token_cache.get(key, lambda: reviewer(token))
