"""Throwaway local Prometheus and VictoriaMetrics servers, run from the real Debian binaries.

Used by the integration tests and by ``adapter demo``. Each server listens on a free loopback port and
keeps its data, its config and its log in one temporary directory::

    with PrometheusProcess() as prom:          # start() ... close()
        httpx.get(f"{prom.url}/api/v1/query", params={"query": "up"})

Lifecycle: ``start()`` launches and waits for readiness; ``stop()`` (SIGTERM) ends the process but keeps the
port and the data directory, so a later ``start()`` brings the *same* server back (restart fault tests; crashing
or freezing one is ``tests/support/procs.py``'s ``kill``/``pause``/``resume``); ``close()``
stops it and deletes the directory. Nothing happens at construction or import time.
"""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Self

import httpx

LOOPBACK = "127.0.0.1"
LOG_TAIL_CHARS = 4000
# How often a failed first start may retry on a fresh port: free_port() can race with another process
# that grabs the same port between our probe and the server's bind.
_PORT_RACE_RETRIES = 3


class DevServerError(RuntimeError):
    """A dev server could not be started: it exited early, never became ready, or is not running."""


class BinaryNotFound(DevServerError):
    """The server's executable is not on PATH (install the Debian package named in the message)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the OS picks it; others may race for it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _as_yaml(config: Mapping[str, object]) -> str:
    # JSON is valid YAML for both servers' config parsers, and json needs no extra type stubs.
    return json.dumps(config, indent=2) + "\n"


class _ServerProcess:
    """The lifecycle shared by both servers; subclasses say how to configure, launch and probe them."""

    _name: str = ""  # used in temp dir names, messages and the log file name
    _package: str = ""  # the Debian package that provides the binary
    _ready_path: str = ""  # GET here answers 200 once the server serves queries

    def __init__(self, *, binary: str, extra_args: Sequence[str], port: int | None) -> None:
        self._binary = binary
        self._extra_args = tuple(extra_args)
        self._requested_port = port
        self._port: int | None = port
        self._workdir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._starts = 0

    # -- where it lives ---------------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The loopback port; fixed by the first successful ``start()`` and kept until ``close()``."""
        if self._port is None:
            raise DevServerError(f"{self._name} has no port yet: call start() first")
        return self._port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash)."""
        return f"http://{LOOPBACK}:{self.port}"

    @property
    def workdir(self) -> Path:
        """The temporary directory holding the data dir, the config and the log."""
        if self._workdir is None:
            raise DevServerError(f"{self._name} has no directory yet: call start() first")
        return self._workdir

    @property
    def data_dir(self) -> Path:
        """The server's storage directory (inside ``workdir``)."""
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        """The server's stdout + stderr, appended across restarts."""
        return self.workdir / f"{self._name}.log"

    @property
    def pid(self) -> int | None:
        """The running process id, or None when not running."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def running(self) -> bool:
        """True while the process exists (including while paused)."""
        return self._proc is not None and self._proc.poll() is None

    # -- subclass hooks ---------------------------------------------------------------------------------

    def _write_config(self) -> None:
        """Write whatever config file the launch arguments refer to (called before every launch)."""

    def _args(self) -> list[str]:
        raise NotImplementedError

    # -- lifecycle --------------------------------------------------------------------------------------

    def prepare(self) -> Path:
        """Create the temporary directory and an empty data dir without launching anything (idempotent);
        returns the data dir, so a caller can seed it (e.g. backfilled TSDB blocks) before ``start()``."""
        if self._workdir is None:
            self._workdir = Path(tempfile.mkdtemp(prefix=f"llm-hpa-{self._name}-"))
            self.data_dir.mkdir()
        return self.data_dir

    def start(self, timeout: float = 30.0) -> None:
        """Launch the server and return once it answers its readiness probe; a no-op if already running.

        After ``stop()`` (or a crash) this restarts on the same port with the same data. Raises
        ``BinaryNotFound`` if the executable is missing and ``DevServerError`` (with the log's tail) if the
        process exits early or is not ready within ``timeout`` seconds (it is killed then).
        """
        if self.running():
            return
        executable = shutil.which(self._binary)
        if executable is None:
            raise BinaryNotFound(
                f"{self._binary!r} not found on PATH: install the Debian package {self._package!r} "
                f"(e.g. `apt-get install {self._package}` or `make sysdeps`)"
            )
        self.prepare()
        # Only a port nobody has relied on yet may be swapped for another when the bind races.
        may_repick = self._requested_port is None and self._starts == 0
        attempts = _PORT_RACE_RETRIES if may_repick else 1
        for attempt in range(attempts):
            if self._port is None or (attempt > 0 and may_repick):
                self._port = free_port()
            try:
                self._launch(executable, timeout)
            except DevServerError as exc:
                if attempt + 1 < attempts and "address already in use" in str(exc):
                    continue
                raise
            self._starts += 1
            return

    def _launch(self, executable: str, timeout: float) -> None:
        self._write_config()
        command = [executable, *self._args(), *self._extra_args]
        log = self.log_path.open("ab")
        log.write(f"=== {time.strftime('%Y-%m-%dT%H:%M:%S')} start: {' '.join(command)}\n".encode())
        log.flush()
        offset = log.tell()
        self._log = log
        # A new session keeps a terminal's Ctrl-C away from the child: its owner decides when it stops,
        # so the data dir is never deleted under a server that is still shutting down.
        self._proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.workdir,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        # trust_env=False: a proxy set in the environment must never see loopback probes.
        with httpx.Client(timeout=1.0, trust_env=False) as client:
            while True:
                code = self._proc.poll()
                if code is not None:
                    self._reap()
                    raise DevServerError(
                        f"{self._name} exited with code {code} during start-up; log tail:\n{self._log_tail(offset)}"
                    )
                try:
                    if client.get(self.url + self._ready_path).status_code == 200:
                        return
                except httpx.HTTPError:
                    pass  # not listening yet
                if time.monotonic() > deadline:
                    self._kill()
                    raise DevServerError(
                        f"{self._name} not ready at {self.url}{self._ready_path} after {timeout:g}s; "
                        f"log tail:\n{self._log_tail(offset)}"
                    )
                time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM and wait for the exit (SIGKILL after ``timeout``); keeps the port and the data dir."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            # A paused process would hold the SIGTERM pending forever: let it run to handle it.
            proc.send_signal(signal.SIGCONT)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._reap()

    def _kill(self) -> None:
        """SIGKILL a server that never became ready, and reap it."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
        self._reap()

    def close(self) -> None:
        """Stop the server and delete its directory; a later ``start()`` begins afresh."""
        self.stop()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        self._workdir = None
        self._port = self._requested_port
        self._starts = 0

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        where = f"{LOOPBACK}:{self._port}" if self._port is not None else "unstarted"
        return f"<{type(self).__name__} {where} running={self.running()}>"

    # -- helpers ----------------------------------------------------------------------------------------

    def _reap(self) -> None:
        self._proc = None
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None

    def _log_tail(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as fh:
                fh.seek(offset)
                text = fh.read().decode("utf-8", errors="replace")
        except OSError as exc:
            return f"(log unreadable: {exc})"
        return text[-LOG_TAIL_CHARS:] or "(empty)"


class PrometheusProcess(_ServerProcess):
    """A local Prometheus 2.x with the remote-write receiver and the admin API enabled.

    Retention is effectively unlimited and ``storage.tsdb.out_of_order_time_window`` is
    ``out_of_order_window`` (default 30 days), so tests may remote-write the last few days of history
    in any order. ``scrape_configs`` (Prometheus config syntax) are written to the config on every start.
    """

    _name = "prometheus"
    _package = "prometheus"
    _ready_path = "/-/ready"

    def __init__(
        self,
        *,
        scrape_configs: list[dict[str, object]] | None = None,
        scrape_interval: str = "15s",
        binary: str = "prometheus",
        extra_args: Sequence[str] = (),
        out_of_order_window: str = "30d",
        port: int | None = None,
    ) -> None:
        super().__init__(binary=binary, extra_args=extra_args, port=port)
        self.scrape_configs: list[dict[str, object]] = list(scrape_configs or [])
        self.scrape_interval = scrape_interval
        self.out_of_order_window = out_of_order_window

    @property
    def config_path(self) -> Path:
        """The generated ``prometheus.yml``."""
        return self.workdir / "prometheus.yml"

    def _write_config(self) -> None:
        config = {
            "global": {"scrape_interval": self.scrape_interval, "evaluation_interval": self.scrape_interval},
            "scrape_configs": self.scrape_configs,
            # Without it, samples older than ~1 h behind the newest are rejected as "out of bounds".
            "storage": {"tsdb": {"out_of_order_time_window": self.out_of_order_window}},
        }
        self.config_path.write_text(_as_yaml(config))

    def _args(self) -> list[str]:
        return [
            f"--config.file={self.config_path}",
            f"--storage.tsdb.path={self.data_dir}",
            f"--web.listen-address={LOOPBACK}:{self.port}",
            "--web.enable-remote-write-receiver",
            "--web.enable-admin-api",
            "--storage.tsdb.retention.time=100y",
        ]


class VictoriaMetricsProcess(_ServerProcess):
    """A local single-node VictoriaMetrics.

    Runs with ``-retentionPeriod=100y -search.latencyOffset=0s -search.disableCache`` so freshly imported
    data is queryable at once and old history is kept. If ``scrape_configs`` is given, they are written to
    a ``-promscrape.config`` file (same syntax as Prometheus) on every start.
    """

    _name = "victoriametrics"
    _package = "victoria-metrics"
    _ready_path = "/health"

    def __init__(
        self,
        *,
        scrape_configs: list[dict[str, object]] | None = None,
        scrape_interval: str = "15s",
        binary: str = "victoria-metrics",
        extra_args: Sequence[str] = (),
        port: int | None = None,
    ) -> None:
        super().__init__(binary=binary, extra_args=extra_args, port=port)
        self.scrape_configs: list[dict[str, object]] | None = (
            list(scrape_configs) if scrape_configs is not None else None
        )
        self.scrape_interval = scrape_interval

    @property
    def config_path(self) -> Path:
        """The generated ``-promscrape.config`` file (written only when there are scrape configs)."""
        return self.workdir / "promscrape.yml"

    def _write_config(self) -> None:
        if self.scrape_configs is None:
            return
        config = {"global": {"scrape_interval": self.scrape_interval}, "scrape_configs": self.scrape_configs}
        self.config_path.write_text(_as_yaml(config))

    def _args(self) -> list[str]:
        args = [
            f"-storageDataPath={self.data_dir}",
            f"-httpListenAddr={LOOPBACK}:{self.port}",
            "-retentionPeriod=100y",
            "-search.latencyOffset=0s",
            "-search.disableCache",
        ]
        if self.scrape_configs is not None:
            args.append(f"-promscrape.config={self.config_path}")
        return args


def scraping_prometheus(target: str, *, job: str, interval: str) -> PrometheusProcess:
    """A Prometheus that scrapes one exporter (``host:port``) with ``honor_labels: true``: the target speaks
    for the workload pods (as the GPU Operator's ServiceMonitor with honorLabels does), so its
    namespace/pod labels must win over the target's own."""
    return PrometheusProcess(
        scrape_configs=[
            {
                "job_name": job,
                "honor_labels": True,
                "scrape_interval": interval,
                "scrape_timeout": interval,
                "static_configs": [{"targets": [target]}],
            }
        ],
        scrape_interval=interval,
    )
