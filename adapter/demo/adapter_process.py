"""``python -m adapter serve`` as a child process on a loopback port, for the demo, ``simulate --live``, the tests
and the benchmarks: the adapter as it is deployed, in a process of its own.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from adapter.demo.servers import LOG_TAIL_CHARS, LOOPBACK, DevServerError, free_port


def serve_command(prometheus_url: str, port: int, *args: str) -> list[str]:
    """The command line of ``python -m adapter serve`` on loopback ``port`` reading ``prometheus_url`` with the
    kube-state-metrics pod source (warning-level logs), plus ``args``: how every child-process adapter of the
    demo, the tests and the benchmarks is started."""
    return [
        sys.executable,
        "-m",
        "adapter",
        "--log-level",
        "warning",
        "serve",
        "--prometheus-url",
        prometheus_url,
        "--bind",
        f"{LOOPBACK}:{port}",
        "--pod-source",
        "prometheus",
        *args,
    ]


class AdapterProcess:
    """``python -m adapter serve`` as a child process on a loopback port (plain HTTP, kube-state-metrics pod
    source), for the demo, the live simulation and the benchmarks: the adapter as it is deployed, in a
    process of its own. Its log goes to ``log_dir/adapter.log``; ``start()`` waits for ``/readyz``."""

    def __init__(
        self, prometheus_url: str, log_dir: Path, *, port: int | None = None, extra_args: Sequence[str] = ()
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://{LOOPBACK}:{self.port}"
        self.log_path = Path(log_dir) / "adapter.log"
        self._command = serve_command(prometheus_url, self.port, "--insecure-plain-http", *extra_args)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 60.0) -> None:
        """Launch and wait until ``/readyz`` answers 200; DevServerError (with the log's tail) otherwise."""
        with self.log_path.open("wb") as log:
            # A new session keeps a terminal's Ctrl-C from reaching the child: its owner stops it.
            self._proc = subprocess.Popen(
                self._command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1.0, trust_env=False) as client:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise DevServerError(
                        f"the adapter exited with code {self._proc.returncode}; log tail:\n{self._tail()}"
                    )
                try:
                    if client.get(f"{self.url}/readyz").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
                time.sleep(0.1)
        raise DevServerError(
            f"the adapter was not ready at {self.url}/readyz after {timeout:g}s; log tail:\n{self._tail()}"
        )

    def check_alive(self) -> None:
        """Raise DevServerError (with the log's tail) if the adapter has exited."""
        if self._proc is not None and self._proc.poll() is not None:
            raise DevServerError(f"the adapter exited with code {self._proc.returncode}; log tail:\n{self._tail()}")

    def _tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:] or "(empty)"
        except OSError as exc:
            return f"(log unreadable: {exc})"

    def stop(self, timeout: float = 10.0) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
