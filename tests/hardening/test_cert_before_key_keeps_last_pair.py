"""A rotation that writes the certificate before its key left no usable TLS certificate.

Against the real adapter process: the new certificate lands while the old key is still in place (what a
non-atomic secret update or a careless script does). The adapter must keep serving the last good pair
through its reload polls, and switch to the new pair once the key arrives.
"""

from __future__ import annotations

import re
import socket
import time
from pathlib import Path

from cryptography import x509

from adapter.certs import make_serving_cert
from tests.hardening.conftest import PKI, SecureAdapter, write_pair


def served_serial(adapter: SecureAdapter) -> int:
    with (
        socket.create_connection(("127.0.0.1", adapter.port), timeout=10) as raw,
        adapter.pki.context().wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
        assert der is not None
        return x509.load_der_x509_certificate(der).serial_number


def wait_for(predicate, what: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_certificate_before_key_keeps_the_last_good_pair(pki: PKI, prometheus, tmp_path: Path) -> None:
    # A serving pair of this test's own, so rotating it leaves the module's PKI alone.
    cert_file, key_file = write_pair(make_serving_cert(pki.ca, "llm-hpa-adapter", "custom-metrics"), tmp_path, "own")
    own = PKI(pki.dir, pki.ca, pki.fp_ca, (cert_file, key_file), pki.admin, pki.front_proxy)
    adapter = SecureAdapter(own, prometheus.url, tmp_path, ["--no-kubernetes-auth"]).start()
    try:
        before = served_serial(adapter)
        fresh = make_serving_cert(pki.ca, "llm-hpa-adapter", "custom-metrics")
        Path(cert_file).write_bytes(fresh.cert_pem())  # the certificate first, the key not yet
        pattern = re.compile(r"does not load yet|could not be loaded yet")
        wait_for(lambda: pattern.search(adapter.log()) is not None, "the reloader to see the half rotation")
        # The reloader has looked at the mismatched pair: the old pair is still served, and requests work.
        assert served_serial(adapter) == before
        assert adapter.get("/apis/custom.metrics.k8s.io/v1beta2", cert=pki.admin).status_code == 200
        Path(key_file).write_bytes(fresh.key_pem())  # the key arrives
        wait_for(lambda: served_serial(adapter) == fresh.cert.serial_number, "the new pair to be served")
        assert adapter.get("/apis/custom.metrics.k8s.io/v1beta2", cert=pki.admin).status_code == 200
    finally:
        adapter.stop()
