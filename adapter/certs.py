"""Certificates for running as an aggregated API server: a CA, a serving certificate, client certificates.

kube-aggregator dials ``https://<service>.<namespace>.svc`` and verifies the serving certificate against the
APIService's ``caBundle`` (kube-aggregator ``pkg/controllers/status/remote/remote_available_controller.go``:
``ServerName = <service>.<namespace>.svc``, ``CAData = spec.caBundle``). So the serving certificate carries the
Service's DNS names as SANs (Go ignores the CN since 1.15), plus ``localhost`` / ``127.0.0.1`` for local use.

The front-proxy (request-header) CA is a *separate* CA on purpose: a certificate it signs lets its holder
assert any identity through ``X-Remote-User``, so it must never be the CA that also signs ordinary client or
serving certificates (kubernetes/apiserver ``pkg/authentication/request/headerrequest``).

Keys are ECDSA P-256: accepted by Go's crypto/tls (the aggregator, kubectl) and by OpenSSL, and generated in
microseconds, which keeps tests that make their own PKI cheap.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

DEFAULT_DAYS = 365
FRONT_PROXY_CN = "front-proxy-client"  # what kubeadm names the aggregator's client certificate
DEFAULT_CLIENT_USER = "local-admin"
DEFAULT_CLIENT_GROUPS = ("system:masters",)  # delegated authorization lets system:masters through unasked

# Backdate notBefore a little: a freshly made certificate must already be valid on a node whose clock lags.
_CLOCK_SKEW = dt.timedelta(minutes=5)
# A DNS-1035 label (Service names) and a DNS-1123 label (namespaces): k8s.io/apimachinery validation.go.
_DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        """The certificate, PEM-encoded."""
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        """The private key, unencrypted PKCS#8 PEM (what Go's ``tls.LoadX509KeyPair`` and ``ssl`` read)."""
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )


def serving_dns_names(service: str, namespace: str) -> list[str]:
    """The DNS SANs a serving certificate for ``service`` in ``namespace`` needs, local names last.

    Raises ``ValueError`` if ``service`` is not a DNS-1035 label or ``namespace`` not a DNS-1123 label
    (the names Kubernetes itself would accept).
    """
    if len(service) > 63 or not _DNS1035.fullmatch(service):
        raise ValueError(f"service name {service!r} is not a valid Kubernetes Service name (DNS-1035 label)")
    if len(namespace) > 63 or not _DNS1123.fullmatch(namespace):
        raise ValueError(f"namespace {namespace!r} is not a valid Kubernetes namespace (DNS-1123 label)")
    svc = f"{service}.{namespace}.svc"
    return [service, f"{service}.{namespace}", svc, f"{svc}.cluster.local", "localhost"]


def ca_bundle_b64(*certs: x509.Certificate) -> str:
    """``APIService.spec.caBundle``: base64 of the PEM of ``certs`` (one line, no newline)."""
    pem = b"".join(c.public_bytes(serialization.Encoding.PEM) for c in certs)
    return base64.b64encode(pem).decode("ascii")


def _now(now: dt.datetime | None) -> dt.datetime:
    return (now or dt.datetime.now(dt.UTC)).astimezone(dt.UTC)


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*attrs, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _check_days(days: int) -> None:
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")


def make_ca(
    common_name: str = "llm-hpa-adapter-ca", *, days: int = DEFAULT_DAYS, now: dt.datetime | None = None
) -> KeyPair:
    """A self-signed CA valid for ``days`` days from ``now`` (default: the current time).

    It can sign end-entity certificates only (``pathLength = 0``) and nothing but certificates and CRLs.
    """
    _check_days(days)
    start = _now(now)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _CLOCK_SKEW)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(signs_certificates=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert, key)


def _key_usage(*, signs_certificates: bool) -> x509.KeyUsage:
    """Digital signatures always (ECDSA); certificate and CRL signing only for a CA."""
    return x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=signs_certificates,
        crl_sign=signs_certificates,
        encipher_only=False,
        decipher_only=False,
    )


def _leaf(
    ca: KeyPair,
    subject: x509.Name,
    usage: x509.ObjectIdentifier,
    days: int,
    now: dt.datetime | None,
    san: x509.SubjectAlternativeName | None,
) -> KeyPair:
    _check_days(days)
    start = _now(now)
    # A leaf outliving its CA would be rejected by verifiers anyway; say so in the certificate itself.
    end = min(start + dt.timedelta(days=days), ca.cert.not_valid_after_utc)
    key = ec.generate_private_key(ec.SECP256R1())
    ca_ski = ca.cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - _CLOCK_SKEW)
        .not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(signs_certificates=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False)
    )
    if san is not None:
        builder = builder.add_extension(san, critical=False)
    return KeyPair(builder.sign(ca.key, hashes.SHA256()), key)


