"""Where ``calibrate`` gets its history: a running Deployment in Prometheus/VictoriaMetrics, or a simulated fleet.

Both produce a ``knee.History``: per (pod, step) the pod's load (the catalog's forecast load query, per pod),
the rate of completed requests and of those slower than the SLO (from the latency histograms' buckets:
exact when a bound is a bucket bound, linear inside the bucket otherwise, as ``histogram_quantile`` does),
and each composite term's value as the server computes it (the catalog's own queries and reductions). The
backend's history also gives what the pods saw: prompt and output tokens per second (vLLM's token counters)
and the KV-cache usage.

The SLO of a backend's history is stated either as one e2e P99 bound on one histogram (``--slo-p99``,
``--histogram``) or as TTFT / ITL / e2e P99 bounds on vLLM's own histograms (``--slo ttft=2s,itl=100ms``,
``adapter.sim.slo``): a row is over the SLO by the share of its worst bound, so a minute or a load bin breaks
the SLO when any bound's P99 does.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Sequence
from dataclasses import replace

import httpx
import numpy as np

from adapter.aggregate import attribute, reduce_values
from adapter.calibrate.knee import F64, MIN_BIN_REQUESTS, History
from adapter.catalog import Catalog, MetricDef, Reduce, Term
from adapter.labels import EVERYTHING
from adapter.query.client import Backend, PromClient
from adapter.query.promql import Scope, deployment_pods_regex, render
from adapter.query.results import RangeSeries
from adapter.sim.config import FleetConfig
from adapter.sim.slo import SloBounds
from adapter.sim.tokenfleet import TokenEngine

DEFAULT_HISTOGRAM = "vllm:e2e_request_latency_seconds"
# The histogram of each SLO bound a vLLM V1 server exports (``adapter.sim.vllm_families``, a real server's names):
# TTFT and e2e observe once per request, the inter-token latency once per output token after the first.
BOUND_HISTOGRAMS = {
    "ttft": "vllm:time_to_first_token_seconds",
    "itl": "vllm:inter_token_latency_seconds",
    "e2e": DEFAULT_HISTOGRAM,
}
PROMPT_TOKENS = "vllm:prompt_tokens_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
KV_USAGE = "vllm:kv_cache_usage_perc"
# ``calibrate --simulate``'s sweep (``knee_sweep``): SWEEP_LEVELS steady loads up to SWEEP_TOP x the engine's
# knee, so the load bins below the knee are dense whatever the knee's distance from saturation (a 70B engine's
# knee can be 0.14 x its saturation), and the knee finder has bins past the knee to confirm it. Never beyond
# SWEEP_MAX_TOP x the saturation (the sweep's top without a knee).
SWEEP_LEVELS = 48
SWEEP_TOP = 1.5
SWEEP_MAX_TOP = 1.3


@contextlib.asynccontextmanager
async def open_backend(
    url: str, *, backend: Backend = "prometheus", timeout_s: float = 30.0
) -> AsyncIterator[PromClient]:
    """The backend client, built as ``serve`` builds it (one ``PromClient`` over an ``httpx.AsyncClient``).

    The one place to plumb connection options (TLS, bearer token) for the offline commands.
    """
    async with httpx.AsyncClient() as http:
        yield PromClient(url, http=http, backend=backend, timeout_s=timeout_s)


def over_threshold(bounds: Sequence[float], cumulative: Sequence[float], threshold: float) -> float:
    """How many of a histogram's observations exceed ``threshold`` (cumulative counts per finite bound, then
    +Inf last); linear inside the bucket that holds the threshold, as Prometheus interpolates."""
    total = float(cumulative[-1])
    below_bound, below_count = 0.0, 0.0
    for le, count in zip(bounds, cumulative, strict=False):
        if threshold <= le:
            span = le - below_bound
            share = (threshold - below_bound) / span if span > 0 else 1.0
            return max(total - (below_count + share * (float(count) - below_count)), 0.0)
        below_bound, below_count = le, float(count)
    return max(total - below_count, 0.0)


def _with_window(metric: MetricDef, window: str | None) -> MetricDef:
    return replace(metric, window=window) if window is not None and metric.window is not None else metric


def _grid(series: Sequence[RangeSeries], catalog: Catalog, namespace: str) -> dict[tuple[str, float], list[float]]:
    out: dict[tuple[str, float], list[float]] = {}
    for s in series:
        key = attribute(s.labels, catalog.layouts)
        if key is None or key[0] != namespace:
            continue
        for ts, v in zip(s.ts, s.values, strict=True):
            if math.isfinite(v):
                out.setdefault((key[1], round(ts, 3)), []).append(v)
    return out


async def _per_pod(
    client: PromClient, catalog: Catalog, scope: Scope, mdef: MetricDef, start: float, end: float, step_s: float
) -> dict[tuple[str, float], list[float]]:
    """One range query of ``mdef`` for the Deployment's pods, per (pod, step)."""
    return _grid(await client.query_range(render(mdef, catalog, scope, EVERYTHING), start, end, step_s), catalog,
                 scope.namespace)  # fmt: skip


