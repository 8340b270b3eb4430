"""What a Prometheus scrape of the adapter's ``/metrics`` costs with a big fleet in memory.

Fills one app's Observability the way serving does: composites read for ``--pods`` pods spread over
``--workloads`` Deployments (three terms each), one real forecast fit per workload (the ForecastService is
real; its backend is an ``httpx.MockTransport`` answering each history pull with a synthetic day, since the
forecast is not what is measured here), some request and backend-query traffic. Then it times the
exposition itself and a full ``GET /metrics`` through the ASGI app, and prints size and series counts.

    .venv/bin/python benchmarks/metrics_scrape.py [--pods 1000] [--workloads 200] [--repeat 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from adapter.aggregate import CompositeValue, TermValue  # noqa: E402
from adapter.app import create_app  # noqa: E402
from adapter.catalog import load_catalog  # noqa: E402
from adapter.forecast_service import ForecastService, WorkloadKey  # noqa: E402
from adapter.observability import Observability  # noqa: E402
from adapter.query.client import PromClient  # noqa: E402
from adapter.settings import Settings  # noqa: E402

NS = "bench"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


def history_answer(request: httpx.Request) -> httpx.Response:
    """A query_range answer: one pod's request rate, a smooth daily wave, on the requested grid."""
    form = dict(x.split("=", 1) for x in request.content.decode().split("&"))
    start, end, step = float(form["start"]), float(form["end"]), float(form["step"])
    ts = np.arange(start, end + step / 2, step)
    rate = 20 + 10 * np.sin(2 * np.pi * ts / 86400)
    body = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {"namespace": NS, "pod": "w-0-abc-xyz"},
                    "values": [[float(t), repr(float(v))] for t, v in zip(ts, rate, strict=True)],
                }
            ],
        },
    }
    return httpx.Response(200, content=json.dumps(body).encode())


def fill_composites(obs: Observability, pods: int, workloads: int) -> None:
    rng = np.random.default_rng(0)
    catalog = load_catalog(None)
    terms = catalog.composites["llm_composite_load"].terms
    per = max(1, pods // workloads)
    for w in range(workloads):
        values = {}
        for i in range(per):
            raw = [float(rng.uniform(0, 100)), float(rng.integers(0, 20)), float(rng.uniform(0.1, 2))]
            parts = tuple(
                TermValue(t.metric, r, r / t.target, t.weight, t.weight * r / t.target)
                for t, r in zip(terms, raw, strict=True)
            )
            values[f"w-{w}-5d8f7b9c6-p{i:03d}"] = CompositeValue(sum(p.contribution for p in parts), 0.0, parts, ())
        obs.composite_read(NS, "llm_composite_load", values, list(values))


def fill_traffic(obs: Observability) -> None:
    for route in ("selector", "object", "discovery", "namespace_metric"):
        for version in ("v1beta1", "v1beta2"):
            for code in (200, 404, 503):
                obs.request(route, version, code, 0.004)
    for outcome in ("ok", "timeout", "http_503"):
        obs.upstream_query("prometheus", "/api/v1/query", 0.01, outcome)
        obs.upstream_query("prometheus", "/api/v1/query_range", 0.05, outcome)
    obs.unknown_metric("llm_composite_laod", "pods")


async def fit_workloads(obs: Observability, workloads: int) -> ForecastService:
    catalog = load_catalog(None)
    assert catalog.forecast is not None
    http = httpx.AsyncClient(transport=httpx.MockTransport(history_answer))
    client = PromClient("http://backend.invalid", http=http, observer=obs.upstream_query)
    service = ForecastService(catalog.forecast, catalog, client, time.time, observer=obs)
    obs.watch_forecasts(service)
    keys = [WorkloadKey(NS, (f"w-{w}",)) for w in range(workloads)]
    for key in keys:
        service.touch(key)
    await asyncio.gather(*(service.refresh(k) for k in keys))
    return service


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    app = create_app(Settings(prometheus_url="http://backend.invalid"))
    obs: Observability = app.state.observability
    fill_composites(obs, args.pods, args.workloads)
    fill_traffic(obs)
    service = await fit_workloads(obs, args.workloads)

    expose = []
    for _ in range(args.repeat):
        started = time.perf_counter()
        text = obs.exposition()
        expose.append(time.perf_counter() - started)
    scrape = []
    wire = 0
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://adapter") as c:
        for _ in range(args.repeat):
            started = time.perf_counter()
            # What Prometheus sends; the timing includes compressing (and httpx decompressing) the body.
            r = await c.get("/metrics", headers={"Accept-Encoding": "gzip"})
            scrape.append(time.perf_counter() - started)
            assert r.status_code == 200 and r.headers["content-encoding"] == "gzip"
            wire = int(r.headers["content-length"])
    await service.close()
    lines = [ln for ln in text.decode().splitlines() if ln and not ln.startswith("#")]
    families: dict[str, int] = {}
    for ln in lines:
        name = ln.split("{", 1)[0].split(" ", 1)[0]
        families[name] = families.get(name, 0) + 1
    return {
        "pods": args.pods,
        "workloads": args.workloads,
        "bytes": len(text),
        "wire": wire,
        "series": len(lines),
        "expose_ms": [1000 * x for x in expose],
        "scrape_ms": [1000 * x for x in scrape],
        "largest": sorted(families.items(), key=lambda kv: -kv[1])[:6],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pods", type=int, default=1000)
    p.add_argument("--workloads", type=int, default=200)
    p.add_argument("--repeat", type=int, default=50)
    args = p.parse_args()
    res = asyncio.run(main_async(args))
    print(
        f"/metrics with {res['pods']} pods in {res['workloads']} workloads: {res['series']} series, "
        f"{res['bytes'] / 1024:.0f} KiB ({res['bytes'] / max(res['series'], 1):.0f} B/series), "
        f"{res['wire'] / 1024:.0f} KiB gzipped on the wire"
    )
    for what in ("expose_ms", "scrape_ms"):
        xs = res[what]
        label = "exposition (memory -> text)" if what == "expose_ms" else "GET /metrics (gzip) via the ASGI app"
        print(f"  {label:36s} p50 {statistics.median(xs):7.1f} ms   p99 {pct(xs, 99):7.1f} ms")
    print("  largest families: " + ", ".join(f"{n} {c}" for n, c in res["largest"]))


if __name__ == "__main__":
    main()
