"""Which inputs read load on a real vLLM: each candidate composite input across engine profiles and token mixes.

For every profile x mix (``adapter.sim.profiles``, ``adapter.sim.mix``) the knee is the largest per-pod rate at
which TTFT P99 <= 2 s and ITL P99 <= 100 ms hold (``TokenEngine.knee``, the default SLO of ``adapter.sim.slo``).
At per-pod loads of 0.1 ... 1.2 x that knee the fast model (``adapter.sim.steady``) gives each input as the
catalog would read it on a real vLLM:

* ``gpu_utilization_p90``: DCGM's duty cycle, ``100 (1 - exp(-running))`` (``adapter.sim.observer``'s model,
  without its noise; every GPU of a tensor-parallel pod reads the same);
* ``inference_queue_depth``: ``vllm:num_requests_waiting``, by Little's law the rate x the mean wait before the
  first prefill chunk;
* ``inference_latency_p99_seconds`` (e2e), ``inference_ttft_p99_seconds``, ``inference_itl_p99_seconds``:
  ``histogram_quantile(0.99, ...)`` over vLLM's own bucket bounds (``adapter.sim.vllm_families``);
* ``inference_kv_cache_usage``: ``vllm:kv_cache_usage_perc`` (0..1).

Per input it reports how monotone (Spearman rank correlation) and how linear (R^2 of a straight-line fit) the
input is in load up to the knee, whether it saturates before the knee (``adapter.calibrate.proposal``'s test: it
rises less than ``MIN_RISE`` or its slope between half the knee and the knee falls under ``SATURATION_RATIO`` of
its slope below), and what it reads at each knee. Then, per candidate composite, with ONE set of targets chosen by
one rule (``targets_for``: each term's reading at the knee of the reference ``llama3-8b-h100`` x
``azure-conversation``), what the composite reads at every profile x mix's knee: the catalog's criterion is
1.0 +- 10 % at each, without recalibration.

    python benchmarks/composite_inputs.py [--spot-check] [--write-results]

``--spot-check`` also replays the reference knee through the step-level model (``adapter.sim.engine``) and
prints the fast and step models' readings side by side (about a minute).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adapter.aggregate import normalize
from adapter.calibrate.proposal import MIN_RISE, SATURATION_RATIO
from adapter.catalog import Term, load_catalog
from adapter.sim.latency import SLO_QUANTILE, histogram_quantile
from adapter.sim.mix import MIXES, TokenMix
from adapter.sim.profiles import PROFILES, EngineProfile
from adapter.sim.slo import DEFAULT_SLO, parse_slo
from adapter.sim.steady import OperatingPoint
from adapter.sim.tokenfleet import TokenEngine
from adapter.sim.vllm_families import HISTOGRAM_BOUNDS

_F64 = npt.NDArray[np.float64]

GPU, QUEUE, E2E, TTFT, ITL, KV = (
    "gpu_utilization_p90",
    "inference_queue_depth",
    "inference_latency_p99_seconds",
    "inference_ttft_p99_seconds",
    "inference_itl_p99_seconds",
    "inference_kv_cache_usage",
)
INPUTS = (GPU, QUEUE, E2E, TTFT, ITL, KV)
SHORT = {GPU: "GPU P90", QUEUE: "queue", E2E: "e2e P99", TTFT: "TTFT P99", ITL: "ITL P99", KV: "KV usage"}
LATENCY = {E2E: "vllm:e2e_request_latency_seconds", TTFT: "vllm:time_to_first_token_seconds",
           ITL: "vllm:inter_token_latency_seconds"}  # fmt: skip
FRACTIONS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 13))
REFERENCE = ("llama3-8b-h100", "azure-conversation")
CASES: tuple[tuple[str, str], ...] = tuple((p, m) for p in PROFILES for m in MIXES)
# The catalog's overload target for the queue: a count that reads well under one request at the reference knee is
# an alarm, not a gauge of load, and keeps the target the embedded catalog gives it (what ``calibrate`` does with
# a term that reads ~0 below the knee).
QUEUE_ALARM = 8.0
TOLERANCE = 0.1  # the catalog must read 1.0 +- 10 % at each knee

# Candidates: (input, weight) per term. The embedded catalog is also scored with its literal targets.
CANDIDATES: dict[str, tuple[tuple[str, float], ...]] = {
    "a: GPU + queue + e2e P99": ((GPU, 0.4), (QUEUE, 0.3), (E2E, 0.3)),
    "b: GPU + queue + TTFT P99": ((GPU, 0.4), (QUEUE, 0.3), (TTFT, 0.3)),
    "c: GPU + queue + KV usage": ((GPU, 0.4), (QUEUE, 0.3), (KV, 0.3)),
    "d: GPU + KV usage + TTFT P99": ((GPU, 0.4), (KV, 0.3), (TTFT, 0.3)),
    "e: GPU + queue + ITL P99": ((GPU, 0.4), (QUEUE, 0.3), (ITL, 0.3)),
    "f: GPU + ITL P99 + TTFT P99": ((GPU, 0.4), (ITL, 0.3), (TTFT, 0.3)),
    "g: GPU + queue + ITL P99 + TTFT P99": ((GPU, 0.4), (QUEUE, 0.2), (ITL, 0.2), (TTFT, 0.2)),
    "h: GPU + ITL P99 + KV usage": ((GPU, 0.4), (ITL, 0.3), (KV, 0.3)),
}
# What the measurements recommend (docs/simulation.md "Which inputs read load on a real vLLM").
RECOMMENDED = "e: GPU + queue + ITL P99"
EMBEDDED = load_catalog(None).composites["llm_composite_load"].terms


@dataclass(frozen=True)
class Sweep:
    """One profile x mix: its knee and saturation (requests/s per pod) and each input at ``loads`` (x the knee);
    ``idle`` holds each input at zero load, ``saturated`` marks the loads past saturation."""

    profile: str
    mix: str
    knee_rps: float
    saturation_rps: float
    loads: tuple[float, ...]
    values: dict[str, _F64]
    idle: dict[str, float]
    saturated: tuple[bool, ...] = ()  # per load: at or above saturation, where no steady state exists

    def at_knee(self, metric: str) -> float:
        """The input's reading at the knee (load 1.0)."""
        return float(self.values[metric][self.loads.index(1.0)])

    def readings_at(self, fraction: float) -> dict[str, float]:
        """Every input at ``fraction`` x the knee (a value of ``loads``)."""
        i = self.loads.index(fraction)
        return {k: float(v[i]) for k, v in self.values.items()}


