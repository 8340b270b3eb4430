"""Issue 26 row 3: a burst of timeouts under pool contention must not wedge the backend connection pool, and
``/readyz`` must say when this replica cannot reach its backend while another replica can.

``StallingProxy`` is a tiny loopback HTTP server in front of a real Prometheus / VictoriaMetrics. In ``trickle``
mode it answers every query with a head and then one byte every 50 ms of a body that never ends, so every
query runs into its deadline while reading the body (the cancellation path); in ``drop`` mode it closes every
connection unanswered; in ``pass`` mode it forwards to the real backend. The adapter runs with a small
concurrency bound so that the burst contends for the pool. After the burst, with the proxy passing again, the
adapter must serve the real values again (before the fix its pool had lost every connection for good: every
query waited for a connection until its deadline and the backend saw nothing).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from adapter.catalog import load_catalog
from adapter.settings import Settings
from tests.faults.test_backend_faults import PODS, assert_real_values
from tests.support.adapter_server import running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import build


class StallingProxy:
    """HTTP/1.1 on 127.0.0.1 with keep-alive: ``pass`` forwards, ``trickle`` never finishes a body, ``drop``
    closes the connection unanswered. ``passed`` counts queries forwarded to the real backend."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.mode = "pass"
        self.passed = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}"

    def _accept(self) -> None:
        while not self._closing:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, httpx.Client(timeout=30, trust_env=False) as http:
            buf = b""
            while not self._closing:
                while b"\r\n\r\n" not in buf:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                length = next(
                    (int(v) for k, _, v in (x.partition(":") for x in lines[1:]) if k.lower() == "content-length"), 0
                )
                while len(buf) < length:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buf += data
                body, buf = buf[:length], buf[length:]
                if self.mode == "drop":
                    return
                if self.mode == "trickle":
                    self._trickle(conn)
                    return
                self.passed += 1
                resp = http.post(
                    self.upstream + path, content=body, headers={"Content-Type": "application/x-www-form-urlencoded"}
                )
                conn.sendall(
                    b"HTTP/1.1 %d OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n"
                    % (resp.status_code, len(resp.content))
                    + resp.content
                )

    def _trickle(self, conn: socket.socket) -> None:
        try:
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n{")
            while self.mode == "trickle" and not self._closing:
                time.sleep(0.05)
                conn.sendall(b" ")
        except OSError:
            pass  # the client gave up

    def close(self) -> None:
        self._closing = True
        self._sock.close()


@pytest.fixture
def proxy(backend: TestBackend) -> Iterator[StallingProxy]:
    p = StallingProxy(backend.url)
    yield p
    p.close()


def settings(url: str, kind: str, **kw: object) -> Settings:
    catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=0.0, store=None)
    return Settings(prometheus_url=url, backend=kind, pod_source="prometheus", catalog=catalog, **kw)  # type: ignore[arg-type]


def fleet(backend: TestBackend, ns: str) -> tuple[float, str]:
    """The faults fleet (3 pods, 2 GPUs each) in namespace ``ns``; (its clock, the victim HPA's request path)."""
    now = float(int(time.time()) - 30)
    backend.load(build(ns, PODS, now))
    return (
        now,
        f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/gpu_utilization_p90?labelSelector=app%3Dweb",
    )


def served_again(url: str, path: str, attempts: int = 60) -> httpx.Response:
    """The victim's request, until it is answered 200 (at most ``attempts`` tries, each bounded by its timeout)."""
    r = httpx.get(url + path, timeout=30)
    for _ in range(attempts):
        if r.status_code == 200:
            break
        time.sleep(0.5)
        r = httpx.get(url + path, timeout=30)
    return r


