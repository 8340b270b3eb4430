"""Processes as Linux shows them in ``/proc``: what a test may ask about a server it started, and the faults it
may inflict on it (freeze, thaw, crash)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from adapter.demo.servers import PrometheusProcess, VictoriaMetricsProcess


def children(pid: int) -> list[int]:
    """Pids of ``pid``'s live children (from each process's ``/proc/<pid>/stat`` parent field)."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone while we looked
        if int(fields[1]) == pid:
            out.append(int(stat.parent.name))
    return out


def _running_pid(server: PrometheusProcess | VictoriaMetricsProcess) -> int:
    pid = server.pid
    if pid is None:
        raise RuntimeError(f"{server!r} is not running")
    return pid


def pause(server: PrometheusProcess | VictoriaMetricsProcess) -> None:
    """SIGSTOP the server: its port stays open but nothing answers (a backend slower than any timeout).

    ``server.stop()`` sends SIGCONT after its SIGTERM, so a paused server still stops cleanly.
    """
    os.kill(_running_pid(server), signal.SIGSTOP)


def kill(server: PrometheusProcess | VictoriaMetricsProcess) -> None:
    """SIGKILL the server (a crash) and reap it; its port and data dir stay for a later ``start()``."""
    os.kill(_running_pid(server), signal.SIGKILL)
    server.stop()  # reaps the dead process (a SIGTERM to it changes nothing)


def resume(server: PrometheusProcess | VictoriaMetricsProcess) -> None:
    """SIGCONT the server: undo ``pause``."""
    os.kill(_running_pid(server), signal.SIGCONT)
