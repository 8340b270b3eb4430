"""Processes as Linux shows them in ``/proc``: what a test may ask about a server it started."""

from __future__ import annotations

from pathlib import Path


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