def test_pool_recovers_after_a_burst_of_timeouts(backend: TestBackend, proxy: StallingProxy, unique_ns: str) -> None:
    now, path = fleet(backend, unique_ns)
    with running_adapter(
        settings(proxy.url, backend.kind, query_timeout_s=1.0, max_upstream_concurrency=4), clock=lambda: now
    ) as url:
        assert_real_values(httpx.get(url + path, timeout=30))
        proxy.mode = "trickle"
        # A burst for 40 namespaces (distinct queries, so nothing is single-flighted), 10x the concurrency bound:
        # every query is cut at its deadline while its body trickles in, with others waiting for the pool.
        paths = [path.replace(f"/namespaces/{unique_ns}/", f"/namespaces/burst{i}/") for i in range(40)]
        with concurrent.futures.ThreadPoolExecutor(40) as pool:
            codes = list(pool.map(lambda p: httpx.get(url + p, timeout=60).status_code, paths))
        assert set(codes) == {503}, codes
        proxy.mode = "pass"
        before = proxy.passed
        r = served_again(url, path)
        assert_real_values(r)  # before the fix: 503 "did not answer" forever, the backend saw nothing
        assert proxy.passed > before


def test_readyz_tells_which_replica_cannot_reach_its_backend(
    backend: TestBackend, proxy: StallingProxy, unique_ns: str
) -> None:
    now, path = fleet(backend, unique_ns)
    quick = {"readyz_unreachable_after_s": 1.0, "readyz_probe_interval_s": 0.2, "query_timeout_s": 1.0}
    with (
        running_adapter(settings(proxy.url, backend.kind, **quick), clock=lambda: now) as cut_off,
        running_adapter(settings(backend.url, backend.kind, **quick), clock=lambda: now) as healthy,
    ):
        for url in (cut_off, healthy):
            assert_real_values(httpx.get(url + path, timeout=30))
            assert httpx.get(url + "/readyz", timeout=10).status_code == 200
        proxy.mode = "drop"  # this replica's path to the backend breaks; the other's does not
        r = httpx.get(cut_off + "/readyz", timeout=10)
        for _ in range(100):  # /readyz never waits on the backend: each call returns at once
            if r.status_code == 503:
                break
            time.sleep(0.1)
            r = httpx.get(cut_off + "/readyz", timeout=10)
        assert r.status_code == 503 and "no answer from its metrics backend" in r.text, r.text
        assert httpx.get(cut_off + "/livez", timeout=10).status_code == 200  # alive: not a reason to restart
        assert httpx.get(healthy + "/readyz", timeout=10).status_code == 200
        assert_real_values(httpx.get(healthy + path, timeout=30))
        proxy.mode = "pass"  # the probe (no HPA traffic reaches an unready replica) brings it back
        for _ in range(100):
            if (r := httpx.get(cut_off + "/readyz", timeout=10)).status_code == 200:
                break
            time.sleep(0.1)
        assert r.status_code == 200, r.text
        assert_real_values(httpx.get(cut_off + path, timeout=30))


def test_backend_down_for_everyone_both_replicas_unready_then_ready(
    backend: TestBackend, proxy: StallingProxy, unique_ns: str
) -> None:
    """The rule's other side: when no replica can reach the backend, each says so (the APIService then shows
    Available=False, the truth), and each is ready again at the first answer, by its own probe: no replica stays
    out once the backend is back, and none flips back to unready while it answers."""
    now, path = fleet(backend, unique_ns)
    quick = {"readyz_unreachable_after_s": 1.0, "readyz_probe_interval_s": 0.2, "query_timeout_s": 1.0}
    with (
        running_adapter(settings(proxy.url, backend.kind, **quick), clock=lambda: now) as one,
        running_adapter(settings(proxy.url, backend.kind, **quick), clock=lambda: now) as two,
    ):
        proxy.mode = "drop"
        for url in (one, two):
            for _ in range(100):
                if httpx.get(url + "/readyz", timeout=10).status_code == 503:
                    break
                time.sleep(0.1)
            assert httpx.get(url + "/readyz", timeout=10).status_code == 503
        proxy.mode = "pass"
        for url in (one, two):
            for _ in range(100):
                if httpx.get(url + "/readyz", timeout=10).status_code == 200:
                    break
                time.sleep(0.1)
            codes = [httpx.get(url + "/readyz", timeout=10).status_code for _ in range(10)]
            assert codes == [200] * 10, codes
            assert_real_values(httpx.get(url + path, timeout=30))
