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

``--api external``: each HPA polls the external metric of its namespace instead,
`GET /apis/external.metrics.k8s.io/v1beta1/namespaces/team<K>/inference_queue_depth?labelSelector=job=vllm` (the
HPAs spread over --namespaces namespaces, --pods pods each), on two adapters over the same backend: the value
store on and off (direct: a backend query per request), then sends the raw PromQL of the same answer,
`sum(vllm:num_requests_waiting{namespace="team<K>",job="vllm"})`. The run is repeated for each HPA count of
--hpas (comma-separated), so each adapter's backend queries per minute can be compared across HPA counts.

    .venv/bin/python benchmarks/hpa_like.py [--backend prometheus|victoriametrics] [--hpas 20] [--pods 100]
                                            [--seconds 90] [--period 15] [--no-store]
    .venv/bin/python benchmarks/hpa_like.py --api external [--hpas 50,200] [--namespaces 10] [--pods 10]
                                            [--seconds 60] [--write-results]
"""

from __future__ import annotations

import argparse
import asyncio
import re
import shlex
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.demo.adapter_process import AdapterProcess  # noqa: E402
from adapter.query.promql import any_of, quote  # noqa: E402
from benchmarks.results_page import recording  # noqa: E402
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


EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/inference_queue_depth?labelSelector=job%3Dvllm"


async def run_external(
    adapters: dict[str, str], backend_url: str, hpas: int, namespaces: int, seconds: float, period: float
) -> dict[str, object]:
    """``hpas`` HPAs, HPA i polling namespace ``team<i % namespaces>``'s external queue on every adapter, then the
    raw query; steady polls only (each HPA's first poll, which registers its key, is left out)."""
    times: dict[str, list[float]] = {name: [] for name in [*adapters, "raw"]}
    errors = 0
    end = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=hpas + 4)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        before = {n: upstream_queries((await client.get(f"{u}/metrics")).text) for n, u in adapters.items()}
        started = time.monotonic()

        async def hpa(i: int) -> None:
            nonlocal errors
            ns = f"team{i % namespaces}"
            raw = f"sum(vllm:num_requests_waiting{{namespace={quote(ns)},job={quote('vllm')}}})"
            due = started + i * period / hpas
            first = True
            while True:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if time.monotonic() >= end:
                    return
                took: dict[str, float] = {}
                values = []
                for name, url in adapters.items():
                    t0 = time.perf_counter()
                    r = await client.get(url + EXTERNAL.format(ns=ns))
                    took[name] = (time.perf_counter() - t0) * 1000
                    items = r.json().get("items") if r.status_code == 200 else None
                    values.append(items[0]["value"] if items and len(items) == 1 else None)
                t0 = time.perf_counter()
                rr = await client.post(f"{backend_url}/api/v1/query", data={"query": raw, "time": f"{time.time():.3f}"})
                took["raw"] = (time.perf_counter() - t0) * 1000
                result = rr.json()["data"]["result"] if rr.status_code == 200 else []
                # Every adapter serves the raw query's sum (the same numbers: constant gauges).
                ok = len(result) == 1 and all(v == f"{float(result[0]['value'][1]):g}" for v in values)
                if not ok:
                    errors += 1
                elif not first:
                    for name, ms in took.items():
                        times[name].append(ms)
                first = False
                due += period

        await asyncio.gather(*(hpa(i) for i in range(hpas)))
        elapsed = time.monotonic() - started
        after = {n: upstream_queries((await client.get(f"{u}/metrics")).text) for n, u in adapters.items()}
    return {"times": times, "errors": errors, "per_min": {n: (after[n] - before[n]) * 60 / elapsed for n in adapters}}


def main_external(args: argparse.Namespace) -> int:
    counts = [int(x) for x in args.hpas.split(",")]
    command = "python benchmarks/hpa_like.py " + shlex.join(sys.argv[1:])
    backend = start_backend(args.backend)
    for k in range(args.namespaces):
        ns = f"team{k}"
        specs = [
            PodSpec(f"w{k}-5d8f7b9c6-{i:05d}", gpus=1, layout="honor", labels={"app": f"w{k}"})
            for i in range(args.pods)
        ]
        backend.load(build(ns, specs, time.time(), idle_gpus=0))
    extra = ["--backend", args.backend, "--pod-source", "prometheus"]
    stored = AdapterProcess(backend.url, Path(tempfile.mkdtemp(prefix="llm-hpa-bench-")), extra_args=extra)
    direct = AdapterProcess(
        backend.url,
        Path(tempfile.mkdtemp(prefix="llm-hpa-bench-")),
        extra_args=[*extra, "--config", catalog_without_store()],
    )
    rows = []
    try:
        stored.start()
        direct.start()
        adapters = {"store": stored.url, "direct": direct.url}
        for n in counts:
            rows.append(
                (n, asyncio.run(run_external(adapters, backend.url, n, args.namespaces, args.seconds, args.period)))
            )
    finally:
        stored.stop()
        direct.stop()
        backend.close()

    with recording("hpa_like_external", args.write_results, command):
        print(
            f"\n`{command}`\n({args.backend}; HPAs over {args.namespaces} namespaces of {args.pods} pods, each polling"
            f" its namespace's external\n`inference_queue_depth` every {args.period:g} s on each adapter for"
            f" {args.seconds:g} s; measured on a shared, busy 2-core machine)\n"
        )
        print(
            "| HPAs | steady polls | store p50 / p99 ms | direct p50 / p99 ms | raw query p50 / p99 ms | "
            "store backend queries/min | direct backend queries/min | errors |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for n, result in rows:
            t, per_min = result["times"], result["per_min"]
            assert isinstance(t, dict) and isinstance(per_min, dict)
            s, d, r = t["store"], t["direct"], t["raw"]
            print(
                f"| {n} | {len(s)} | {pct(s, 50):.1f} / {pct(s, 99):.1f} | {pct(d, 50):.1f} / {pct(d, 99):.1f} | "
                f"{pct(r, 50):.1f} / {pct(r, 99):.1f} | {per_min['store']:.0f} | {per_min['direct']:.0f} | "
                f"{result['errors']} |"
            )
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="prometheus", choices=["prometheus", "victoriametrics"])
    ap.add_argument("--api", default="custom", choices=["custom", "external"])
    ap.add_argument("--hpas", help="HPA count (default 20; external: comma-separated counts, default 50,200)")
    ap.add_argument("--namespaces", type=int, default=10, help="external: namespaces the HPAs are spread over")
    ap.add_argument(
        "--pods", type=int, help="pods per HPA's workload, 8 GPUs each (external: per namespace, default 10)"
    )
    ap.add_argument("--seconds", type=float, help="default 90 (external: 60, per HPA count)")
    ap.add_argument("--period", type=float, default=15.0)
    ap.add_argument("--no-store", action="store_true", help="the adapter with `store: false` (a query per poll)")
    ap.add_argument("--write-results", action="store_true", help="external: write the table into docs/results.md")
    args = ap.parse_args()
    external = args.api == "external"
    args.hpas = args.hpas or ("50,200" if external else "20")
    args.pods = args.pods or (10 if external else 100)
    args.seconds = args.seconds or (60.0 if external else 90.0)
    if external:
        return main_external(args)
    args.hpas = int(args.hpas)

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