def token_engine(profile: EngineProfile, mix: TokenMix) -> TokenEngine:
    """The replay's physics for this profile and mix under the default SLO."""
    return TokenEngine(profile, mix, parse_slo(DEFAULT_SLO))


def _p99(point: OperatingPoint, metric: str) -> float:
    """``histogram_quantile(0.99)`` over vLLM's buckets of the point's sample distribution."""
    samples = {E2E: point.e2e_s, TTFT: point.ttft_s, ITL: point.itl_s}[metric]
    bounds = np.asarray(HISTOGRAM_BOUNDS[LATENCY[metric]], dtype=np.float64)
    cumulative = np.searchsorted(samples, bounds, side="right") / samples.size
    row = np.concatenate((cumulative, [1.0]))[None, :]
    return float(histogram_quantile(SLO_QUANTILE, bounds, row)[0])


def readings(point: OperatingPoint) -> dict[str, float]:
    """What the catalog reads for one pod at this operating point (module docstring)."""
    out = {
        GPU: 100.0 * (1.0 - math.exp(-point.running)),
        QUEUE: point.served * float(point.queue_s.mean()),
        KV: point.kv_usage,
    }
    out.update({m: _p99(point, m) for m in LATENCY})
    return out


def sweep(profile: str, mix: str, loads: Sequence[float] = FRACTIONS) -> Sweep:
    """Every input at ``loads`` x the knee of ``profile`` x ``mix`` (1.0 is always included)."""
    engine = token_engine(PROFILES[profile], MIXES[mix])
    model = engine.model()
    knee = engine.knee()
    grid = tuple(sorted({*loads, 1.0}))
    points = [model.at(f * knee) for f in grid]
    values = {k: np.array([readings(p)[k] for p in points]) for k in INPUTS}
    idle = readings(model.at(0.0))
    return Sweep(profile, mix, knee, model.saturation_rps, grid, values, idle, tuple(p.saturated for p in points))


@dataclass(frozen=True)
class Shape:
    """How an input follows load up to the knee."""

    spearman: float
    r2: float
    saturates: bool


