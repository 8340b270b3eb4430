"""``load_pair`` and ``CertReloader``: a serving pair replaces the live one only when certificate and key match."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path

import pytest
from cryptography import x509

from adapter.auth.tls import CertReloader, TLSFiles, build_context, load_pair
from adapter.certs import make_ca, make_serving_cert


def served_serial(ctx: ssl.SSLContext, ca_pem: bytes) -> int:
    """Handshake with ``ctx`` on a socket pair; the serial of the certificate the server side presented."""
    server_sock, client_sock = socket.socketpair()
    client_ctx = ssl.create_default_context(cadata=ca_pem.decode())
    client_ctx.check_hostname = False
    errors: list[BaseException] = []

    def serve() -> None:
        try:
            with ctx.wrap_socket(server_sock, server_side=True):
                pass
        except (ssl.SSLError, OSError) as exc:
            errors.append(exc)

    t = threading.Thread(target=serve)
    t.start()
    try:
        with client_ctx.wrap_socket(client_sock) as tls:
            der = tls.getpeercert(binary_form=True)
    finally:
        t.join(10)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def test_certificate_without_its_key_changes_nothing(tmp_path: Path) -> None:
    ca = make_ca("ca")
    old, new = make_serving_cert(ca, "svc", "ns"), make_serving_cert(ca, "svc", "ns")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(old.cert_pem())
    key.write_bytes(old.key_pem())
    ctx = build_context(TLSFiles(str(cert), str(key)))
    reloader = CertReloader(ctx, TLSFiles(str(cert), str(key)))
    assert served_serial(ctx, ca.cert_pem()) == old.cert.serial_number

    cert.write_bytes(new.cert_pem())  # the certificate first
    with pytest.raises(ssl.SSLError):
        load_pair(ctx, str(cert), str(key))
    assert reloader.check() is False
    assert served_serial(ctx, ca.cert_pem()) == old.cert.serial_number  # the last good pair still serves

    key.write_bytes(new.key_pem())  # then the key
    assert reloader.check() is True
    assert served_serial(ctx, ca.cert_pem()) == new.cert.serial_number
    assert reloader.check() is False  # nothing changed since


def test_half_written_key_changes_nothing(tmp_path: Path) -> None:
    ca = make_ca("ca")
    pair = make_serving_cert(ca, "svc", "ns")
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    cert.write_bytes(pair.cert_pem())
    key.write_bytes(pair.key_pem())
    ctx = build_context(TLSFiles(str(cert), str(key)))
    reloader = CertReloader(ctx, TLSFiles(str(cert), str(key)))
    key.write_bytes(pair.key_pem()[:40])
    assert reloader.check() is False
    assert served_serial(ctx, ca.cert_pem()) == pair.cert.serial_number