def make_serving_cert(
    ca: KeyPair,
    service: str,
    namespace: str,
    *,
    days: int = DEFAULT_DAYS,
    extra_dns: Sequence[str] = (),
    extra_ips: Sequence[str] = (),
    now: dt.datetime | None = None,
) -> KeyPair:
    """A TLS server certificate (``serverAuth``) signed by ``ca`` for the Service ``service.namespace``.

    SANs: ``serving_dns_names(service, namespace)`` + ``extra_dns``, and IPs ``127.0.0.1`` + ``extra_ips``.
    Its subject CN is ``service.namespace.svc``. Validity ends after ``days`` days or with the CA, whichever
    comes first. Raises ``ValueError`` for invalid names or addresses.
    """
    dns = [*serving_dns_names(service, namespace), *(d for d in extra_dns if d)]
    ips = [ipaddress.ip_address("127.0.0.1"), *(ipaddress.ip_address(i) for i in extra_ips)]
    san = x509.SubjectAlternativeName(
        [*(x509.DNSName(d) for d in dict.fromkeys(dns)), *(x509.IPAddress(i) for i in dict.fromkeys(ips))]
    )
    return _leaf(ca, _name(f"{service}.{namespace}.svc"), ExtendedKeyUsageOID.SERVER_AUTH, days, now, san)


def make_client_cert(
    ca: KeyPair,
    common_name: str,
    *,
    organizations: Sequence[str] = (),
    days: int = DEFAULT_DAYS,
    now: dt.datetime | None = None,
) -> KeyPair:
    """A TLS client certificate (``clientAuth``) signed by ``ca``.

    Kubernetes reads a client certificate as user = subject CN, groups = subject O values
    (kubernetes/apiserver ``pkg/authentication/request/x509/x509.go`` ``CommonNameUserConversion``); for a
    front-proxy certificate only the CN matters (``requestheader-allowed-names``).
    """
    if not common_name:
        raise ValueError("a client certificate needs a common name")
    return _leaf(ca, _name(common_name, organizations), ExtendedKeyUsageOID.CLIENT_AUTH, days, now, None)


def load_pair(cert_path: str | os.PathLike[str], key_path: str | os.PathLike[str]) -> KeyPair:
    """Read a PEM certificate and its PEM ECDSA key.

    Raises ``OSError`` (unreadable), ``ValueError`` (not PEM, or not the certificate's key) or ``TypeError``
    (not an ECDSA key).
    """
    cert = x509.load_pem_x509_certificate(Path(cert_path).read_bytes())
    key = serialization.load_pem_private_key(Path(key_path).read_bytes(), password=None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{key_path}: not an ECDSA private key")
    spki = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise ValueError(f"{key_path} is not the key of {cert_path}")
    return KeyPair(cert, key)


# --- the on-disk bundle the `certs` command writes ---------------------------------------------------------

CA_FILES = ("ca.crt", "ca.key")
SERVING_FILES = ("tls.crt", "tls.key")
CA_BUNDLE_FILE = "ca-bundle.b64"
FRONT_PROXY_FILES = ("front-proxy-ca.crt", "front-proxy-ca.key", "front-proxy-client.crt", "front-proxy-client.key")
CLIENT_FILES = ("client.crt", "client.key")


class BundleExistsError(Exception):
    """The output directory already holds certificates that do not fit the request (and ``force`` is off)."""


@dataclass(frozen=True)
class Bundle:
    """What ``write_bundle`` produced (or found and kept): the directory, the files and the ``caBundle``."""

    out: Path
    files: tuple[Path, ...]
    ca_bundle: str
    created: bool  # False: valid certificates for the same request were already there and were kept


def bundle_files(front_proxy: bool) -> tuple[str, ...]:
    """The file names ``write_bundle`` writes, in order."""
    names = (*CA_FILES, *SERVING_FILES, CA_BUNDLE_FILE)
    return (*names, *FRONT_PROXY_FILES, *CLIENT_FILES) if front_proxy else names


def _write(path: Path, data: bytes, mode: int) -> None:
    # Write beside the target and rename: a reader (the server reloading on change) never sees half a file,
    # and a key is never readable by others, not even for an instant.
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _reusable(out: Path, service: str, namespace: str, front_proxy: bool, now: dt.datetime) -> str | None:
    """Why the certificates in ``out`` cannot serve this request, or ``None`` if they can."""
    missing = [n for n in bundle_files(front_proxy) if not (out / n).is_file()]
    if missing:
        return f"incomplete: {', '.join(missing)} missing"
    try:
        ca = load_pair(out / "ca.crt", out / "ca.key")
        serving = load_pair(out / "tls.crt", out / "tls.key")
        pairs = [(ca, serving)]
        if front_proxy:
            pairs.append(
                (
                    load_pair(out / "front-proxy-ca.crt", out / "front-proxy-ca.key"),
                    load_pair(out / "front-proxy-client.crt", out / "front-proxy-client.key"),
                )
            )
            pairs.append((ca, load_pair(out / "client.crt", out / "client.key")))
        for issuer, leaf in pairs:
            leaf.cert.verify_directly_issued_by(issuer.cert)
        have = set(
            serving.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
                x509.DNSName
            )
        )
    except InvalidSignature:
        return "inconsistent: a certificate was not signed by its CA"
    except x509.ExtensionNotFound:
        return "the serving certificate has no subjectAltName"
    except (OSError, ValueError, TypeError) as exc:
        return f"unreadable or inconsistent: {exc}"
    for _, leaf in pairs:
        if leaf.cert.not_valid_after_utc <= now:
            return f"expired: {leaf.cert.subject.rfc4514_string()}"
    want = serving_dns_names(service, namespace)
    if not have.issuperset(want):
        return f"the serving certificate is for other names ({', '.join(sorted(have))})"
    if (out / CA_BUNDLE_FILE).read_text(encoding="ascii").strip() != ca_bundle_b64(ca.cert):
        return f"{CA_BUNDLE_FILE} does not match ca.crt"
    return None


