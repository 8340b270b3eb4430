"""The simulated fleet as a scrape target: ``MetricsExporter`` serves a ``FleetRunner``'s ``GET /metrics`` on
127.0.0.1 (stdlib ``ThreadingHTTPServer``); the body is ``adapter.demo.render.render_metrics`` of the fleet.
"""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from adapter.demo.runner import FleetRunner

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
LOOPBACK = "127.0.0.1"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # the stdlib names it
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.server.runner.render(), CONTENT_TYPE)
        elif path in ("/healthz", "/"):
            self._send(200, "ok\n", "text/plain; charset=utf-8")
        else:
            self._send(404, "not found\n", "text/plain; charset=utf-8")

    def _send(self, code: int, body: str, content_type: str) -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # the stdlib signature
        log.debug("exporter: " + format, *args)


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], runner: FleetRunner) -> None:
        self.runner = runner
        super().__init__(address, _Handler)


class MetricsExporter:
    """``GET /metrics`` for a ``FleetRunner`` on ``127.0.0.1:port`` (0 picks a free port)."""

    def __init__(self, runner: FleetRunner, *, port: int = 0, host: str = LOOPBACK) -> None:
        self.runner = runner
        self._address = (host, port)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        """The bound port (after ``start()``)."""
        if self._server is None:
            raise RuntimeError("exporter not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (after ``start()``)."""
        return f"http://{self._address[0]}:{self.port}"

    @property
    def target(self) -> str:
        """``127.0.0.1:PORT``, as a Prometheus static target."""
        return f"{self._address[0]}:{self.port}"

    def start(self) -> None:
        """Bind and serve on a daemon thread; a no-op if already started."""
        if self._server is not None:
            return
        self._server = _Server(self._address, self.runner)
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics-exporter", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join()
