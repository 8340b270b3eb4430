"""Sustained load, a burst, memory and how cost grows — the adapter as deployed (a separate process).

1,000 HPAs polling every 15 s with three metrics each is 200 requests/s offered. This script
  1. loads N pods × 8 GPUs in W workloads (5 pods each by default) into a real Prometheus;
  2. runs `wrk` (Debian package) over the 3 × W distinct HPA URLs (pods/* with the workload's selector:
     llm_composite_load_boosted, gpu_utilization_p90, inference_queue_depth) for --seconds, reporting
     throughput, latency percentiles and errors (wrk drives as fast as the adapter answers, so the
     throughput is the capacity to compare with the 200 req/s needed);
  3. fires a burst of 200 concurrent requests and reports p50/p99/errors;
  4. samples the adapter's RSS (/proc/PID/status) before, during and after.

    .venv/bin/python benchmarks/load.py [--pods 1000] [--workloads 200] [--seconds 60] [--connections 64]
    .venv/bin/python benchmarks/load.py --scaling 10,100,1000,5000 --seconds 20   # how cost grows
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.devservers import AdapterProcess  # noqa: E402
from tests.support.backends import start_backend  # noqa: E402
from tests.support.fleet_data import PodSpec, build  # noqa: E402

METRICS = ("llm_composite_load_boosted", "gpu_utilization_p90", "inference_queue_depth")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def start_adapter(prom_url: str) -> AdapterProcess:
    """The adapter as deployed: its own process, plain HTTP, pods from kube-state-metrics series."""
    adapter = AdapterProcess(prom_url, Path(tempfile.mkdtemp(prefix="llm-hpa-bench-")))
    adapter.start()
    return adapter


def load_fleet(backend, pods: int, workloads: int, ns: str) -> list[str]:
    now = time.time()
    specs = [PodSpec(f"w{i % workloads}-5d8f7b9c6-{i:05d}", gpus=8, layout="honor",
                     labels={"app": f"w{i % workloads}"}, deployment=f"w{i % workloads}") for i in range(pods)]
    backend.load(build(ns, specs, now, idle_gpus=0))
    return [f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/{m}?labelSelector=app%3Dw{w}"
            for w in range(workloads) for m in METRICS]


def run_wrk(url: str, paths: list[str], seconds: int, connections: int,
            pace_ms: float | None = None) -> dict[str, str]:
    """wrk over ``paths``; with ``pace_ms`` every connection waits that long between requests (wrk's Lua
    delay()), so ``connections`` HPA-like clients offer ``connections * 1000 / pace_ms`` requests/s."""
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write("paths = {" + ",".join(f'"{p}"' for p in paths) + "}\n"
                 "counter = 0\n"
                 "request = function()\n  counter = counter + 1\n"
                 "  return wrk.format('GET', paths[(counter % #paths) + 1])\nend\n")
        if pace_ms is not None:
            fh.write(f"delay = function()\n  return {pace_ms:.0f}\nend\n")
        script = fh.name
    out = subprocess.run(["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", script, url],
                         capture_output=True, text=True, timeout=seconds + 60).stdout
    os.unlink(script)
    figures = {"raw": out}
    for key, pattern in {"rps": r"Requests/sec:\s+([\d.]+)", "p50": r"\s50%\s+(\S+)", "p90": r"\s90%\s+(\S+)",
                         "p99": r"\s99%\s+(\S+)", "requests": r"(\d+) requests in",
                         "non2xx": r"Non-2xx or 3xx responses: (\d+)", "socket_errors": r"Socket errors: (.*)"}.items():
        m = re.search(pattern, out)
        figures[key] = m.group(1) if m else "0"
    return figures


async def burst(url: str, paths: list[str], n: int) -> tuple[float, float, int]:
    async with httpx.AsyncClient(limits=httpx.Limits(max_connections=n), timeout=60) as client:
        async def one(i: int) -> tuple[float, int]:
            t = time.perf_counter()
            r = await client.get(url + paths[i % len(paths)])
            return (time.perf_counter() - t) * 1000, r.status_code
        results = await asyncio.gather(*(one(i) for i in range(n)))
    times = sorted(t for t, _ in results)
    return statistics.median(times), times[int(0.99 * (len(times) - 1))], sum(1 for _, c in results if c != 200)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--workloads", type=int, default=200)
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--connections", type=int, default=64)
    ap.add_argument("--scaling", default="", help="comma-separated pod counts: run the wrk phase per size")
    args = ap.parse_args()
    if shutil.which("wrk") is None:
        print("wrk is not installed (Debian package wrk)")
        return 2
    backend = start_backend("prometheus")
    try:
        sizes = [int(s) for s in args.scaling.split(",")] if args.scaling else [args.pods]
        rows = []
        for n in sizes:
            workloads = max(1, min(args.workloads, n // 5)) if args.scaling else args.workloads
            paths = load_fleet(backend, n, workloads, f"load-{n}")
            adapter = start_adapter(backend.url)
            url, pid = adapter.url, adapter.pid or 0
            try:
                for p in paths[:50]:  # warm: pod membership caches, connections
                    httpx.get(url + p, timeout=60)
                rss0 = rss_mib(pid)
                # 1,000 HPAs x 3 metrics / 15 s = 200 req/s: 40 connections, each one request per 200 ms.
                p = run_wrk(url, paths, args.seconds, 40, pace_ms=200)
                w = run_wrk(url, paths, args.seconds, args.connections)
                rss1 = rss_mib(pid)
                b50, b99, berr = asyncio.run(burst(url, paths, 200))
                rss2 = rss_mib(pid)
                rows.append((n, workloads, p, w, (b50, b99, berr), (rss0, rss1, rss2)))
            finally:
                adapter.stop()
    finally:
        backend.close()
    print(f"\n`python benchmarks/load.py {' '.join(sys.argv[1:])}` (wrk -t2 -c{args.connections} "
          f"-d{args.seconds}s, plain HTTP, one adapter process, loopback)\n")
    print("| pods × 8 GPUs | workloads | 200 req/s paced (1,000 HPAs): p50 / p99, errors | wrk capacity req/s | "
          "wrk p50 / p99 | wrk errors | burst 200: p50 / p99 ms, errors | RSS MiB start / after wrk / after burst |")
    print("|---:|---:|---|---:|---|---|---|---|")
    for n, wl, p, w, (b50, b99, berr), (r0, r1, r2) in rows:
        sock = "" if w["socket_errors"] == "0" else ", socket: " + w["socket_errors"]
        psock = "" if p["socket_errors"] == "0" else ", socket: " + p["socket_errors"]
        print(f"| {n} | {wl} | {p['p50']} / {p['p99']}, {p['non2xx']} non-2xx{psock} "
              f"({float(p['rps']):.0f} req/s) | "
              f"{float(w['rps']):.0f} | {w['p50']} / {w['p99']} | {w['non2xx']} non-2xx{sock} | "
              f"{b50:.0f} / {b99:.0f}, {berr} | {r0:.0f} / {r1:.0f} / {r2:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
