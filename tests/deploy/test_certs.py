"""adapter.certs and the ``certs`` command: the certificates verify the way Go, OpenSSL and rustls verify them.

Two independent verifiers check every certificate: cryptography's X.509 path validation (``PolicyBuilder``,
with RFC 5280 / CA/B rules on extensions, SANs and extended key usage), and real TLS handshakes over loopback
with Python's ``ssl`` (OpenSSL), including the front-proxy mutual-TLS case.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
import socket
import ssl
import stat
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509 import verification as xv
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from adapter.__main__ import main
from adapter.certs import (
    FRONT_PROXY_CN,
    BundleExistsError,
    KeyPair,
    bundle_files,
    ca_bundle_b64,
    load_pair,
    make_ca,
    make_client_cert,
    make_serving_cert,
    serving_dns_names,
    write_bundle,
)

SVC, NS = "llm-hpa-adapter", "llm-hpa-adapter"
SVC_DNS = f"{SVC}.{NS}.svc"  # what kube-aggregator puts in TLS ServerName


def _verify_server(
    ca: KeyPair, leaf: KeyPair, name: x509.DNSName | x509.IPAddress, at: dt.datetime | None = None
) -> None:
    builder = xv.PolicyBuilder().store(xv.Store([ca.cert]))
    if at is not None:
        builder = builder.time(at)
    builder.build_server_verifier(name).verify(leaf.cert, [])


def _verify_client(ca: KeyPair, leaf: KeyPair) -> None:
    # The Web PKI profile wants a SAN on client certificates too; Kubernetes does not (it reads CN and O,
    # and kubeadm's front-proxy-client has no SAN), so only that one requirement is relaxed.
    ee = xv.ExtensionPolicy.webpki_defaults_ee().may_be_present(
        x509.SubjectAlternativeName, xv.Criticality.AGNOSTIC, None
    )
    (
        xv.PolicyBuilder()
        .store(xv.Store([ca.cert]))
        .extension_policies(ca_policy=xv.ExtensionPolicy.webpki_defaults_ca(), ee_policy=ee)
        .build_client_verifier()
        .verify(leaf.cert, [])
    )


def _cn(cert: x509.Certificate) -> str:
    return str(cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value)


# --- make_ca / make_serving_cert / make_client_cert ------------------------------------------------------


def test_ca_is_a_ca_for_end_entities_only() -> None:
    ca = make_ca(days=30)
    basic = ca.cert.extensions.get_extension_for_class(x509.BasicConstraints)
    assert basic.critical and basic.value.ca and basic.value.path_length == 0
    usage = ca.cert.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign and usage.crl_sign
    ca.cert.verify_directly_issued_by(ca.cert)  # self-signed
    assert ca.cert.not_valid_after_utc - ca.cert.not_valid_before_utc == dt.timedelta(days=30, minutes=5)


def test_serving_cert_chain_sans_and_usage() -> None:
    ca = make_ca()
    serving = make_serving_cert(ca, SVC, NS)
    serving.cert.verify_directly_issued_by(ca.cert)
    san = serving.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert san.get_values_for_type(x509.DNSName) == [
        SVC,
        f"{SVC}.{NS}",
        f"{SVC}.{NS}.svc",
        f"{SVC}.{NS}.svc.cluster.local",
        "localhost",
    ]
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    eku = serving.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not serving.cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    # Every name a client may dial verifies; another Service's name does not.
    for name in [*serving_dns_names(SVC, NS)]:
        _verify_server(ca, serving, x509.DNSName(name))
    _verify_server(ca, serving, x509.IPAddress(ipaddress.ip_address("127.0.0.1")))
    with pytest.raises(xv.VerificationError):
        _verify_server(ca, serving, x509.DNSName(f"other.{NS}.svc"))
    # A serving certificate is no client certificate.
    with pytest.raises(xv.VerificationError):
        _verify_client(ca, serving)


def test_serving_cert_extra_names() -> None:
    ca = make_ca()
    serving = make_serving_cert(ca, SVC, NS, extra_dns=["adapter.example.test"], extra_ips=["10.0.0.7"])
    san = serving.cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    # The extra names come after the Service's own, which stay.
    assert san.get_values_for_type(x509.DNSName) == [*serving_dns_names(SVC, NS), "adapter.example.test"]
    assert [str(i) for i in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1", "10.0.0.7"]
    _verify_server(ca, serving, x509.DNSName("adapter.example.test"))  # raises VerificationError if not
    _verify_server(ca, serving, x509.IPAddress(ipaddress.ip_address("10.0.0.7")))


def test_validity_window() -> None:
    start = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    ca = make_ca(days=10, now=start)
    serving = make_serving_cert(ca, SVC, NS, days=3, now=start)
    assert serving.cert.not_valid_before_utc <= start < serving.cert.not_valid_after_utc
    assert serving.cert.not_valid_after_utc == start + dt.timedelta(days=3)
    _verify_server(ca, serving, x509.DNSName(SVC_DNS), at=start + dt.timedelta(days=2))
    with pytest.raises(xv.VerificationError):
        _verify_server(ca, serving, x509.DNSName(SVC_DNS), at=start + dt.timedelta(days=4))
    with pytest.raises(xv.VerificationError):
        _verify_server(ca, serving, x509.DNSName(SVC_DNS), at=start - dt.timedelta(days=1))
    # A leaf never outlives its CA.
    long = make_serving_cert(ca, SVC, NS, days=100, now=start)
    assert long.cert.not_valid_after_utc == ca.cert.not_valid_after_utc


def test_client_cert_identity_and_usage() -> None:
    ca = make_ca()
    client = make_client_cert(ca, "alice", organizations=["team-a", "system:masters"])
    _verify_client(ca, client)
    assert _cn(client.cert) == "alice"
    orgs = [a.value for a in client.cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == ["team-a", "system:masters"]
    eku = client.cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(eku) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(xv.VerificationError):  # signed by another CA
        _verify_client(make_ca(), client)


@pytest.mark.parametrize(
    ("service", "namespace"),
    [("Bad_Name", NS), ("1starts-with-digit", NS), (SVC, "has.dot"), ("", NS), ("a" * 64, NS), (SVC, "-x")],
)
def test_invalid_names_are_refused(service: str, namespace: str) -> None:
    with pytest.raises(ValueError):
        make_serving_cert(make_ca(), service, namespace)


def test_days_must_be_positive() -> None:
    with pytest.raises(ValueError):
        make_ca(days=0)


def test_load_pair_round_trip_and_mismatch(tmp_path: Path) -> None:
    ca, other = make_ca(), make_ca()
    (tmp_path / "ca.crt").write_bytes(ca.cert_pem())
    (tmp_path / "ca.key").write_bytes(ca.key_pem())
    (tmp_path / "other.key").write_bytes(other.key_pem())
    loaded = load_pair(tmp_path / "ca.crt", tmp_path / "ca.key")
    assert loaded.cert == ca.cert and loaded.key_pem() == ca.key_pem()
    with pytest.raises(ValueError):
        load_pair(tmp_path / "ca.crt", tmp_path / "other.key")


# --- real TLS handshakes (OpenSSL through Python's ssl) -----------------------------------------------------


def _handshake(server: ssl.SSLContext, client: ssl.SSLContext, hostname: str) -> dict[str, Any]:
    """One TLS connection over loopback; returns the server's view (peer cert or error) and the client's."""
    out: dict[str, Any] = {}
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.settimeout(30)
        port = listener.getsockname()[1]

        def serve() -> None:
            try:
                conn, _ = listener.accept()
                with server.wrap_socket(conn, server_side=True) as tls:
                    out["peer"] = tls.getpeercert()
                    tls.sendall(b"ok")
            except (ssl.SSLError, OSError) as exc:
                out["server_error"] = exc

        thread = threading.Thread(target=serve)
        thread.start()
        try:
            with (
                socket.create_connection(("127.0.0.1", port), timeout=30) as raw,
                client.wrap_socket(raw, server_hostname=hostname) as tls,
            ):
                out["reply"] = tls.recv(2)  # with TLS 1.3 a refused client cert surfaces here
        except (ssl.SSLError, OSError) as exc:
            out["client_error"] = exc
        thread.join(30)
    return out


def _server_ctx(bundle: Path, client_ca: Path | None) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(bundle / "tls.crt", bundle / "tls.key")
    if client_ca is not None:
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(client_ca)
    return ctx


def _client_ctx(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(cert, key)
    return ctx


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bundle") / "certs"
    write_bundle(out, SVC, NS, front_proxy=True)
    return out


@pytest.mark.parametrize("hostname", [SVC_DNS, f"{SVC_DNS}.cluster.local", "localhost", "127.0.0.1"])
def test_tls_handshake_verifies_the_service_names(bundle: Path, hostname: str) -> None:
    result = _handshake(_server_ctx(bundle, None), _client_ctx(bundle / "ca.crt"), hostname)
    assert result.get("reply") == b"ok", result


def test_tls_handshake_rejects_a_wrong_name_or_ca(bundle: Path, tmp_path: Path) -> None:
    result = _handshake(_server_ctx(bundle, None), _client_ctx(bundle / "ca.crt"), "other.default.svc")
    assert isinstance(result.get("client_error"), ssl.SSLCertVerificationError)
    (tmp_path / "stranger.crt").write_bytes(make_ca().cert_pem())
    result = _handshake(_server_ctx(bundle, None), _client_ctx(tmp_path / "stranger.crt"), SVC_DNS)
    assert isinstance(result.get("client_error"), ssl.SSLCertVerificationError)


def test_front_proxy_mutual_tls(bundle: Path) -> None:
    # What kube-aggregator does: verify our serving cert with the caBundle, present its front-proxy client
    # certificate, which we verify with the request-header CA.
    client = _client_ctx(bundle / "ca.crt", bundle / "front-proxy-client.crt", bundle / "front-proxy-client.key")
    result = _handshake(_server_ctx(bundle, bundle / "front-proxy-ca.crt"), client, SVC_DNS)
    assert result.get("reply") == b"ok", result
    subject = dict(item for rdn in result["peer"]["subject"] for item in rdn)
    assert subject["commonName"] == FRONT_PROXY_CN


def test_request_header_ca_does_not_trust_other_client_certs(bundle: Path) -> None:
    # client.crt is signed by the serving CA, not the request-header CA: no front-proxy trust for it.
    client = _client_ctx(bundle / "ca.crt", bundle / "client.crt", bundle / "client.key")
    result = _handshake(_server_ctx(bundle, bundle / "front-proxy-ca.crt"), client, SVC_DNS)
    assert "reply" not in result and "peer" not in result
    assert isinstance(result.get("server_error"), ssl.SSLError)


def test_plain_client_cert_for_kubectl(bundle: Path) -> None:
    client = _client_ctx(bundle / "ca.crt", bundle / "client.crt", bundle / "client.key")
    result = _handshake(_server_ctx(bundle, bundle / "ca.crt"), client, "127.0.0.1")
    assert result.get("reply") == b"ok", result
    subject = [item for rdn in result["peer"]["subject"] for item in rdn]
    assert ("commonName", "local-admin") in subject and ("organizationName", "system:masters") in subject


def test_serving_cert_is_refused_as_client_cert(bundle: Path) -> None:
    # OpenSSL checks the extended key usage: serverAuth only is no client certificate.
    client = _client_ctx(bundle / "ca.crt", bundle / "tls.crt", bundle / "tls.key")
    result = _handshake(_server_ctx(bundle, bundle / "ca.crt"), client, SVC_DNS)
    assert "peer" not in result and isinstance(result.get("server_error"), ssl.SSLError)


# --- write_bundle: files, modes, idempotence, refusal --------------------------------------------------------


def _snapshot(out: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(out.iterdir())}


def test_bundle_files_and_modes(bundle: Path) -> None:
    assert sorted(p.name for p in bundle.iterdir()) == sorted(bundle_files(True))
    for path in bundle.iterdir():
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o600 if path.suffix == ".key" else 0o644), path.name
    ca = load_pair(bundle / "ca.crt", bundle / "ca.key")
    fp_ca = load_pair(bundle / "front-proxy-ca.crt", bundle / "front-proxy-ca.key")
    assert ca.cert != fp_ca.cert and ca.cert.subject != fp_ca.cert.subject  # two separate CAs
    load_pair(bundle / "tls.crt", bundle / "tls.key").cert.verify_directly_issued_by(ca.cert)
    fp_client = load_pair(bundle / "front-proxy-client.crt", bundle / "front-proxy-client.key")
    fp_client.cert.verify_directly_issued_by(fp_ca.cert)
    assert _cn(fp_client.cert) == "front-proxy-client"
    load_pair(bundle / "client.crt", bundle / "client.key").cert.verify_directly_issued_by(ca.cert)


def test_ca_bundle_is_base64_of_the_ca_pem(bundle: Path) -> None:
    text = (bundle / "ca-bundle.b64").read_text()
    assert text.endswith("\n") and "\n" not in text[:-1]
    assert base64.b64decode(text.strip(), validate=True) == (bundle / "ca.crt").read_bytes()
    assert ca_bundle_b64(x509.load_pem_x509_certificate((bundle / "ca.crt").read_bytes())) == text.strip()


def test_second_run_keeps_valid_certificates(tmp_path: Path) -> None:
    first = write_bundle(tmp_path, SVC, NS)
    before = _snapshot(tmp_path)
    again = write_bundle(tmp_path, SVC, NS)
    assert first.created and not again.created
    assert again.ca_bundle == first.ca_bundle
    assert _snapshot(tmp_path) == before
    assert sorted(before) == sorted(bundle_files(False))


@pytest.mark.parametrize(
    "change", ["other-service", "missing-key", "expired", "front-proxy-added", "foreign-key", "stale-ca-bundle"]
)
def test_refuses_to_overwrite_what_does_not_fit(tmp_path: Path, change: str) -> None:
    write_bundle(tmp_path, SVC, NS)
    kwargs: dict[str, Any] = {}
    service = SVC
    if change == "other-service":
        service = "other"
    elif change == "missing-key":
        (tmp_path / "tls.key").unlink()
    elif change == "expired":
        kwargs["now"] = dt.datetime.now(dt.UTC) + dt.timedelta(days=400)
    elif change == "front-proxy-added":
        kwargs["front_proxy"] = True
    elif change == "foreign-key":
        (tmp_path / "tls.key").write_bytes(make_ca().key_pem())
    elif change == "stale-ca-bundle":
        (tmp_path / "ca-bundle.b64").write_text(ca_bundle_b64(make_ca().cert) + "\n")
    before = _snapshot(tmp_path)
    with pytest.raises(BundleExistsError, match="--force"):
        write_bundle(tmp_path, service, NS, **kwargs)
    assert _snapshot(tmp_path) == before  # nothing touched
    forced = write_bundle(tmp_path, service, NS, force=True, **kwargs)
    assert forced.created
    assert (tmp_path / "ca.crt").read_bytes() != before["ca.crt"]  # a new CA
    # ... and what --force wrote is what the same request keeps next time.
    assert not write_bundle(tmp_path, service, NS, **kwargs).created


def test_a_single_foreign_file_blocks_writing(tmp_path: Path) -> None:
    (tmp_path / "tls.crt").write_text("someone else's certificate")
    with pytest.raises(BundleExistsError):
        write_bundle(tmp_path, SVC, NS)
    assert (tmp_path / "tls.crt").read_text() == "someone else's certificate"


def test_force_without_front_proxy_removes_stale_front_proxy_files(tmp_path: Path) -> None:
    write_bundle(tmp_path, SVC, NS, front_proxy=True)
    write_bundle(tmp_path, SVC, NS, force=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(bundle_files(False))


def test_no_temporary_files_left(tmp_path: Path) -> None:
    write_bundle(tmp_path, SVC, NS, front_proxy=True)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


# --- the command ------------------------------------------------------------------------------------------


def test_cli_prints_only_the_ca_bundle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "certs"
    assert main(["certs", "--out", str(out), "--service", SVC, "--namespace", NS, "--days", "7", "--front-proxy"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (out / "ca-bundle.b64").read_text()
    assert "wrote" in captured.err
    assert sorted(p.name for p in out.iterdir()) == sorted(bundle_files(True))
    serving = x509.load_pem_x509_certificate((out / "tls.crt").read_bytes())
    assert serving.not_valid_after_utc - serving.not_valid_before_utc == dt.timedelta(days=7, minutes=5)
    # Same request again: kept, same caBundle, exit 0.
    assert main(["certs", "--out", str(out), "--service", SVC, "--namespace", NS, "--front-proxy"]) == 0
    again = capsys.readouterr()
    assert again.out == captured.out and "kept" in again.err


def test_cli_refuses_then_forces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "--out", str(tmp_path), "--service", SVC, "--namespace", NS]) == 0
    first = capsys.readouterr().out
    assert main(["certs", "--out", str(tmp_path), "--service", "other", "--namespace", NS]) == 2
    refused = capsys.readouterr()
    assert refused.out == "" and "--force" in refused.err and "Traceback" not in refused.err
    assert main(["certs", "--out", str(tmp_path), "--service", "other", "--namespace", NS, "--force"]) == 0
    assert capsys.readouterr().out != first


def test_cli_bad_input_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["certs", "--out", str(tmp_path), "--service", "Bad_Name", "--namespace", NS]) == 2
    assert "DNS-1035" in capsys.readouterr().err
    assert main(["certs", "--out", str(tmp_path), "--service", SVC, "--namespace", NS, "--days", "0"]) == 2
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["certs", "--out", str(blocker / "sub"), "--service", SVC, "--namespace", NS]) == 2


def test_python_dash_m_adapter_certs(tmp_path: Path) -> None:
    # The documented invocation, in a fresh interpreter.
    proc = subprocess.run(
        [sys.executable, "-m", "adapter", "certs", "--out", str(tmp_path / "c"), "--service", SVC, "--namespace", NS],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == (tmp_path / "c" / "ca-bundle.b64").read_text().strip()


def test_foreign_certificate_without_san_is_refused(tmp_path: Path) -> None:
    write_bundle(tmp_path, SVC, NS)
    ca = load_pair(tmp_path / "ca.crt", tmp_path / "ca.key")
    no_san = make_client_cert(ca, "not-a-server")  # signed by the same CA, but no subjectAltName
    (tmp_path / "tls.crt").write_bytes(no_san.cert_pem())
    (tmp_path / "tls.key").write_bytes(no_san.key_pem())
    with pytest.raises(BundleExistsError, match="subjectAltName"):
        write_bundle(tmp_path, SVC, NS)
