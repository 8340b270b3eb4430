"""Slowloris. 3,000 connections dripping header bytes were held 50 s and never closed, with no cap.

Against the real adapter process over TLS, with a small cap and head timeout given on the command line (the
defaults are 1,000 connections and 32 s): connections beyond the cap are answered 503 and closed at once,
connections that never finish their request head are answered 408 and closed although they keep dripping,
and afterwards a normal request is served.
"""

from __future__ import annotations

import socket
import ssl
import threading
import time

import httpx

from tests.hardening.conftest import SecureAdapter

CAP = 40
EXTRA = 10
HEAD_TIMEOUT_S = 2.0


def _drip(sock: ssl.SSLSocket, stop: threading.Event, outcome: dict[int, bytes], i: int) -> None:
    """Send a request line, then one header byte every 0.2 s, never ending the head; record the answer."""
    try:
        sock.sendall(b"GET /apis/custom.metrics.k8s.io/v1beta2 HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                data = sock.recv(4096)
                outcome[i] = data  # the server answered (or closed: b"") while we were still dripping
                return
            except TimeoutError:
                sock.sendall(b"a")
    except OSError:
        outcome[i] = b""  # reset by the server while we were sending
    finally:
        sock.close()


def test_dripping_connections_are_capped_and_timed_out(secure_adapter, pki) -> None:
    adapter: SecureAdapter = secure_adapter(
        "--no-kubernetes-auth", "--max-connections", str(CAP), "--request-header-timeout", str(HEAD_TIMEOUT_S)
    )
    stop = threading.Event()
    outcome: dict[int, bytes] = {}
    socks = [adapter.tls_socket() for _ in range(CAP)]
    drippers = [threading.Thread(target=_drip, args=(s, stop, outcome, i)) for i, s in enumerate(socks)]
    for t in drippers:
        t.start()
    try:
        # At the cap: further connections are answered 503 and closed straight away.
        refused = []
        for _ in range(EXTRA):
            extra = adapter.tls_socket()
            extra.settimeout(30)
            refused.append(extra.recv(4096))
            extra.close()
        assert all(r.startswith(b"HTTP/1.1 503 ") for r in refused), refused
        # The drippers are cut off by the head timeout though they keep sending; wait for it (bounded).
        deadline = time.monotonic() + 60
        while len(outcome) < CAP and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        for t in drippers:
            t.join(10)
    assert len(outcome) == CAP, "some dripping connections were never closed by the server"
    answers = list(outcome.values())
    assert all(a == b"" or a.startswith(b"HTTP/1.1 408 ") for a in answers), answers[:3]
    assert any(a.startswith(b"HTTP/1.1 408 ") for a in answers)
    # Slots are free again: a normal request is served.
    r = adapter.get("/apis/custom.metrics.k8s.io/v1beta2", cert=pki.admin)
    assert r.status_code == 200, r.text


def test_idle_connection_without_a_request_is_closed(secure_adapter) -> None:
    adapter: SecureAdapter = secure_adapter("--no-kubernetes-auth", "--request-header-timeout", str(HEAD_TIMEOUT_S))
    sock = adapter.tls_socket()
    sock.settimeout(60)
    try:
        answer = sock.recv(4096)  # we send nothing at all after the handshake
    finally:
        sock.close()
    assert answer == b"" or answer.startswith(b"HTTP/1.1 408 "), answer[:100]


def test_keep_alive_requests_each_get_a_fresh_head_budget(secure_adapter, pki) -> None:
    """The head timeout and size bound are per request, not per connection: a keep-alive client that sends
    several requests over longer than the head timeout is served every time."""
    adapter: SecureAdapter = secure_adapter("--no-kubernetes-auth", "--request-header-timeout", str(HEAD_TIMEOUT_S))
    with httpx.Client(verify=pki.context(pki.admin), timeout=30) as client:
        for _ in range(4):
            r = client.get(adapter.url + "/apis/custom.metrics.k8s.io/v1beta2", headers={"X-Fill": "a" * 30_000})
            assert r.status_code == 200
            time.sleep(HEAD_TIMEOUT_S / 2)


def test_a_connection_that_never_starts_tls_is_closed(secure_adapter) -> None:
    """Before the handshake the protocol does not see the connection: the event loop's handshake timeout (60 s
    by default, uvicorn passes none) is bounded by --request-header-timeout too."""
    adapter: SecureAdapter = secure_adapter("--no-kubernetes-auth", "--request-header-timeout", str(HEAD_TIMEOUT_S))
    with socket.create_connection(("127.0.0.1", adapter.port), timeout=30) as raw:
        assert raw.recv(4096) == b""  # closed by the server, well before this socket's own 30 s timeout