async def _buckets(
    client: PromClient, catalog: Catalog, scope: Scope, histogram: str, window: str,
    start: float, end: float, step_s: float,
) -> dict[tuple[str, float], dict[float, float]]:  # fmt: skip
    """Per (pod, step), the rate of each ``le`` bucket of ``histogram`` (summed over the pod's engines)."""
    hist_def = MetricDef(
        name="calibrate_latency_buckets",
        help="",
        query=f"sum by (<<by>>, le) (rate({histogram}_bucket{{<<matchers>>}}[<<window>>]))",
        reduce="sum",
        objects="sum",
        window=window,
    )
    buckets: dict[tuple[str, float], dict[float, float]] = {}
    for s in await client.query_range(render(hist_def, catalog, scope, EVERYTHING), start, end, step_s):
        key = attribute(s.labels, catalog.layouts)
        le_text = s.labels.get("le")
        if key is None or key[0] != scope.namespace or le_text is None:
            continue
        le = math.inf if le_text in ("+Inf", "Inf") else float(le_text)
        for ts, v in zip(s.ts, s.values, strict=True):
            if math.isfinite(v):
                per = buckets.setdefault((key[1], round(ts, 3)), {})
                per[le] = per.get(le, 0.0) + v
    return buckets


def _over(per: dict[float, float], threshold: float) -> float:
    """Observations per second above ``threshold`` in one (pod, step)'s buckets."""
    bounds = sorted(le for le in per if math.isfinite(le))
    return over_threshold(bounds, [per[le] for le in bounds] + [per[math.inf]], threshold)


def _gauge(name: str, query: str, window: str) -> MetricDef:
    return MetricDef(name=name, help="", query=query, reduce="sum", objects="sum", window=window)