def _ranks(x: _F64) -> _F64:
    """Average ranks (ties share their mean rank)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(x.size)
    ranks[order] = np.arange(x.size, dtype=np.float64)
    for v in np.unique(x):
        tie = x == v
        ranks[tie] = ranks[tie].mean()
    return ranks


def shape(s: Sweep, metric: str) -> Shape:
    """Spearman and linear R^2 of ``metric`` against load over the loads up to the knee; saturation by
    ``adapter.calibrate.proposal``'s rule (see module docstring). A constant input has Spearman and R^2 0."""
    x = np.array([f for f in s.loads if f <= 1.0])
    y = s.values[metric][: x.size]
    if np.ptp(y) <= 0:
        return Shape(0.0, 0.0, True)
    rx, ry = _ranks(x), _ranks(y)
    spearman = float(np.corrcoef(rx, ry)[0, 1])
    slope, intercept = np.polyfit(x, y, 1)
    r2 = 1.0 - float(np.sum((y - (slope * x + intercept)) ** 2)) / float(np.sum((y - y.mean()) ** 2))
    half = int(np.argmin(np.abs(x - 0.5)))
    lo = (y[half] - y[0]) / (x[half] - x[0])
    hi = (y[-1] - y[half]) / (x[-1] - x[half])
    rises = hi > 0 and hi * 0.5 >= MIN_RISE * y[-1]
    saturates = not rises or (lo > 0 and hi < SATURATION_RATIO * lo)
    return Shape(spearman, r2, bool(saturates))


def targets_for(candidate: Sequence[tuple[str, float]], reference: Sweep) -> tuple[Term, ...]:
    """The one rule for every candidate, ``calibrate``'s rule applied at the reference knee: GPU utilization is a
    ``flat`` presence term with its reading there as target; the queue, when it reads under one request there,
    is an overload alarm keeping the catalog's target (``QUEUE_ALARM``); every other term tracks load, with idle
    = its reading on the idle reference engine (0 for KV usage) and a target that makes the whole composite
    read exactly 1.0 at the reference knee (each tracking term reading the same there)."""
    fixed: list[Term] = []
    tracking: list[tuple[str, float]] = []
    for metric, weight in candidate:
        value = reference.at_knee(metric)
        if metric == GPU:
            fixed.append(Term(metric=metric, weight=weight, target=value, flat=True))
        elif metric == QUEUE and value < 1.0:
            fixed.append(Term(metric=metric, weight=weight, target=QUEUE_ALARM))
        else:
            tracking.append((metric, weight))
    total = sum(w for _, w in candidate)
    rest = total - sum(t.weight * normalize(t, reference.at_knee(t.metric)) for t in fixed)
    reads = rest / sum(w for _, w in tracking) if tracking else 1.0
    out = {t.metric: t for t in fixed}
    for metric, weight in tracking:
        idle = reference.idle[metric] if metric in LATENCY else 0.0
        target = idle + (reference.at_knee(metric) - idle) / reads
        out[metric] = Term(metric=metric, weight=weight, target=target, idle=idle)
    return tuple(out[m] for m, _ in candidate)


def composite(terms: Sequence[Term], values: Mapping[str, float]) -> float:
    """The composite's reading (``adapter.aggregate.normalize`` per term, weights as written)."""
    return sum(t.weight * normalize(t, values[t.metric]) for t in terms) / sum(t.weight for t in terms)


def at_knees(terms: Sequence[Term], sweeps: Sequence[Sweep]) -> list[float]:
    """The composite at each sweep's knee."""
    return [composite(terms, s.readings_at(1.0)) for s in sweeps]


def _case(s: Sweep) -> str:
    return f"{s.profile.replace('llama3-', '').replace('-h100', '')} × {s.mix}"


