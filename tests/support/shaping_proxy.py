"""A reverse proxy in front of a real Prometheus / VictoriaMetrics that changes *how* the real answer arrives.

Modes (``proxy.mode``):

- ``pass``: byte for byte.
- ``trickle``: the real answer, but its body sent one byte every ``trickle_s`` seconds (the red team's
  "backend trickling bytes": each read is quick, the whole answer takes minutes).
- ``huge``: the real answer with ``filler`` (pre-built JSON vector items for pods nobody asked about) spliced in
  front of its result items: a valid answer as big as a fleet-wide selector gives.
- ``vm_partial``: the real answer with ``"isPartial": true`` added, as vmselect sends it when a vmstorage node
  is down and partial responses are allowed.

Only queries whose form body contains ``only_if`` (default: all) are shaped. Query strings are forwarded.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from adapter.demo.servers import free_port

MODES = ("pass", "trickle", "huge", "vm_partial")


def filler_items(count: int) -> bytes:
    """``count`` vector items (comma-separated, no brackets) for pods of a namespace nobody queries."""
    item = (
        '{"metric":{"namespace":"filler","pod":"filler-%07d","gpu":"%d","Hostname":"node-%05d",'
        '"UUID":"GPU-%032x"},"value":[1700000000.123,"%d.5"]}'
    )
    return ",".join(item % (i, i % 8, i // 8, i, i % 100) for i in range(count)).encode()


class ShapingProxy:
    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.mode = "pass"
        self.trickle_s = 0.2
        self.filler = b""
        self.only_if = ""
        self.port = free_port()
        self.shaped = 0
        self.paths: list[str] = []  # request paths with their query strings, as received
        self.stop_trickle = threading.Event()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                proxy.paths.append(self.path)
                resp = httpx.post(
                    proxy.upstream + self.path,
                    content=body,
                    timeout=30,
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
                payload = resp.content
                mode = proxy.mode if proxy.only_if.encode() in body else "pass"
                if mode != "pass" and resp.status_code == 200:
                    proxy.shaped += 1
                    payload = proxy._reshape(mode, payload)
                self.send_response(resp.status_code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                try:
                    if mode == "trickle":
                        for i in range(len(payload)):
                            if proxy.stop_trickle.wait(proxy.trickle_s):
                                return
                            self.wfile.write(payload[i : i + 1])
                            self.wfile.flush()
                    else:
                        self.wfile.write(payload)
                except OSError:
                    pass  # the adapter gave up and closed the connection: that is the point

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def _reshape(self, mode: str, payload: bytes) -> bytes:
        if mode == "vm_partial":
            doc = json.loads(payload)
            doc["isPartial"] = True
            return json.dumps(doc).encode()
        if mode == "huge":
            marker = b'"result":['
            at = payload.index(marker) + len(marker)
            rest = payload[at:]
            sep = b"," if not rest.lstrip().startswith(b"]") else b""
            return payload[:at] + self.filler + sep + rest
        return payload

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ShapingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_trickle.set()
        time.sleep(0.05)
        self._server.shutdown()
        self._server.server_close()