async def read_history(
    client: PromClient,
    catalog: Catalog,
    terms: Sequence[Term],
    *,
    namespace: str,
    deployment: str,
    start: float,
    end: float,
    step_s: float,
    slo_s: float | None = None,
    window: str | None = None,
    histogram: str = DEFAULT_HISTOGRAM,
    slo: SloBounds | None = None,
) -> History:
    """The Deployment's history from the backend: one range query per term metric, the load, the latency
    buckets, the token counters and the KV usage.

    The SLO is either ``slo_s`` on ``histogram`` (the e2e form) or ``slo`` (the token form: each stated bound on
    vLLM's own histogram, ``BOUND_HISTOGRAMS``; requests counted by the TTFT histogram, one observation per
    request; a row's share over the SLO is its worst bound's, ITL judged per output token).
    ``window`` replaces every ``<<window>>`` (e.g. a shorter one for a compressed test); default: the catalog's.
    """
    if catalog.forecast is None:
        raise ValueError("the catalog has no forecast section: calibrate needs its load_query (per-pod load)")
    if (slo is None) == (slo_s is None):
        raise ValueError("give the SLO either as slo_s (e2e on one histogram) or as slo (TTFT/ITL/e2e bounds)")
    scope = Scope(namespace, pod_regex=deployment_pods_regex([deployment]))
    load_def = _with_window(catalog.forecast.load, window)
    win = window or load_def.window or "5m"
    if slo is None:
        assert slo_s is not None
        histograms, bounds, counted = {"e2e": histogram}, {"e2e": slo_s}, "e2e"
    else:
        bounds, counted = slo.stated, "ttft"
        histograms = {k: BOUND_HISTOGRAMS[k] for k in ("ttft", *bounds)}
    load = await _per_pod(client, catalog, scope, load_def, start, end, step_s)
    buckets = {
        k: await _buckets(client, catalog, scope, name, win, start, end, step_s) for k, name in histograms.items()
    }
    if load:
        absent = [f"{histograms[k]}_bucket" for k, b in buckets.items() if not b]
        if absent:
            raise ValueError(
                f"the Deployment's pods have load but no {', '.join(absent)} series in the history: the SLO "
                "cannot be judged (another engine's latency histogram: --slo-p99 with --histogram)"
            )
    values: dict[str, dict[tuple[str, float], float]] = {}
    for metric in dict.fromkeys(t.metric for t in terms):
        mdef = _with_window(catalog.metrics[metric], window)
        grid = await _per_pod(client, catalog, scope, mdef, start, end, step_s)
        values[metric] = {k: reduce_values(v, mdef.reduce) for k, v in grid.items()}
    seen = {
        name: await _per_pod(client, catalog, scope, mdef, start, end, step_s)
        for name, mdef in (
            ("prompt", _gauge("calibrate_prompt_tokens",
                              f"sum by (<<by>>) (rate({PROMPT_TOKENS}{{<<matchers>>}}[<<window>>]))", win)),
            ("output", _gauge("calibrate_output_tokens",
                              f"sum by (<<by>>) (rate({GENERATION_TOKENS}{{<<matchers>>}}[<<window>>]))", win)),
            ("kv", _gauge("calibrate_kv_usage",
                          f"max by (<<by>>) (avg_over_time({KV_USAGE}{{<<matchers>>}}[<<window>>]))", win)),
        )
    }  # fmt: skip
    keys = sorted(k for k in load if all(k in b and math.inf in b[k] for b in buckets.values()))
    rows_load, rows_req, rows_over = [], [], []
    for k in keys:
        requests = buckets[counted][k][math.inf]
        worst = 0.0
        for name, bound in bounds.items():
            per = buckets[name][k]
            if per[math.inf] > 0:
                worst = max(worst, _over(per, bound) / per[math.inf])
        rows_load.append(float(sum(load[k])))
        rows_req.append(requests)
        rows_over.append(requests * worst)
    term_rows = {m: np.array([v.get(k, math.nan) for k in keys], dtype=np.float64) for m, v in values.items()}

    def column(name: str, reduce: Reduce) -> F64 | None:
        grid = seen[name]
        if not grid:
            return None
        return np.array([reduce_values(grid[k], reduce) if k in grid else math.nan for k in keys], dtype=np.float64)

    per_step: dict[float, float] = {}
    for (_pod, stamp), pod_values in load.items():
        per_step[stamp] = per_step.get(stamp, 0.0) + sum(pod_values)
    total = np.array([per_step[t] for t in sorted(per_step)], dtype=np.float64)
    return History(
        load=np.array(rows_load, dtype=np.float64),
        requests=np.array(rows_req, dtype=np.float64),
        over_slo=np.array(rows_over, dtype=np.float64),
        terms=term_rows,
        deployment_load=total,
        step_s=step_s,
        prompt_tokens=column("prompt", "sum"),
        output_tokens=column("output", "sum"),
        kv_usage=column("kv", "max"),
    )


def knee_sweep(engine: TokenEngine) -> tuple[int, int, float]:
    """``(pods, levels, top)`` of ``simulated_history`` for ``engine``'s knee (``TokenEngine.knee``): SWEEP_LEVELS
    loads up to SWEEP_TOP x the knee (``top`` is a multiple of the saturation, ``simulated_history``'s unit), on
    enough pods that a load bin near half the knee holds the MIN_BIN_REQUESTS the knee finder judges (a measured
    minute per level and pod; a big model's knee can be ~1 req/s per pod)."""
    sat = engine.model().saturation_rps
    knee = engine.knee()
    top = min(SWEEP_TOP * knee / sat, SWEEP_MAX_TOP) if knee > 0 else SWEEP_MAX_TOP
    per_pod = knee if knee > 0 else sat
    pods = max(2, math.ceil(MIN_BIN_REQUESTS / (0.5 * per_pod * 60.0)))
    return pods, SWEEP_LEVELS, top


