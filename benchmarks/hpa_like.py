"""HPA-like latency against the raw PromQL, same backend, same run: the path real HPAs take.

Each simulated HPA polls its own URL every --period seconds (15 s: the HPA controller's default sync period),
`GET …/namespaces/hpa/pods/*/gpu_utilization_p90?labelSelector=app=w<N>` over its own workload of --pods pods
× 8 GPUs, and right after each poll sends the equivalent raw PromQL a user would send the backend directly,
`quantile by (namespace, pod) (0.9, DCGM_FI_DEV_GPU_UTIL{namespace="hpa", pod=~"<its pods>"})`. The HPAs'
phases are spread over the period, as the controller's are. Pod membership comes from kube-state-metrics
series (the adapter's `prometheus` pod source); the adapter runs as a separate process, as deployed.

Printed: adapter and raw p50/p99 over the steady polls (each HPA's first poll, the one that registers its keys
in the store, is reported apart as "cold"), the backend queries per minute the adapter sent (its own
`llm_hpa_adapter_upstream_queries_total`), and `/livez` (probed every 0.2 s by the same client): its p50 is the
HTTP round-trip floor of this client and server, its max shows whether refreshes ever held up the event loop.

    .venv/bin/python benchmarks/hpa_like.py [--backend prometheus|victoriametrics] [--hpas 20] [--pods 100]
                                            [--seconds 90] [--period 15] [--no-store]
"""

from __future__ import annotations

import argparse
import asyncio
import re
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

NS = "hpa"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


def catalog_without_store() -> str:
    text = (ROOT / "adapter" / "catalog.yaml").read_text()
    text = re.sub(r"(?m)^store:\n(  .*\n)+", "store: false\n", text)
    path = Path(tempfile.mkdtemp()) / "catalog.yaml"
    path.write_text(text)
    return str(path)


def upstream_queries(metrics_text: str) -> float:
    return sum(
        float(line.split()[-1])
        for line in metrics_text.splitlines()
        if line.startswith("llm_hpa_adapter_upstream_queries_total{")
    )


async def run(
    adapter_url: str, backend_url: str, kind: str, workloads: dict[str, list[str]], seconds: float, period: float
) -> dict[str, object]:
    adapter_times: list[float] = []
    raw_times: list[float] = []
    cold: list[float] = []
    errors = 0
    livez: list[float] = []
    end = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=len(workloads) + 2)
    async with httpx.AsyncClient(timeout=30, limits=limits) as a, httpx.AsyncClient(timeout=30, limits=limits) as b:
        before = upstream_queries((await a.get(f"{adapter_url}/metrics")).text)
        started = time.monotonic()

        async def hpa(i: int, app: str, pods: list[str]) -> None:
            nonlocal errors
            url = (
                f"{adapter_url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/{NS}/pods/%2A/gpu_utilization_p90"
                f"?labelSelector=app%3D{app}"
            )
            matchers = f"namespace={quote(NS)},pod=~{quote(any_of(pods))}"
            raw = f"quantile by (namespace, pod) (0.9, DCGM_FI_DEV_GPU_UTIL{{{matchers}}})"
            form = {"query": raw}
            if kind == "victoriametrics":
                form["nocache"] = "1"  # what the adapter sends too: an answer computed now, not a cached one
            due = started + i * period / len(workloads)
            first = True
            while True:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if time.monotonic() >= end:
                    return
                t0 = time.perf_counter()
                ra = await a.get(url)
                t1 = time.perf_counter()
                rr = await b.post(f"{backend_url}/api/v1/query", data={**form, "time": f"{time.time():.3f}"})
                t2 = time.perf_counter()
                ok = ra.status_code == 200 and len(ra.json()["items"]) == len(pods)
                ok = ok and rr.status_code == 200 and len(rr.json()["data"]["result"]) == len(pods)
                if not ok:
                    errors += 1
                elif first:
                    cold.append((t1 - t0) * 1000)
                else:
                    adapter_times.append((t1 - t0) * 1000)
                    raw_times.append((t2 - t1) * 1000)
                first = False
                due += period

        async def probe() -> None:
            while time.monotonic() < end:
                t = time.perf_counter()
                await a.get(f"{adapter_url}/livez")
                livez.append((time.perf_counter() - t) * 1000)
                await asyncio.sleep(0.2)

        await asyncio.gather(probe(), *(hpa(i, app, pods) for i, (app, pods) in enumerate(workloads.items())))
        elapsed = time.monotonic() - started
        after = upstream_queries((await a.get(f"{adapter_url}/metrics")).text)
    return {
        "adapter": adapter_times,
        "raw": raw_times,
        "cold": cold,
        "errors": errors,
        "livez": livez,
        "queries_per_min": (after - before) * 60 / elapsed,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="prometheus", choices=["prometheus", "victoriametrics"])
    ap.add_argument("--hpas", type=int, default=20)
    ap.add_argument("--pods", type=int, default=100, help="pods per HPA's workload (8 GPUs each)")
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--period", type=float, default=15.0)
    ap.add_argument("--no-store", action="store_true", help="the adapter with `store: false` (a query per poll)")
    args = ap.parse_args()

    backend = start_backend(args.backend)
    workloads = {f"w{w}": [f"w{w}-5d8f7b9c6-{i:05d}" for i in range(args.pods)] for w in range(args.hpas)}
    specs = [
        PodSpec(pod, gpus=8, layout="honor", labels={"app": app}, deployment=app)
        for app, pods in workloads.items()
        for pod in pods
    ]
    backend.load(build(NS, specs, time.time(), idle_gpus=0))
    extra = ["--backend", args.backend]
    if args.no_store:
        extra += ["--config", catalog_without_store()]
    adapter = AdapterProcess(backend.url, Path(tempfile.mkdtemp(prefix="llm-hpa-bench-")), extra_args=extra)
    try:
        adapter.start()
        result = asyncio.run(run(adapter.url, backend.url, args.backend, workloads, args.seconds, args.period))
    finally:
        adapter.stop()
        backend.close()

    a, r, c = result["adapter"], result["raw"], result["cold"]
    assert isinstance(a, list) and isinstance(r, list) and isinstance(c, list)
    livez = result["livez"]
    assert isinstance(livez, list)
    print(
        f"\n`python benchmarks/hpa_like.py {' '.join(sys.argv[1:])}` ({args.backend}, {args.hpas} HPAs × "
        f"{args.pods} pods × 8 GPUs, one poll per HPA per {args.period:g} s for {args.seconds:g} s, "
        f"store {'off' if args.no_store else 'on'})\n"
    )
    print(
        "| backend | steady polls | adapter p50 ms | adapter p99 ms | raw p50 ms | raw p99 ms | p50 ratio | "
        "p99 ratio | cold first poll p50 ms | errors | adapter backend queries/min | /livez p50 / max ms |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    print(
        f"| {args.backend} | {len(a)} | {pct(a, 50):.1f} | {pct(a, 99):.1f} | {pct(r, 50):.1f} | "
        f"{pct(r, 99):.1f} | {pct(a, 50) / pct(r, 50):.2f} | {pct(a, 99) / pct(r, 99):.2f} | {pct(c, 50):.1f} | "
        f"{result['errors']} | {result['queries_per_min']:.0f} | {pct(livez, 50):.1f} / {max(livez):.0f} |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