def write_bundle(
    out: str | os.PathLike[str],
    service: str,
    namespace: str,
    *,
    days: int = DEFAULT_DAYS,
    front_proxy: bool = False,
    force: bool = False,
    client_user: str = DEFAULT_CLIENT_USER,
    client_groups: Sequence[str] = DEFAULT_CLIENT_GROUPS,
    now: dt.datetime | None = None,
) -> Bundle:
    """Make a CA and a serving certificate for ``service.namespace`` and write them into ``out``.

    Files (``bundle_files``): ``ca.crt ca.key tls.crt tls.key ca-bundle.b64``; with ``front_proxy`` also a
    separate request-header CA ``front-proxy-ca.*``, its client ``front-proxy-client.*`` (CN
    ``front-proxy-client``) and ``client.*``, a plain client certificate signed by ``ca`` (CN ``client_user``,
    O ``client_groups``) for kubectl. Keys are mode 0600, everything else 0644.

    Idempotent: if ``out`` already holds a complete, valid, consistent bundle covering the same Service
    names, it is kept (``created=False``) so the ``caBundle`` already registered stays valid. Anything else
    already there raises ``BundleExistsError`` unless ``force``, which replaces every file.
    """
    moment = _now(now)
    serving_dns_names(service, namespace)  # validate before touching the disk
    _check_days(days)
    root = Path(out)
    names = bundle_files(front_proxy)
    paths = tuple(root / n for n in names)
    if not force and any(p.exists() for p in (root / n for n in bundle_files(True))):
        why = _reusable(root, service, namespace, front_proxy, moment)
        if why is not None:
            raise BundleExistsError(
                f"{root} already holds certificates that cannot be kept ({why}); pass --force to replace them"
            )
        ca_cert = x509.load_pem_x509_certificate((root / "ca.crt").read_bytes())
        return Bundle(root, paths, ca_bundle_b64(ca_cert), created=False)

    ca = make_ca(f"{service}-ca@{int(moment.timestamp())}", days=days, now=moment)
    serving = make_serving_cert(ca, service, namespace, days=days, now=moment)
    content: dict[str, tuple[bytes, int]] = {
        "ca.crt": (ca.cert_pem(), 0o644),
        "ca.key": (ca.key_pem(), 0o600),
        "tls.crt": (serving.cert_pem(), 0o644),
        "tls.key": (serving.key_pem(), 0o600),
        CA_BUNDLE_FILE: ((ca_bundle_b64(ca.cert) + "\n").encode("ascii"), 0o644),
    }
    if front_proxy:
        fp_ca = make_ca(f"{service}-front-proxy-ca@{int(moment.timestamp())}", days=days, now=moment)
        fp_client = make_client_cert(fp_ca, FRONT_PROXY_CN, days=days, now=moment)
        client = make_client_cert(ca, client_user, organizations=client_groups, days=days, now=moment)
        content |= {
            "front-proxy-ca.crt": (fp_ca.cert_pem(), 0o644),
            "front-proxy-ca.key": (fp_ca.key_pem(), 0o600),
            "front-proxy-client.crt": (fp_client.cert_pem(), 0o644),
            "front-proxy-client.key": (fp_client.key_pem(), 0o600),
            "client.crt": (client.cert_pem(), 0o644),
            "client.key": (client.key_pem(), 0o600),
        }
    root.mkdir(parents=True, exist_ok=True)
    # Serving files are written after the CA: a server watching the directory reloads onto a chain that
    # verifies. The caBundle is last, so a script that waits for it sees a complete bundle.
    for name in names:
        data, mode = content[name]
        _write(root / name, data, mode)
    if force and not front_proxy:
        # Stale front-proxy files from an earlier run would no longer match the new CA: remove them.
        for name in (*FRONT_PROXY_FILES, *CLIENT_FILES):
            (root / name).unlink(missing_ok=True)
    return Bundle(root, paths, ca_bundle_b64(ca.cert), created=True)
