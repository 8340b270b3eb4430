"""`/livez` while the biggest refresh runs: one namespace of --pods pods × 1 GPU, refreshed in the background.

The adapter (a separate process, as deployed, kube-state-metrics pod source) is asked once for
`pods/*/gpu_utilization_p90?labelSelector=app=w0`, which registers the namespace-wide store key (every pod's
value, one query per 15 s) and the namespace's pod snapshot (every pod's labels, one query per 10 s). Then, for
--seconds, `/livez` is probed every 50 ms and the same metric URL once a second. Printed: `/livez` p50 / p99 /
max (the goal: within a second at all times), the metric request's p50 / max, how many refreshes of each key
ran meanwhile and how long the last one took (the adapter's own `/metrics`), and the same `/livez` figures from
a quiet window before the key was registered (the baseline of this run).

    .venv/bin/python benchmarks/big_refresh.py [--pods 20000] [--seconds 45] [--backend prometheus]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.demo.adapter_process import AdapterProcess  # noqa: E402
from tests.support.backends import Series, start_backend  # noqa: E402

NS = "big"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def fleet(pods: int, now: float) -> list[Series]:
    """Per pod: one GPU's DCGM_FI_DEV_GPU_UTIL and its kube_pod_labels, 5 samples over the last minute."""
    ts = [now - 60 + 15 * i for i in range(5)]
    out = []
    for i in range(pods):
        pod = f"w{i % 200}-5d8f7b9c6-{i:05d}"
        out.append(
            Series(
                {
                    "__name__": "DCGM_FI_DEV_GPU_UTIL",
                    "namespace": NS,
                    "pod": pod,
                    "container": "vllm",
                    "gpu": "0",
                    "UUID": f"GPU-{i:06d}",
                    "Hostname": f"node-{i // 8}",
                },
                [(t, float(i % 100)) for t in ts],
            )
        )
        out.append(
            Series(
                {
                    "__name__": "kube_pod_labels",
                    "namespace": NS,
                    "pod": pod,
                    "job": "kube-state-metrics",
                    "label_app": f"w{i % 200}",
                },
                [(t, 1.0) for t in ts],
            )
        )
    return out


async def probe(url: str, seconds: float, every: float) -> list[float]:
    times = []
    end = time.monotonic() + seconds
    async with httpx.AsyncClient(timeout=30) as client:
        while time.monotonic() < end:
            t = time.perf_counter()
            r = await client.get(url)
            times.append((time.perf_counter() - t) * 1000)
            assert r.status_code == 200, r.text[:300]
            await asyncio.sleep(every)
    return times


def store_lines(text: str) -> list[str]:
    return [
        line
        for line in text.splitlines()
        if line.startswith(("llm_hpa_adapter_store_refresh_duration_seconds", "llm_hpa_adapter_store_events"))
    ]


async def run(adapter: str, seconds: float) -> None:
    livez = f"{adapter}/livez"
    metric = (
        f"{adapter}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{NS}/pods/%2A/gpu_utilization_p90"
        "?labelSelector=app%3Dw0"
    )
    quiet = await probe(livez, 5, 0.05)
    async with httpx.AsyncClient(timeout=60) as client:
        t = time.perf_counter()
        first = await client.get(metric)
        cold = (time.perf_counter() - t) * 1000
        assert first.status_code == 200, first.text[:300]
        items = len(first.json()["items"])
        loaded, served = await asyncio.gather(probe(livez, seconds, 0.05), probe(metric, seconds, 1.0))
        text = (await client.get(f"{adapter}/metrics")).text
    print(
        f"| `/livez` before the key (baseline) | {len(quiet)} | {pct(quiet, 50):.1f} | {pct(quiet, 99):.1f} | "
        f"{max(quiet):.0f} |"
    )
    print(
        f"| `/livez` while the namespace refreshes | {len(loaded)} | {pct(loaded, 50):.1f} | {pct(loaded, 99):.1f} | "
        f"{max(loaded):.0f} |"
    )
    print(
        f"| metric request ({items} items; first, cold: {cold:.0f} ms) | {len(served)} | {pct(served, 50):.1f} | "
        f"{pct(served, 99):.1f} | {max(served):.0f} |"
    )
    print("\nstore after the run (the adapter's /metrics):")
    for line in store_lines(text):
        print("   ", line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=20_000)
    ap.add_argument("--seconds", type=float, default=45)
    ap.add_argument("--backend", default="prometheus", choices=["prometheus", "victoriametrics"])
    args = ap.parse_args()
    backend = start_backend(args.backend)
    adapter = AdapterProcess(
        backend.url, Path(tempfile.mkdtemp(prefix="llm-hpa-big-")), extra_args=["--backend", args.backend]
    )
    try:
        backend.load(fleet(args.pods, time.time()))
        adapter.start()
        print(
            f"\n`python benchmarks/big_refresh.py {' '.join(sys.argv[1:])}` ({args.backend}, one namespace of "
            f"{args.pods} pods × 1 GPU, {args.seconds:g} s)\n"
        )
        print("| probe | requests | p50 ms | p99 ms | max ms |")
        print("|---|---:|---:|---:|---:|")
        asyncio.run(run(adapter.url, args.seconds))
    finally:
        adapter.stop()
        backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
