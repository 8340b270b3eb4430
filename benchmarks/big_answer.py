"""How long a big backend answer stalls the adapter's event loop: the old way vs the shipped way, same run.

Part 1 (in-process, the parse alone): a valid vector answer of N series (~170 bytes each) is parsed by
``parse_vector`` three ways while a 10 ms ticker runs on the event loop; printed: the parse's wall time and the
ticker's worst lateness (= how long ``/livez`` would have waited):

- ``inline``: on the loop, one ``json.loads`` (what the adapter did before issue 11 row 8: the baseline);
- ``thread+json.loads``: in a worker thread, one ``json.loads`` (it holds the GIL for the whole document);
- ``thread+itemwise``: in a worker thread, item by item, the cyclic GC paused (``parse_vector``, shipped).

The "worst stall" includes freeing the parsed list on the loop afterwards, as the adapter does.

Part 2 (end to end): the adapter as a separate process (as deployed) behind a proxy that splices the same filler
into a real Prometheus answer; ``/livez`` is polled every 50 ms while the metric request runs; printed: the
worst ``/livez`` time and the request's time. The series bound is raised past the filler to reach the parse.

Part 3 (memory, issue 26 row 4): the adapter process behind the same proxy; 8 namespaces' requests at once,
each answer carrying ``--fan-out`` filler series (one pod's label fan-out). Printed: the process's peak RSS
(VmHWM) above its idle RSS, with the shipped bounds (the answers are refused while they stream in) and with the
bounds lifted (the baseline: every answer read and parsed), in the same run, and the ratio.

    .venv/bin/python benchmarks/big_answer.py [--series 50000,200000] [--fan-out 150000] [--only memory]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import json
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.demo.adapter_process import AdapterProcess  # noqa: E402
from adapter.query import results  # noqa: E402
from tests.support.backends import start_backend  # noqa: E402
from tests.support.fleet_data import PodSpec, build  # noqa: E402
from tests.support.shaping_proxy import ShapingProxy, filler_items  # noqa: E402


def answer(series: int) -> bytes:
    return b'{"status":"success","data":{"resultType":"vector","result":[' + filler_items(series) + b"]}}"


def old_parse(body: bytes) -> list[results.Sample]:
    """parse_vector as it was: one json.loads of the whole body, the garbage collector running."""
    saved = results.loads
    results.loads = json.loads  # type: ignore[assignment]
    try:
        return results._vector(body, 200, results.NO_LIMITS)
    finally:
        results.loads = saved  # type: ignore[assignment]


async def stall(work: Callable[[], object], threaded: bool) -> tuple[float, float]:
    worst = 0.0
    done = False

    async def ticker() -> None:
        nonlocal worst
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(0.01)
            worst = max(worst, time.perf_counter() - t - 0.01)

    tick = asyncio.create_task(ticker())
    await asyncio.sleep(0.05)
    started = time.perf_counter()
    if threaded:
        await asyncio.to_thread(work)
    else:
        work()
    elapsed = time.perf_counter() - started
    done = True
    await tick
    return elapsed, worst


def part1(sizes: list[int]) -> None:
    print("part 1: parse_vector of a big answer, event-loop stall (10 ms ticker)")
    print(f"{'series':>8} {'MB':>6} | {'way':<20} {'parse s':>8} {'worst stall s':>14} {'stall vs inline':>16}")
    for n in sizes:
        body = answer(n)
        rows = []
        for way, fn, threaded in (
            ("inline", lambda b=body: old_parse(b), False),
            ("thread+json.loads", lambda b=body: old_parse(b), True),
            ("thread+itemwise", lambda b=body: results.parse_vector(b), True),
        ):
            elapsed, worst = asyncio.run(stall(fn, threaded))
            rows.append((way, elapsed, worst))
        base = rows[0][2]
        for way, elapsed, worst in rows:
            print(f"{n:>8} {len(body) / 1e6:>6.1f} | {way:<20} {elapsed:>8.2f} {worst:>14.3f} {worst / base:>16.2f}")


def part2(series: int) -> None:
    print(f"\npart 2: adapter process, real Prometheus answer + {series} filler series, /livez polled every 50 ms")
    backend = start_backend("prometheus")
    ns, now = "bigbench", float(int(time.time()) - 30)
    pods = [PodSpec(f"web-6f7d8c9b5-b{i}", gpus=2, layout="honor", labels={"app": "web"}) for i in range(3)]
    backend.load(build(ns, pods, now))
    path = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/gpu_utilization_p90?labelSelector=app%3Dweb"
    with ShapingProxy(backend.url) as proxy:
        proxy.filler, proxy.mode, proxy.only_if = filler_items(series), "huge", "DCGM_FI_DEV_GPU_UTIL"
        proc = AdapterProcess(
            proxy.url,
            Path(tempfile.mkdtemp()),
            extra_args=["--query-timeout", "120", "--backend-max-answer-series", str(series + 1)],
        )
        proc.start()
        try:
            worst, count, stop = 0.0, 0, threading.Event()

            def poll() -> None:
                nonlocal worst, count
                with httpx.Client(timeout=60) as http:
                    while not stop.is_set():
                        t = time.perf_counter()
                        http.get(proc.url + "/livez")
                        worst, count = max(worst, time.perf_counter() - t), count + 1
                        stop.wait(0.05)

            poller = threading.Thread(target=poll)
            poller.start()
            time.sleep(0.5)
            t = time.perf_counter()
            r = httpx.get(proc.url + path, timeout=180)
            took = time.perf_counter() - t
            time.sleep(0.3)
            stop.set()
            poller.join()
            print(
                f"request: HTTP {r.status_code} in {took:.2f}s ({len(proxy.filler) / 1e6:.1f} MB filler); "
                f"/livez: {count} polls, worst {worst:.3f}s (liveness probe timeout: 3 s)"
            )
        finally:
            proc.stop()
    backend.close()


def _kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def part3(fan_out: int, loads: int = 8) -> None:
    print(f"\npart 3: adapter process, {loads} namespaces at once, each answer + {fan_out} filler series")
    backend = start_backend("prometheus")
    now = float(int(time.time()) - 30)
    names = [f"fanout{k}" for k in range(loads)]
    for ns in names:
        pods = [PodSpec(f"web-6f7d8c9b5-f{i}", gpus=2, layout="honor", labels={"app": "web"}) for i in range(2)]
        backend.load(build(ns, pods, now))
    lifted = ["--backend-max-answer-series", str(10 * fan_out), "--backend-max-parse-bytes", str(2**40)]
    rows = []
    with ShapingProxy(backend.url) as proxy:
        proxy.filler, proxy.mode, proxy.only_if = filler_items(fan_out), "huge", "DCGM_FI_DEV_GPU_UTIL"
        for label, extra in (("bounds lifted (baseline)", lifted), ("shipped bounds", [])):
            proc = AdapterProcess(proxy.url, Path(tempfile.mkdtemp()), extra_args=["--query-timeout", "120", *extra])
            proc.start()
            try:
                assert proc.pid is not None
                idle = _kib(proc.pid, "VmRSS")
                urls = [
                    f"{proc.url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/gpu_utilization_p90"
                    "?labelSelector=app%3Dweb"
                    for ns in names
                ]
                t = time.perf_counter()
                with concurrent.futures.ThreadPoolExecutor(loads) as pool:
                    codes = list(pool.map(lambda u: httpx.get(u, timeout=300).status_code, urls))
                took = time.perf_counter() - t
                peak = _kib(proc.pid, "VmHWM")
                live = httpx.get(proc.url + "/livez", timeout=10).status_code
                rows.append((label, codes, (peak - idle) / 1024, took, live))
            finally:
                proc.stop()
    backend.close()
    print(f"answer: {len(proxy.filler) / 1e6:.1f} MB of filler each")
    print(f"{'run':<26} {'HTTP codes':<22} {'peak above idle MiB':>20} {'took s':>7} {'/livez':>6}")
    for label, codes, mib, took, live in rows:
        print(f"{label:<26} {','.join(sorted({str(c) for c in codes})):<22} {mib:>20.0f} {took:>7.2f} {live:>6}")
    print(f"peak ratio, shipped / baseline: {rows[1][2] / max(rows[0][2], 1.0):.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--series", default="50000,200000")
    ap.add_argument("--fan-out", type=int, default=150_000)
    ap.add_argument("--only", choices=["stall", "memory"], default=None)
    args = ap.parse_args()
    sizes = [int(s) for s in args.series.split(",")]
    if args.only != "memory":
        part1(sizes)
        part2(max(sizes))
    if args.only != "stall":
        part3(args.fan_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
