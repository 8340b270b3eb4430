"""Soak: hold the 1,000-HPA load for --minutes while the backend is restarted twice; report errors by phase
and the adapter's memory over time (steady, not growing, is the goal).

    .venv/bin/python benchmarks/soak.py [--minutes 10] [--pods 1000] [--workloads 200]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from load import load_fleet, rss_mib, run_wrk, warm  # noqa: E402

from adapter.demo.adapter_process import AdapterProcess  # noqa: E402
from tests.support.backends import start_backend  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--workloads", type=int, default=200)
    ap.add_argument("--namespaces", type=int, default=10)
    args = ap.parse_args()
    backend = start_backend("prometheus")
    hpas = load_fleet(backend, args.workloads, max(1, args.pods // args.workloads), args.namespaces)
    paths = [p for urls in hpas for p in urls]
    adapter = AdapterProcess(backend.url, Path(tempfile.mkdtemp(prefix="llm-hpa-soak-")))
    adapter.start()
    url, pid = adapter.url, adapter.pid or 0
    warm(url, hpas)  # every HPA's first poll: the store's keys are registered before the phases start
    phase_s = int(args.minutes * 60 / 3)
    samples: list[tuple[float, float]] = []
    stop = threading.Event()
    t0 = time.monotonic()

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.monotonic() - t0, rss_mib(pid)))
            stop.wait(10)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    phases = []
    try:
        for phase in range(3):
            if phase > 0:
                restart = threading.Timer(5.0, lambda: (backend.process.stop(), backend.process.start()))
                restart.start()  # 5 s into the phase, under load
            figures = run_wrk(url, paths, phase_s, 40, pace_ms=200)
            phases.append(figures)
    finally:
        stop.set()
        sampler.join()
        adapter.stop()
        backend.close()
    print(
        f"\n`python benchmarks/soak.py {' '.join(sys.argv[1:])}` ({args.pods} pods × 8 GPUs, {args.workloads} "
        f"workloads in {args.namespaces} namespaces, 3 URLs each, 200 req/s paced, backend restarted 5 s into "
        "phases 2 and 3)\n"
    )
    print("| phase | requests | req/s | p50 | p99 | non-2xx | socket errors |")
    print("|---|---:|---:|---:|---:|---:|---|")
    for i, f in enumerate(phases):
        label = "steady" if i == 0 else f"restart {i}"
        print(
            f"| {i + 1} ({label}) | {f['requests']} | {float(f['rps']):.0f} | {f['p50']} | {f['p99']} | "
            f"{f['non2xx']} | {f['socket_errors']} |"
        )
    print("\nRSS MiB over time: " + ", ".join(f"{t:.0f}s={r:.0f}" for t, r in samples))
    return 0


if __name__ == "__main__":
    sys.exit(main())
