"""Issue 26 row 7: slow request bodies held the connection cap, before any authentication.

The head timeout covered heads only: a client sent a complete head with ``Content-Length: 100000``, read the
401, sent one body byte and held. uvicorn cancels its keep-alive timer on every byte received and re-arms it
only when a response completes, so such a connection stayed open for ever; ``max_connections`` of them made
the HPA controller's connections 503. Against the real adapter process over TLS (front-proxy authentication,
reviews from the fake kube API, values from a real Prometheus): the attackers' connections are closed after
their early answer, a body that does not arrive in time gets 408, one address cannot take the shared cap,
and the front-proxied HPA controller gets its own values throughout.
"""

from __future__ import annotations

import socket
import ssl

import httpx

from tests.hardening.conftest import SecureAdapter
from tests.hardening.victim_support import Victim, front_proxy_args

CAP = 40
HEAD = b"GET /apis/custom.metrics.k8s.io/v1beta2 HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100000\r\n\r\n"


def _read_answer(sock: ssl.SSLSocket) -> bytes:
    """One whole HTTP answer with a Content-Length (what the adapter sends), or what came before EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
    )
    while len(body) < length:
        chunk = sock.recv(4096)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _closed_by_server(sock: ssl.SSLSocket) -> bool:
    """True when the server has closed the connection (EOF or reset) before this socket's own timeout."""
    try:
        return sock.recv(4096) == b""
    except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
        return True
    except TimeoutError:
        return False


def _metric(adapter: SecureAdapter, pki, line_start: str, source: str = "127.0.0.1") -> float:  # type: ignore[no-untyped-def]
    transport = httpx.HTTPTransport(verify=pki.context(pki.admin), local_address=source)
    with httpx.Client(transport=transport, timeout=30) as client:
        text = client.get(adapter.url + "/metrics").text
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith(line_start)))


def test_slow_bodies_after_a_401_are_closed_and_the_hpa_controller_is_served(
    secure_adapter, pki, kube, prometheus
) -> None:
    policy, kubeconfig = kube
    victim = Victim.load(prometheus)
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig), "--max-connections", str(CAP))
    victim.assert_served(adapter, pki)
    attackers = [adapter.tls_socket() for _ in range(CAP)]
    try:
        for sock in attackers:
            sock.sendall(HEAD)  # no credentials, a body announced
        for sock in attackers:
            assert _read_answer(sock).startswith(b"HTTP/1.1 401 ")
        for sock in attackers:
            try:
                sock.sendall(b"x")  # one body byte: the connection is "busy" again, never re-armed
            except OSError:
                pass  # already closed by the server
        # The HPA controller is served while the attackers hold (or held) every shared connection.
        victim.assert_served(adapter, pki)
        for sock in attackers:
            sock.settimeout(30)
        closed = [_closed_by_server(sock) for sock in attackers]
    finally:
        for sock in attackers:
            sock.close()
    assert all(closed), f"{closed.count(False)} of {CAP} connections with a body outstanding were kept open"
    assert _metric(adapter, pki, 'llm_hpa_adapter_connections_dropped_total{reason="body_pending"}') >= CAP
    victim.assert_served(adapter, pki)


def test_front_proxy_connections_have_a_pool_the_shared_cap_cannot_take(secure_adapter, pki, kube, prometheus) -> None:
    """Idle connections fill the shared cap; another plain one is refused, the front proxy is still served."""
    policy, kubeconfig = kube
    victim = Victim.load(prometheus)
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig), "--max-connections", "10")
    held = [adapter.tls_socket() for _ in range(10)]
    try:
        extra = adapter.tls_socket()
        extra.settimeout(30)
        refused = extra.recv(4096)
        extra.close()
        assert refused.startswith(b"HTTP/1.1 503 "), refused
        for _ in range(3):  # new connections each time (adapter.get opens one per call)
            victim.assert_served(adapter, pki)
    finally:
        for sock in held:
            sock.close()


def test_one_address_cannot_take_the_shared_cap(secure_adapter, pki, kube, prometheus) -> None:
    policy, kubeconfig = kube
    victim = Victim.load(prometheus)
    adapter = secure_adapter(
        *front_proxy_args(pki, kubeconfig), "--max-connections", str(CAP), "--max-connections-per-address", "10"
    )
    held = [adapter.tls_socket() for _ in range(10)]  # from 127.0.0.1
    try:
        extra = adapter.tls_socket()
        extra.settimeout(30)
        refused = extra.recv(4096)
        extra.close()
        assert refused.startswith(b"HTTP/1.1 503 ") and b"from your address" in refused, refused
        # Another address still gets a connection, and the front proxy (also 127.0.0.1) is not capped.
        other = httpx.HTTPTransport(verify=pki.context(pki.admin), local_address="127.0.0.2")
        with httpx.Client(transport=other, timeout=30) as client:
            assert client.get(adapter.url + "/apis/custom.metrics.k8s.io/v1beta2").status_code == 200
        victim.assert_served(adapter, pki)
        refused_total = 'llm_hpa_adapter_connections_refused_total{cap="per_address"}'
        assert _metric(adapter, pki, refused_total, source="127.0.0.2") >= 1
    finally:
        for sock in held:
            sock.close()


def test_a_body_that_does_not_arrive_in_time_gets_408(secure_adapter, pki, kube, prometheus) -> None:
    """An authenticated request whose body stalls: the body deadline answers 408 and closes."""
    policy, kubeconfig = kube
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig), "--request-body-timeout", "1")
    sock = adapter.tls_socket(pki.admin)
    try:
        sock.sendall(
            b"POST /explain?namespace=a&metric=llm_composite_load&selector=app%3Dweb HTTP/1.1\r\n"
            b"Host: localhost\r\nContent-Type: application/yaml\r\nContent-Length: 100000\r\n\r\nkind: Horiz"
        )
        sock.settimeout(60)
        answer = _read_answer(sock)
        assert answer.startswith(b"HTTP/1.1 408 "), answer[:200]
        assert _closed_by_server(sock)
    finally:
        sock.close()
    assert _metric(adapter, pki, 'llm_hpa_adapter_connections_dropped_total{reason="body_timeout"}') == 1


def test_a_plain_tcp_client_is_refused_before_tls_when_over_its_share(secure_adapter, pki, kube) -> None:
    """The share is counted per connection, whatever the connection sends: raw TCP counts too."""
    policy, kubeconfig = kube
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig), "--max-connections-per-address", "3")
    held = [adapter.tls_socket() for _ in range(3)]
    try:
        with socket.create_connection(("127.0.0.1", adapter.port), timeout=30) as raw:
            ctx = pki.context()
            with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                assert tls.recv(4096).startswith(b"HTTP/1.1 503 ")
    finally:
        for sock in held:
            sock.close()
