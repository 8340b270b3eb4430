"""Memory exhaustion without credentials through oversized header blocks.

The red team sent five 250 MB header blocks at once and the adapter's RSS went from 95 MB to 1.43 GB
before the app's 64 KiB header check ran (httptools accumulates header values as they arrive). Here five
clients do the same against the real adapter process (real TLS, no credentials) and the adapter's memory is
read from ``/proc/<pid>/status`` while they send: the head is refused once it passes the protocol bound.
"""

from __future__ import annotations

import threading

from tests.hardening.conftest import SecureAdapter

CLIENTS = 5
BLOCK = 64 * 1024 * 1024  # per client: enough to show the old behaviour plainly, bounded if it returns
CHUNK = 1024 * 1024
MIB = 1024


def _flood(adapter: SecureAdapter, results: list[tuple[int, bytes]]) -> None:
    """Send one endless header value until the server stops reading; record bytes sent and its answer."""
    sent, answer = 0, b""
    sock = adapter.tls_socket()
    try:
        sock.sendall(b"GET /apis/custom.metrics.k8s.io/v1beta2 HTTP/1.1\r\nHost: localhost\r\nX-Fill: ")
        chunk = b"a" * CHUNK
        while sent < BLOCK:
            sock.sendall(chunk)
            sent += len(chunk)
    except OSError:
        pass  # the server closed the connection: what we expect
    try:
        answer = sock.recv(4096)
    except OSError:
        pass
    finally:
        sock.close()
    results.append((sent, answer))


def test_oversized_header_blocks_do_not_grow_memory(secure_adapter, pki) -> None:
    adapter = secure_adapter("--no-kubernetes-auth")
    assert adapter.get("/apis/custom.metrics.k8s.io/v1beta2", cert=pki.admin).status_code == 200  # warm
    rss_before, hwm_before = adapter.status_kib("VmRSS"), adapter.status_kib("VmHWM")

    peak = [rss_before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], adapter.status_kib("VmRSS"))
            done.wait(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    results: list[tuple[int, bytes]] = []
    clients = [threading.Thread(target=_flood, args=(adapter, results)) for _ in range(CLIENTS)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(120)
    done.set()
    sampler.join()

    assert len(results) == CLIENTS
    for sent, answer in results:
        assert sent < BLOCK, "the adapter kept reading a header block far past its limit"
        # Usually the 431 arrives; when the kernel resets the connection first the answer is lost, never a 200.
        assert answer == b"" or answer.startswith(b"HTTP/1.1 431 "), answer[:100]
    assert any(answer.startswith(b"HTTP/1.1 431 ") for _, answer in results)
    growth_peak = (max(peak[0], adapter.status_kib("VmHWM")) - max(rss_before, hwm_before)) / MIB
    print(
        f"\nRSS before {rss_before / MIB:.0f} MiB, sampled peak {peak[0] / MIB:.0f} MiB, after "
        f"{adapter.status_kib('VmRSS') / MIB:.0f} MiB; sent per client (MiB): {[s // CHUNK for s, _ in results]}"
    )
    assert growth_peak < 48, f"RSS peak grew {growth_peak:.0f} MiB under {CLIENTS} oversized header blocks"
    assert (adapter.status_kib("VmRSS") - rss_before) / MIB < 32  # and what it took is released
    # The adapter still serves a normal request, and a normal-sized header set still reaches the app.
    r = adapter.get("/apis/custom.metrics.k8s.io/v1beta2", cert=pki.admin, headers={"X-Fill": "a" * 4096})
    assert r.status_code == 200, r.text


def test_a_head_between_the_app_limit_and_the_protocol_bound_gets_the_apps_status(secure_adapter, pki) -> None:
    adapter = secure_adapter("--no-kubernetes-auth")
    r = adapter.get("/apis/custom.metrics.k8s.io/v1beta2", cert=pki.admin, headers={"X-Fill": "a" * 70_000})
    assert r.status_code == 431
    assert r.json()["reason"] == "RequestHeaderFieldsTooLarge"  # a Kubernetes Status from the app


def test_thousands_of_tiny_headers_are_refused(secure_adapter, pki) -> None:
    adapter = secure_adapter("--no-kubernetes-auth")
    sock = adapter.tls_socket(pki.admin)
    try:
        head = b"GET /apis/custom.metrics.k8s.io/v1beta2 HTTP/1.1\r\nHost: localhost\r\n"
        head += b"".join(b"a%d: b\r\n" % i for i in range(5000)) + b"\r\n"
        try:
            sock.sendall(head)
        except OSError:
            pass
        answer = sock.recv(4096)
    finally:
        sock.close()
    assert answer.startswith(b"HTTP/1.1 431 "), answer[:100]


def test_request_bodies_are_bounded_too(secure_adapter, pki) -> None:
    """``POST /explain`` read its body whole: a declared or streamed body past 3 MiB is refused with 413."""
    adapter = secure_adapter("--no-kubernetes-auth")
    for head in (b"Content-Length: 4194304\r\n", b"Transfer-Encoding: chunked\r\n"):
        sock = adapter.tls_socket(pki.admin)
        try:
            sock.sendall(
                b"POST /explain?namespace=x&metric=llm_composite_load&selector=a%3Db HTTP/1.1\r\n"
                b"Host: localhost\r\n" + head + b"\r\n"
            )
            if b"chunked" in head:
                try:
                    for _ in range(8):
                        sock.sendall(b"100000\r\n" + b"a" * 0x100000 + b"\r\n")  # 1 MiB chunks
                except OSError:
                    pass
            answer = sock.recv(4096)
        finally:
            sock.close()
        assert answer.startswith(b"HTTP/1.1 413 "), (head, answer[:100])
    assert adapter.get("/apis/custom.metrics.k8s.io/v1beta2", cert=pki.admin).status_code == 200


def test_an_oversized_head_after_a_keep_alive_request_is_refused(secure_adapter, pki) -> None:
    """The bound applies to every request on a connection, and the 431 is written after the first answer."""
    adapter = secure_adapter("--no-kubernetes-auth")
    sock = adapter.tls_socket(pki.admin)
    try:
        sock.sendall(b"GET /livez HTTP/1.1\r\nHost: localhost\r\n\r\n")
        first = b""
        while not first.endswith(b"ok"):
            first += sock.recv(4096)
        assert first.startswith(b"HTTP/1.1 200 ")
        try:
            sock.sendall(b"GET /livez HTTP/1.1\r\nHost: localhost\r\nX-Fill: " + b"a" * (200 * 1024) + b"\r\n\r\n")
        except OSError:
            pass
        second = sock.recv(4096)
    finally:
        sock.close()
    assert second.startswith(b"HTTP/1.1 431 "), second[:100]
