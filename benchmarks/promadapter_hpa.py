"""prometheus-adapter's rules served two ways, side by side in one run: the value store vs a query per request.

The Helm chart's default rules (``tests/promadapter/data/helm-chart-default-config.yaml``, unchanged) are served by
two adapter processes over one backend (each of --backend in turn): one with the store on (the default), one with
``store: false`` (direct mode: one backend query per request, as prometheus-adapter). Each simulated HPA polls
``…/namespaces/<ns>/pods/*/http_requests?labelSelector=app=<its app>`` every --period seconds (15 s: the HPA
controller's default sync period) on both adapters, then sends the backend the raw query prometheus-adapter renders
for that poll (``sum(rate(http_requests_total{namespace="<ns>",pod=~"<its pods>"}[5m])) by (pod)``); phases are
spread over the period. The HPAs are spread over --namespaces namespaces, and the run is repeated for each HPA
count of --hpas, so the backend queries per minute each adapter sent (``llm_hpa_adapter_upstream_queries_total``:
rule queries, pod-source queries and discovery) can be compared across HPA counts.

The backend's data size is set by --series-per-pod (label sets of ``http_requests_total`` per pod: ``method`` ×
``code`` × ``handler``, as a web server's counter has) and --history / --scrape (how many samples each series
holds), so the raw query costs what it costs in a cluster: with ``--series-per-pod 20 --history 3h --scrape 30``
each HPA's raw query reads 200 series and the rules' ``seriesQuery`` lists 42,000 at 200 HPAs.

Printed per HPA count: p50/p99 of each adapter's steady polls (the first poll of each HPA, which registers its
key, is left out) and of the raw query, the store's p50 as a fraction of the raw one and of the direct adapter's,
the store adapter's ``/livez`` p50 and the backend's health endpoint's p50 (each probed every 0.2 s by the same
client: the HTTP round-trip floor of each server), the store's p50 above its floor as a fraction of the raw query's
p50 above its own (what each server spends on the answer itself), and the queries/min.

    python benchmarks/promadapter_hpa.py [--backend prometheus,victoriametrics] [--hpas 50,200] [--seconds 45]
        [--series-per-pod 20 --history 3h --scrape 30] [--write-results]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.demo.adapter_process import AdapterProcess  # noqa: E402
from adapter.demo.servers import VictoriaMetricsProcess  # noqa: E402
from adapter.promadapter.discovery import flag_seconds  # noqa: E402
from adapter.query.promql import any_of, quote  # noqa: E402
from benchmarks.hpa_like import catalog_without_store, pct, upstream_queries  # noqa: E402
from benchmarks.results_page import command_line, recording  # noqa: E402
from tests.support.backends import Series, TestBackend, start_backend  # noqa: E402

RULES = ROOT / "tests" / "promadapter" / "data" / "helm-chart-default-config.yaml"


def workloads(hpas: int, pods: int, namespaces: int) -> dict[tuple[str, str], list[str]]:
    """(namespace, app) -> its pods, for ``hpas`` HPAs over ``namespaces`` namespaces."""
    return {(f"team{h % namespaces}", f"w{h}"): [f"w{h}-6b7c8d9f5-{i:03d}" for i in range(pods)] for h in range(hpas)}


METHODS = ("GET", "POST", "PUT", "DELETE")
CODES = ("200", "201", "404", "500", "503")


def label_sets(n: int) -> list[dict[str, str]]:
    """``n`` distinct (method, code, handler) label sets of one pod's request counter (one: no such labels)."""
    if n == 1:
        return [{}]
    return [{"method": METHODS[k % 4], "code": CODES[k // 4 % 5], "handler": f"/api/v{k // 20}"} for k in range(n)]


def series(
    loads: dict[tuple[str, str], list[str]], origin: float, first: int, last: int, per_pod: int, scrape: float
) -> Iterator[Series]:
    """The counters and kube-state-metrics' pod labels at ``origin + scrape * k`` for ``first <= k <= last``
    (each counter ``rate * (t - origin)``, so a later batch continues it), generated lazily (millions of
    samples)."""
    ts = [origin + scrape * k for k in range(first, last + 1)]
    extra = label_sets(per_pod)
    for (ns, app), pods in loads.items():
        for i, pod in enumerate(pods):
            where = {"namespace": ns, "pod": pod}
            for k, more in enumerate(extra):
                rate = (1.0 + i % 7) / per_pod * (1 + k % 3)
                labels = {"__name__": "http_requests_total", **where, **more}
                yield Series(labels, [(t, rate * (t - origin)) for t in ts])
            labels = {"__name__": "kube_pod_labels", **where, "job": "kube-state-metrics", "label_app": app}
            yield Series(labels, [(t, 1.0) for t in ts])


# Each backend's cheapest answer (its health endpoint): the HTTP round-trip floor of a raw query from this client.
HEALTH = {"prometheus": "/-/healthy", "victoriametrics": "/health"}


async def measure(
    adapters: dict[str, str],
    backend_url: str,
    backend_health: str,
    loads: dict[tuple[str, str], list[str]],
    seconds: float,
    period: float,
) -> dict[str, object]:
    times: dict[str, list[float]] = {name: [] for name in [*adapters, "raw", "livez", "health"]}
    errors = 0
    end = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=len(loads) + 4)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        before = {n: upstream_queries((await client.get(f"{u}/metrics")).text) for n, u in adapters.items()}
        started = time.monotonic()

        async def hpa(i: int, ns: str, app: str, pods: list[str]) -> None:
            nonlocal errors
            path = (
                f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/http_requests?labelSelector=app%3D{app}"
            )
            raw = f"sum(rate(http_requests_total{{namespace={quote(ns)},pod=~{quote(any_of(pods))}}}[5m])) by (pod)"
            due = started + i * period / len(loads)
            first = True
            while True:
                await asyncio.sleep(max(0.0, due - time.monotonic()))
                if time.monotonic() >= end:
                    return
                took: dict[str, float] = {}
                ok = True
                for name, url in adapters.items():
                    t0 = time.perf_counter()
                    r = await client.get(url + path)
                    took[name] = (time.perf_counter() - t0) * 1000
                    ok = ok and r.status_code == 200 and len(r.json()["items"]) == len(pods)
                t0 = time.perf_counter()
                rr = await client.post(f"{backend_url}/api/v1/query", data={"query": raw, "time": f"{time.time():.3f}"})
                took["raw"] = (time.perf_counter() - t0) * 1000
                ok = ok and rr.status_code == 200 and len(rr.json()["data"]["result"]) == len(pods)
                if not ok:
                    errors += 1
                elif not first:
                    for name, ms in took.items():
                        times[name].append(ms)
                first = False
                due += period

        async def probe() -> None:
            while time.monotonic() < end:
                t0 = time.perf_counter()
                await client.get(f"{adapters['store']}/livez")
                times["livez"].append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                await client.get(f"{backend_url}{backend_health}")
                times["health"].append((time.perf_counter() - t0) * 1000)
                await asyncio.sleep(0.2)

        await asyncio.gather(probe(), *(hpa(i, ns, app, pods) for i, ((ns, app), pods) in enumerate(loads.items())))
        elapsed = time.monotonic() - started
        after = {n: upstream_queries((await client.get(f"{u}/metrics")).text) for n, u in adapters.items()}
    per_min = {n: (after[n] - before[n]) * 60 / elapsed for n in adapters}
    return {"times": times, "errors": errors, "per_min": per_min}


# VictoriaMetrics refuses an /api/v1/series answer of more than -search.maxSeries series (30,000 by default): the
# rules' discovery of a large cluster needs it raised, as it would in production.
VM_DEFAULT_MAX_SERIES = 30_000


def vm_max_series(listed: int) -> int:
    """The ``-search.maxSeries`` the VictoriaMetrics of a run gets: its default, or twice what discovery lists."""
    return max(VM_DEFAULT_MAX_SERIES, 2 * listed)


def start(kind: str, listed: int) -> TestBackend:
    if kind != "victoriametrics":
        return start_backend(kind)
    process = VictoriaMetricsProcess(extra_args=[f"-search.maxSeries={vm_max_series(listed)}"])
    process.start()
    return TestBackend(kind, process)


def run_backend(
    kind: str, args: argparse.Namespace, counts: list[int], history: float
) -> list[tuple[int, dict[str, object]]]:
    """One backend: load it, start both adapters over it, measure each HPA count; everything stopped after."""
    largest = workloads(max(counts), args.pods, args.namespaces)
    backend = start(kind, len(largest) * args.pods * (args.series_per_pod + 1))
    t0 = time.monotonic()
    origin = time.time() - history
    steps = int(history // args.scrape)
    backend.load(series(largest, origin, 0, steps, args.series_per_pod, args.scrape))
    # Loading takes minutes: the samples of the load's own duration and of the whole run (each HPA count's
    # --seconds, plus start-up) follow, so every rate()[5m] window of the run has data. A query at time T reads
    # the samples up to T only: the ones still ahead of the clock change no answer.
    ahead = time.time() + len(counts) * (args.seconds + 60) + 120
    end = int((ahead - origin) // args.scrape)
    backend.load(series(largest, origin, steps + 1, end, args.series_per_pod, args.scrape))
    print(f"{kind}: loaded in {time.monotonic() - t0:.0f} s", file=sys.stderr)
    rules = ["--backend", kind, "--prometheus-adapter-config", str(RULES), "--pod-source", "prometheus"]
    stored = AdapterProcess(backend.url, Path(tempfile.mkdtemp(prefix="llm-hpa-bench-")), extra_args=rules)
    direct = AdapterProcess(
        backend.url,
        Path(tempfile.mkdtemp(prefix="llm-hpa-bench-")),
        extra_args=[*rules, "--config", catalog_without_store()],
    )
    rows = []
    try:
        stored.start()
        direct.start()
        adapters = {"store": stored.url, "direct": direct.url}
        for n in counts:
            loads = dict(list(largest.items())[:n])
            result = asyncio.run(measure(adapters, backend.url, HEALTH[kind], loads, args.seconds, args.period))
            rows.append((n, result))
    finally:
        stored.stop()
        direct.stop()
        backend.close()
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="prometheus,victoriametrics", help="prometheus, victoriametrics or both")
    ap.add_argument("--hpas", default="50,200", help="HPA counts, one run each (comma-separated)")
    ap.add_argument("--pods", type=int, default=10, help="pods per HPA's workload")
    ap.add_argument("--namespaces", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=45)
    ap.add_argument("--period", type=float, default=15.0)
    ap.add_argument("--series-per-pod", type=int, default=1, help="http_requests_total label sets per pod")
    ap.add_argument("--history", default="10m", help="how far back each series has samples (e.g. 3h)")
    ap.add_argument("--scrape", type=float, default=15.0, help="seconds between a series' samples")
    ap.add_argument("--write-results", action="store_true", help="write the table into docs/results.md")
    args = ap.parse_args()
    counts = [int(x) for x in args.hpas.split(",")]
    kinds = [k.strip() for k in args.backend.split(",") if k.strip()]
    command = command_line(__file__, sys.argv[1:])
    history = flag_seconds("--history", args.history)
    if args.series_per_pod < 1 or args.scrape <= 0 or history < 300:
        ap.error("--series-per-pod must be >= 1, --scrape > 0, --history >= 5m (the rules' rate window)")
    if not kinds or set(kinds) - {"prometheus", "victoriametrics"}:
        ap.error("--backend: prometheus, victoriametrics, or both comma-separated")
    listed = max(counts) * args.pods * (args.series_per_pod + 1)
    samples = listed * (int(history // args.scrape) + 1)
    results = [(kind, run_backend(kind, args, counts, history)) for kind in kinds]

    with recording("promadapter_hpa", args.write_results, command):
        print(f"command: {command}")
        print(
            f"\n`{command}`\n({', '.join(kinds)}; the Helm chart's default rules; HPAs over {args.namespaces}"
            f" namespaces, {args.pods} pods each;\n{args.series_per_pod} `http_requests_total` series per pod"
            f" ({listed:,} series, {samples:,} samples: {args.history} every {args.scrape:g} s);\none poll per HPA"
            f" per {args.period:g} s on each adapter for {args.seconds:g} s;\nVictoriaMetrics with"
            f" `-search.maxSeries={vm_max_series(listed)}`; measured on a shared, busy 2-core machine)\n"
        )
        print(
            "| backend | HPAs | steady polls | store p50 / p99 ms | direct p50 / p99 ms | raw query p50 / p99 ms | "
            "store p50 ÷ raw p50 | store p50 ÷ direct p50 | store /livez p50 ms | backend health p50 ms | "
            "above the floor: store ÷ raw | store backend queries/min | direct backend queries/min | errors |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for kind, rows in results:
            for n, result in rows:
                t = result["times"]
                per_min = result["per_min"]
                assert isinstance(t, dict) and isinstance(per_min, dict)
                s, d, r = t["store"], t["direct"], t["raw"]
                livez, health = pct(t["livez"], 50), pct(t["health"], 50)
                above = (pct(s, 50) - livez) / (pct(r, 50) - health)
                print(
                    f"| {kind} | {n} | {len(s)} | {pct(s, 50):.1f} / {pct(s, 99):.1f} | "
                    f"{pct(d, 50):.1f} / {pct(d, 99):.1f} | {pct(r, 50):.1f} / {pct(r, 99):.1f} | "
                    f"{pct(s, 50) / pct(r, 50):.2f} | {pct(s, 50) / pct(d, 50):.2f} | {livez:.1f} | {health:.1f} | "
                    f"{above:.2f} | {per_min['store']:.0f} | {per_min['direct']:.0f} | {result['errors']} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