def simulated_history(
    engine: TokenEngine,
    config: FleetConfig,
    terms: Sequence[Term],
    *,
    pods: int = 2,
    levels: int = 40,
    top: float = 1.3,
    hold_s: float = 120.0,
    measure_s: float = 60.0,
    deployment_load: F64 | None = None,
    deployment_step_s: float = 60.0,
    latency_window_s: float = 120.0,
) -> History:
    """A load sweep on the fleet ``simulate`` replays (``adapter.sim.tokenfleet.TokenFleet`` of ``engine`` read
    through ``adapter.sim.observer.Observer``): ``levels`` steady loads from ``top / levels`` to ``top`` x the
    pod capacity (``config`` from ``TokenEngine.fleet_config``: the engines' saturation), each held ``hold_s``
    and measured over its last ``measure_s`` (one row per pod and level).

    One physics for calibration and simulation: the same engines, GPU duty cycle, queue and
    ``histogram_quantile(0.99)`` over ``latency_window_s`` (the catalog's latency window) that the HPA
    model reads, so the targets proposed here mean the same in ``simulate``. The requests over the SLO are the
    fleet's own accounting (exact, not read back from buckets): those of the worst stated bound, as ``simulate``
    counts them. ``deployment_load`` (e.g. a trace) feeds the growth headroom; without it the growth is 0.
    """
    from adapter.sim.lifecycle import MINUTE_S
    from adapter.sim.observer import Observer
    from adapter.sim.readings import ITL_METRIC, LATENCY_METRIC, TTFT_METRIC, CpuModel
    from adapter.sim.tokenfleet import TokenFleet

    known = {"gpu_utilization_p90", "inference_queue_depth", LATENCY_METRIC, TTFT_METRIC, ITL_METRIC}
    unknown = [t.metric for t in terms if t.metric not in known]
    if unknown:
        raise ValueError(f"the simulated fleet does not produce {unknown}; it produces {sorted(known)}")
    sync = 15.0
    if hold_s % MINUTE_S or measure_s % MINUTE_S or not 0 < measure_s <= hold_s:
        raise ValueError("hold_s and measure_s must be whole minutes, 0 < measure_s <= hold_s")
    end = levels * hold_s
    fleet = TokenFleet(engine, config, replicas=pods, start=0.0, end=end, families=True)
    observer = Observer(
        fleet,
        latency_window_s=latency_window_s,
        cpu=CpuModel(),
        sync_period_s=sync,
        seed=config.seed,
        deployment=config.deployment.name,
    )
    rows: dict[str, list[float]] = {"load": [], "req": [], "over": [], "kv": []}
    term_rows: dict[str, list[float]] = {t.metric: [] for t in terms}
    ledger = fleet.ledger
    for i in range(1, levels + 1):
        rate = top * config.capacity_rps * pods * i / levels
        level_end = i * hold_s
        while fleet.now < level_end - 1e-9:
            observer.view(fleet.now, latency=True)
            fleet.advance(min(fleet.now + sync, level_end), rate)
        view = observer.view(fleet.now, latency=True)
        first, last = int((level_end - measure_s) // MINUTE_S), int(level_end // MINUTE_S)
        done = float(ledger.completions[first:last].sum()) / pods
        over = float(ledger.over_slo[first:last].sum()) / pods
        for k in range(len(view.names)):
            if not view.serving[k]:
                continue
            rows["load"].append(done / measure_s)
            rows["req"].append(done / measure_s)
            rows["over"].append(over / measure_s)
            rows["kv"].append(float(view.kv_cache_usage[k]) if view.kv_cache_usage is not None else math.nan)
            for t in terms:
                if t.metric == "gpu_utilization_p90":
                    v = float(np.percentile(view.gpu_util[k], 90))
                elif t.metric == "inference_queue_depth":
                    v = float(view.queue[k])
                else:
                    p99 = {TTFT_METRIC: view.ttft_p99, ITL_METRIC: view.itl_p99}.get(t.metric, view.latency_p99)
                    assert p99 is not None  # a fleet with families always has them
                    v = float(p99[k])
                term_rows[t.metric].append(v)
    demand = np.asarray(deployment_load, dtype=np.float64) if deployment_load is not None else np.zeros(0)
    requests = np.array(rows["req"])
    # vLLM's token counters and KV gauge: the engine's mix, the pods' KV usage.
    return History(
        load=np.array(rows["load"]),
        requests=requests,
        over_slo=np.array(rows["over"]),
        terms={m: np.array(v, dtype=np.float64) for m, v in term_rows.items()},
        deployment_load=demand,
        step_s=measure_s,
        demand_step_s=deployment_step_s,
        prompt_tokens=requests * engine.mix.prompt_mean,
        output_tokens=requests * engine.mix.output_mean,
        kv_usage=np.array(rows["kv"]),
    )
