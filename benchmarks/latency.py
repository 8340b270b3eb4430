"""Adapter latency against the raw-PromQL floor, measured in the same run on the same Prometheus.

For N pods × 8 GPUs it times `GET .../pods/*/gpu_utilization_p90?labelSelector=app=bench` on the adapter
(a separate process, as deployed) and the equivalent raw query a user would send Prometheus directly,
`quantile by (namespace, pod) (0.9, DCGM_FI_DEV_GPU_UTIL{namespace="…", pod=~"…"})`, alternating the two so
machine noise hits both alike, and prints p50/p99 and the ratios.

    .venv/bin/python benchmarks/latency.py [--pods 10,100,1000] [--requests 300] [--backend prometheus]
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.demo.adapter_process import AdapterProcess  # noqa: E402
from adapter.query.promql import any_of, quote  # noqa: E402
from tests.support.backends import start_backend  # noqa: E402
from tests.support.fleet_data import PodSpec, build  # noqa: E402


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def catalog_with_ttl(ttl: float) -> str:
    """A copy of the embedded catalog with another answer-cache TTL (0 = every request queries the backend)
    and the value store off: this script measures the per-request query path (benchmarks/hpa_like.py: the
    store, as HPAs see it)."""
    text = (ROOT / "adapter" / "catalog.yaml").read_text()
    text = re.sub(r"(?m)^cache_ttl_seconds: .*$", f"cache_ttl_seconds: {ttl:g}", text)
    text = re.sub(r"(?ms)^store:\n(  .*\n)+", "store: false\n", text)
    path = Path(tempfile.mkdtemp()) / "catalog.yaml"
    path.write_text(text)
    return str(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", default="10,100,1000")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--backend", default="prometheus", choices=["prometheus", "victoriametrics"])
    ap.add_argument(
        "--cache-ttl",
        type=float,
        default=0.0,
        help="answer-cache TTL for the adapter (default 0: every request reaches the backend, "
        "the honest floor comparison; the shipped catalog uses 5)",
    )
    args = ap.parse_args()
    sizes = [int(s) for s in args.pods.split(",")]

    backend = start_backend(args.backend)
    now = time.time()
    for n in sizes:
        pods = [PodSpec(f"bench-5d8f7b9c6-{i:05d}", gpus=8, layout="honor", labels={"app": "bench"}) for i in range(n)]
        backend.load(build(f"bench-{n}", pods, now, idle_gpus=0))

    adapter = AdapterProcess(
        backend.url,
        Path(tempfile.mkdtemp(prefix="llm-hpa-bench-")),
        extra_args=["--backend", args.backend, "--config", catalog_with_ttl(args.cache_ttl)],
    )
    url = adapter.url
    rows = []
    try:
        adapter.start()
        client = httpx.Client(timeout=30)
        for n in sizes:
            ns = f"bench-{n}"
            names = [f"bench-5d8f7b9c6-{i:05d}" for i in range(n)]
            raw = (
                f"quantile by (namespace, pod) (0.9, DCGM_FI_DEV_GPU_UTIL{{namespace={quote(ns)},"
                f"pod=~{quote(any_of(names))}}})"
            )
            adapter_url = f"{url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/gpu_utilization_p90"
            form = {"query": raw}
            if args.backend == "victoriametrics":
                form["nocache"] = "1"
            a_times, r_times = [], []
            for i in range(args.requests + 20):
                t0 = time.perf_counter()
                ra = client.get(adapter_url, params={"labelSelector": "app=bench"})
                t1 = time.perf_counter()
                rr = client.post(f"{backend.url}/api/v1/query", data={**form, "time": f"{time.time():.3f}"})
                t2 = time.perf_counter()
                assert ra.status_code == 200 and len(ra.json()["items"]) == n, ra.text[:300]
                assert rr.status_code == 200 and len(rr.json()["data"]["result"]) == n
                if i >= 20:  # warm-up: connections, caches
                    a_times.append((t1 - t0) * 1000)
                    r_times.append((t2 - t1) * 1000)
            rows.append((n, statistics.median(a_times), pct(a_times, 99), statistics.median(r_times), pct(r_times, 99)))
    finally:
        adapter.stop()
        backend.close()

    print(
        f"\n`{' '.join(['python', 'benchmarks/latency.py', *sys.argv[1:]])}` "
        f"({args.backend}, {args.requests} requests per size, sequential, loopback, adapter answer cache "
        f"{'off' if args.cache_ttl == 0 else f'{args.cache_ttl:g} s'}; pod membership cached 10 s)\n"
    )
    print(
        "| pods × 8 GPUs | adapter p50 ms | adapter p99 ms | raw PromQL p50 ms | raw p99 ms | p50 ratio | p99 ratio |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n, ap50, ap99, rp50, rp99 in rows:
        print(f"| {n} | {ap50:.1f} | {ap99:.1f} | {rp50:.1f} | {rp99:.1f} | {ap50 / rp50:.2f} | {ap99 / rp99:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