def report(sweeps: Sequence[Sweep]) -> str:
    """The markdown tables (knees, inputs, candidates)."""
    ref = next(s for s in sweeps if (s.profile, s.mix) == REFERENCE)
    lines = [
        "Knees (TTFT P99 <= 2 s and ITL P99 <= 100 ms, fast model) and saturation, requests/s per pod:",
        "",
        "| profile × mix | knee | saturation | knee / saturation |",
        "|---|---:|---:|---:|",
    ]
    for s in sweeps:
        lines.append(
            f"| {_case(s)} | {s.knee_rps:.2f} | {s.saturation_rps:.2f} | {s.knee_rps / s.saturation_rps:.2f} |"
        )
    lines += [
        "",
        "Each input up to the knee (loads 0.1 … 1.0 × the knee): worst Spearman and R² over the six profile × mix,",
        "in how many it saturates before the knee, and its reading at each knee (max ÷ min: how far one fixed",
        "target is off somewhere):",
        "",
        "| input | min Spearman | min R² | saturates | " + " | ".join(_case(s) for s in sweeps) + " | max ÷ min |",
        "|---|---:|---:|---:|" + "---:|" * (len(sweeps) + 1),
    ]
    for metric in INPUTS:
        shapes = [shape(s, metric) for s in sweeps]
        knees = [s.at_knee(metric) for s in sweeps]
        ratio = max(knees) / min(knees) if min(knees) > 0 else math.inf
        lines.append(
            f"| {SHORT[metric]} | {min(x.spearman for x in shapes):.2f} | {min(x.r2 for x in shapes):.2f} | "
            f"{sum(x.saturates for x in shapes)}/{len(shapes)} | " + " | ".join(f"{v:.3g}" for v in knees)
            + f" | {ratio:.3g} |"
        )  # fmt: skip
    lines += [
        "",
        f"Candidates, targets from the reference knee ({' × '.join(REFERENCE)}; `targets_for`),",
        f"the composite at each profile × mix's knee (1.0 ± {TOLERANCE:.0%} is the criterion):",
        "",
        "| candidate | targets | " + " | ".join(_case(s) for s in sweeps) + " | within ±10 % | spread (max − min) |",
        "|---|---|" + "---:|" * (len(sweeps) + 2),
    ]
    scored: list[tuple[str, tuple[Term, ...]]] = [("embedded catalog, its own targets", tuple(EMBEDDED))]
    scored += [(name, targets_for(c, ref)) for name, c in CANDIDATES.items()]
    for name, terms in scored:
        vals = at_knees(terms, sweeps)
        inside = sum(abs(v - 1.0) <= TOLERANCE + 1e-9 for v in vals)
        desc = ", ".join(
            f"{SHORT[t.metric]} {t.weight:g}: {t.target:.3g}" + (f" (idle {t.idle:.3g})" if t.idle else "")
            for t in terms
        )
        lines.append(
            f"| {name} | {desc} | " + " | ".join(f"{v:.2f}" for v in vals)
            + f" | {inside}/{len(vals)} | {max(vals) - min(vals):.2f} |"
        )  # fmt: skip
    best = targets_for(CANDIDATES[RECOMMENDED], ref)
    lines += [
        "",
        f"The recommended candidate ({RECOMMENDED}) against load (× each knee):",
        "",
        "| profile × mix | " + " | ".join(f"{f:g}" for f in FRACTIONS) + " |",
        "|---|" + "---:|" * len(FRACTIONS),
    ]
    for s in sweeps:
        row = [
            "saturated" if s.saturated[s.loads.index(f)] else f"{composite(best, s.readings_at(f)):.2f}"
            for f in FRACTIONS
        ]
        lines.append(f"| {_case(s)} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def spot_check(duration_s: float = 600.0) -> str:
    """The reference knee on the step-level model beside the fast model's readings."""
    from adapter.sim.engine import poisson_arrivals, run_engine

    profile, mix = PROFILES[REFERENCE[0]], MIXES[REFERENCE[1]]
    engine = token_engine(profile, mix)
    knee = engine.knee()
    fast = readings(engine.model().at(knee))
    rng = np.random.default_rng(7)
    arrival = poisson_arrivals(knee, duration_s, rng)
    p, o = mix.sample(arrival.size, rng)
    run = run_engine(profile, arrival, p, o)
    warm = arrival > 60.0
    steps = run.step_t > 60.0
    step = {
        TTFT: float(np.nanpercentile(run.ttft[warm], 99)),
        ITL: run.itl_quantile(0.99),
        E2E: float(np.nanpercentile(run.e2e[warm], 99)),
        KV: float(np.average(run.step_kv[steps], weights=run.step_dt[steps])),
        QUEUE: float(np.average(run.step_waiting[steps], weights=run.step_dt[steps])),
    }
    lines = [
        f"Spot check at the reference knee ({knee:.2f} req/s, {duration_s:g} s of Poisson arrivals, first 60 s",
        "dropped): fast model (bucketed) vs step-level model (exact)",
        "",
        "| input | fast | step |",
        "|---|---:|---:|",
    ]
    lines += [f"| {SHORT[k]} | {fast[k]:.4g} | {v:.4g} |" for k, v in step.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    from results_page import add_arguments, command_line, recording

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spot-check", action="store_true", help="also run the reference knee on the step-level model")
    add_arguments(p)
    args = p.parse_args(argv)
    command = command_line(__file__, sys.argv[1:] if argv is None else argv)
    with recording("composite_inputs", args.write_results, command, args.results_file):
        print(f"command: {command}")
        print(report([sweep(pr, mx) for pr, mx in CASES]))
        if args.spot_check:
            print()
            print(spot_check())


if __name__ == "__main__":
    main()
