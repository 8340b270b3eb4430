"""Support for the tenant tests: tiny real HTTP exporters a real Prometheus/VictoriaMetrics scrapes.

Each ``Exporter`` serves a fixed Prometheus text exposition on a free loopback port. The scrape config
gives every target the labels Kubernetes service discovery would (``namespace``/``pod`` of the scraped
pod) with ``honor_labels: false``, the chart default, so the backend stores exactly what it would in a
cluster: labels the process exposes that clash with target labels are renamed ``exported_*``, and labels
such as ``exported_pod`` that the process writes itself are kept as written.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

from adapter.demo.adapter_process import AdapterProcess
from adapter.demo.servers import PrometheusProcess, VictoriaMetricsProcess


class Exporter:
    """A /metrics endpoint serving ``text`` (changeable) on 127.0.0.1."""

    def __init__(self, text: str) -> None:
        self.text = text
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                body = exporter.text.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def scrape_job(
    name: str, exporter: Exporter, *, namespace: str, pod: str, honor_labels: bool = False
) -> dict[str, object]:
    """A scrape job whose target carries the namespace/pod labels service discovery would give it."""
    return {
        "job_name": name,
        "honor_labels": honor_labels,
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "static_configs": [{"targets": [exporter.target], "labels": {"namespace": namespace, "pod": pod}}],
    }


@contextmanager
def scraped(
    kind: str, jobs: Sequence[dict[str, object]], tmp: Path, adapter_args: Sequence[str] = ()
) -> Iterator[tuple[str, str]]:
    """Start a real backend of ``kind`` scraping ``jobs`` and a real adapter process reading it.

    Yields (backend url, adapter url) once every job has been scraped at least twice.
    """
    with ExitStack() as stack:
        backend: PrometheusProcess | VictoriaMetricsProcess
        if kind == "prometheus":
            backend = PrometheusProcess(scrape_configs=list(jobs), scrape_interval="1s")
        else:
            backend = VictoriaMetricsProcess(scrape_configs=list(jobs), scrape_interval="1s")
        backend.start()
        stack.callback(backend.close)
        wait_for_scrapes(backend.url, len(jobs))
        adapter = AdapterProcess(backend.url, tmp, extra_args=adapter_args)
        adapter.start()
        stack.callback(adapter.stop)
        yield backend.url, adapter.url


def wait_for_scrapes(url: str, jobs: int, timeout: float = 60.0) -> None:
    """Until ``count(up == 1)`` reaches ``jobs`` and a further scrape round has landed."""
    deadline = time.monotonic() + timeout
    with httpx.Client(timeout=5, trust_env=False) as client:
        while time.monotonic() < deadline:
            try:
                r = client.get(f"{url}/api/v1/query", params={"query": "count(up == 1)", "nocache": "1"})
                result = r.json()["data"]["result"]
                if result and float(result[0]["value"][1]) >= jobs:
                    time.sleep(2.5)  # at least two more scrapes of every target
                    return
            except (httpx.HTTPError, KeyError, ValueError):
                pass
            time.sleep(0.5)
    raise AssertionError(f"the backend at {url} did not scrape {jobs} targets within {timeout:g}s")
