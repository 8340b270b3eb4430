"""What the connection guards cost, and what they save: ``ServingProtocol`` next to uvicorn's own protocols.

Three servers of the same app (``create_app``, plain HTTP, ``GET /livez`` through the full middleware stack),
each a separate process, differing only in the HTTP protocol class:

* ``guarded``: ``adapter.connection.ServingProtocol`` (httptools + head bound, header count, head timeout, cap),
  what ``adapter serve`` runs;
* ``httptools``: uvicorn's ``HttpToolsProtocol`` unchanged (the baseline: what ran before);
* ``h11``: uvicorn's ``H11Protocol`` with ``h11_max_incomplete_event_size`` at the same head bound (the
  alternative fix).

Throughput: ``wrk`` (keep-alive, 16 connections) against each, alternating, ``--rounds`` times.
Memory: ``--clients`` clients each send a ``--head-mib`` MiB header block at once; the server's RSS is sampled
from ``/proc/<pid>/status`` during the attack (peak) and after it.

    .venv/bin/python benchmarks/serving_protocol.py [--seconds 5] [--rounds 2] [--clients 5] [--head-mib 16]
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.demo.servers import free_port  # noqa: E402

CHILD = """
import sys, uvicorn
from adapter.app import create_app
from adapter.connection import DEFAULT_LIMITS
from adapter.server import ServingConfig
from adapter.settings import Settings
kind, port = sys.argv[1], int(sys.argv[2])
app = create_app(Settings(prometheus_url="http://127.0.0.1:9", pod_source="prometheus"))
common = dict(host="127.0.0.1", port=port, log_level="error", access_log=False, lifespan="on")
if kind == "guarded-tls":
    from adapter.auth.tls import TLSFiles, build_context
    ctx = build_context(TLSFiles(sys.argv[3] + "/tls.crt", sys.argv[3] + "/tls.key"))
    config = ServingConfig(app, limits=DEFAULT_LIMITS, ssl_context=ctx, **common)
elif kind == "guarded":
    config = ServingConfig(app, limits=DEFAULT_LIMITS, **common)
elif kind == "httptools":
    config = uvicorn.Config(app, http="httptools", **common)
else:
    config = uvicorn.Config(app, http="h11", h11_max_incomplete_event_size=DEFAULT_LIMITS.max_head_bytes, **common)
uvicorn.Server(config).run()
"""
KINDS = ("guarded", "httptools", "h11")
MIB = 1024 * 1024


def start(kind: str, certs: str = "") -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, kind, str(port), certs], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}
    )
    scheme = "https" if certs else "http"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{scheme}://127.0.0.1:{port}/livez", timeout=1, verify=False).status_code == 200:
                return proc, port
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{kind} server did not start")


def wrk(port: int, seconds: int) -> float:
    out = subprocess.run(
        ["wrk", "-t1", "-c16", f"-d{seconds}s", f"http://127.0.0.1:{port}/livez"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    m = re.search(r"Requests/sec:\s+([\d.]+)", out)
    assert m, out
    if "Non-2xx" in out or "Socket errors" in out:  # only successful answers count
        raise RuntimeError(f"errors under load on port {port}:\n{out}")
    return float(m.group(1))


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise KeyError("VmRSS")


def flood(port: int, pid: int, clients: int, head_mib: int) -> tuple[float, float, float, float]:
    """(RSS before, peak, after, seconds) in MiB under ``clients`` header blocks of ``head_mib`` MiB each."""
    before = rss_kib(pid)
    peak = [before]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_kib(pid))
            done.wait(0.02)

    def send() -> None:
        with socket.create_connection(("127.0.0.1", port)) as s:
            try:
                s.sendall(b"GET /livez HTTP/1.1\r\nHost: x\r\nX-Fill: ")
                chunk = b"a" * MIB
                for _ in range(head_mib):
                    s.sendall(chunk)
                s.sendall(b"\r\n\r\n")
                s.recv(100)
            except OSError:
                pass

    sampler = threading.Thread(target=sample)
    sampler.start()
    started = time.monotonic()
    threads = [threading.Thread(target=send) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - started
    time.sleep(1.0)
    done.set()
    sampler.join()
    return before / 1024, peak[0] / 1024, rss_kib(pid) / 1024, took


def idle_connections(port: int, pid: int, count: int) -> tuple[float, float, float]:
    """(RSS before, RSS with ``count`` TCP connections that never start TLS, after they close) in MiB."""
    before = rss_kib(pid)
    socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(count)]
    time.sleep(1.0)
    held = rss_kib(pid)
    for s in socks:
        s.close()
    time.sleep(1.0)
    return before / 1024, held / 1024, rss_kib(pid) / 1024


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--head-mib", type=int, default=16)
    ap.add_argument("--idle", type=int, default=500, help="TCP connections that never start TLS (0: skip)")
    args = ap.parse_args()
    if args.idle:
        # Not counted by the connection cap: asyncio/uvloop hand a TLS connection to the protocol only after the
        # handshake, which is bounded in time only (ssl_handshake_timeout). What does one cost meanwhile?
        from adapter.certs import write_bundle

        certs = tempfile.mkdtemp(prefix="bench-certs-")
        write_bundle(certs, "bench", "default")
        proc, port = start("guarded-tls", certs)
        try:
            before, held, after = idle_connections(port, proc.pid, args.idle)
        finally:
            proc.terminate()
            proc.wait(15)
        print(
            f"{args.idle} TCP connections that never start TLS (guarded, HTTPS): RSS {before:.0f} -> {held:.0f} "
            f"MiB ({(held - before) * 1024 / args.idle:.0f} KiB each), {after:.0f} MiB after they close\n"
        )
    servers = {kind: start(kind) for kind in KINDS}
    try:
        rates: dict[str, list[float]] = {k: [] for k in KINDS}
        for _ in range(args.rounds):
            for kind in KINDS:
                rates[kind].append(wrk(servers[kind][1], args.seconds))
        print("per round:", {k: [round(r) for r in v] for k, v in rates.items()})
        base = statistics.median(rates["httptools"])
        best_base = max(rates["httptools"])
        # On a shared machine the best round is the least disturbed one; the median shows the spread's middle.
        print(f"GET /livez, wrk -c16, {args.seconds}s x {args.rounds} rounds, alternating (req/s; ratio to httptools)")
        print("| protocol | median req/s | ratio | best req/s | ratio |")
        print("|---|---:|---:|---:|---:|")
        for kind in KINDS:
            rate, best = statistics.median(rates[kind]), max(rates[kind])
            print(f"| {kind} | {rate:.0f} | {rate / base:.2f} | {best:.0f} | {best / best_base:.2f} |")
        print(f"\n{args.clients} clients x {args.head_mib} MiB header block at once (RSS MiB)")
        print("| protocol | before | peak | after | attack took s |")
        print("|---|---:|---:|---:|---:|")
        for kind in KINDS:
            proc, port = servers[kind]
            before, peak, after, took = flood(port, proc.pid, args.clients, args.head_mib)
            print(f"| {kind} | {before:.0f} | {peak:.0f} | {after:.0f} | {took:.1f} |")
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(15)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
