"""A fault-injecting reverse proxy in front of a real Prometheus / VictoriaMetrics.

The backend is real; the proxy only changes what the adapter receives when a test asks it to: HTTP 5xx,
a body that is not JSON, JSON cut in half, JSON of the wrong shape, a 400 ``bad_data`` answer whose error text
names an internal address (``bad_data``), or a body labelled ``Content-Encoding: gzip`` that is not gzip
(``bad_gzip``). In ``pass`` mode it forwards byte for byte.
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from adapter.demo.servers import free_port

MODES = ("pass", "http500", "http503", "garbage", "truncated", "wrong_shape", "bad_data", "bad_gzip")
# What a backend's own error text might carry that a client must never see (the bad_data answer's text).
SECRET_ERROR_TEXT = "parse error at 10.9.8.7:9090 tenant=acme-internal"


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.mode = "pass"
        self.port = free_port()
        self.requests = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                proxy.requests += 1
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                code, payload = proxy._answer(self.path, body)
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                if proxy.mode == "bad_gzip":
                    self.send_header("Content-Encoding", "gzip")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _answer(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self.mode == "http500":
            return 500, b'{"status":"error","errorType":"internal","error":"injected failure"}'
        if self.mode == "http503":
            return 503, b"service unavailable"
        if self.mode == "bad_data":
            return 400, b'{"status":"error","errorType":"bad_data","error":"%s"}' % SECRET_ERROR_TEXT.encode()
        resp = httpx.post(
            self.upstream + path,
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded"},
            timeout=30,
        )
        if self.mode == "garbage":
            return 200, b"<html><body>proxy error page</body></html>"
        if self.mode == "truncated":
            return 200, resp.content[: len(resp.content) // 2]
        if self.mode == "wrong_shape":
            return 200, b'{"status":"success","data":{"resultType":"vector","result":[{"metric":{"pod":"x"}}]}}'
        return resp.status_code, resp.content

    def __enter__(self) -> FaultProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
