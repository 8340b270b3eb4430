"""What the HPA reads from one observation of the simulated fleet, computed as the server computes it.

``pod_values`` turns one fleet observation (``PodView``) into per-pod metric values the way the server
does: per-GPU utilization reduced to the pod's P90, loading pods without vLLM series, the latency P99s from
vLLM's histograms (the SLO guard's read 0 on a serving pod with an empty window, as their catalog PromQL does),
composites through ``adapter.aggregate.fuse`` (the server's function) and the boosted composite through
``adapter.aggregate.at_load`` (the server's rule). ``readings`` turns them into the milli-values the HPA
controller reads (``MetricReading``), rounded by the server's Quantity rule (``api.wire.milli``);
``clairvoyant_reading`` is the simulator-only reading of the clairvoyant bound.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adapter.aggregate import CompositeValue, PodValue, at_load, boost_value, fuse
from adapter.catalog import BOOSTED_SUFFIX, Catalog, CompositeDef
from adapter.errors import ConfigError
from adapter.hpa.proposals import MetricReading
from adapter.hpa.replicas import PodInfo, is_ignored
from adapter.hpa.spec import HPASpec
from adapter.quantity import milli

GPU_METRIC = "gpu_utilization_p90"
QUEUE_METRIC = "inference_queue_depth"
LATENCY_METRIC = "inference_latency_p99_seconds"
TTFT_METRIC = "inference_ttft_p99_seconds"
ITL_METRIC = "inference_itl_p99_seconds"
LATENCY_METRICS = (LATENCY_METRIC, TTFT_METRIC, ITL_METRIC)
# The SLO guard's inputs: the TTFT and ITL P99s, 0 on a serving pod that answered nothing in the window (the
# catalog's ``*_guard_seconds``), so an idle fleet still has the metric and the HPA can scale it down.
TTFT_GUARD_METRIC = "inference_ttft_p99_guard_seconds"
ITL_GUARD_METRIC = "inference_itl_p99_guard_seconds"
GUARD_METRICS = (TTFT_GUARD_METRIC, ITL_GUARD_METRIC)
# What the example HPA reads: the guard's inputs at the forecast's load (the catalog's ``forecast.also``).
BOOSTED_GUARD_METRICS = (TTFT_GUARD_METRIC + BOOSTED_SUFFIX, ITL_GUARD_METRIC + BOOSTED_SUFFIX)
# The vLLM histogram each latency metric is read from (keys of ``TokenFleet.latency_histograms``).
LATENCY_KEY = {
    LATENCY_METRIC: "e2e",
    TTFT_METRIC: "ttft",
    ITL_METRIC: "itl",
    TTFT_GUARD_METRIC: "ttft",
    ITL_GUARD_METRIC: "itl",
}
_F64 = npt.NDArray[np.float64]


class PolicyError(ConfigError):
    """A policy that cannot be simulated (unknown name, metric the simulator cannot produce, ...)."""


@dataclass(frozen=True)
class CpuModel:
    """CPU use of a vLLM pod: the API server and tokenizer only; the model runs on the GPUs.

    ``usage = idle_milli + per_rps_milli x completions/s``; ``request_milli`` is the container request the
    HPA divides by. Defaults: 4 cores requested, 0.25 core idle, +8 millicores per request/s, so a pod
    serving 40 req/s uses about 0.57 core (14 % of its request), far below any sane cpu target.
    """

    request_milli: int = 4000
    idle_milli: float = 250.0
    per_rps_milli: float = 8.0

    def __post_init__(self) -> None:
        if self.request_milli <= 0 or self.idle_milli < 0 or self.per_rps_milli < 0:
            raise ValueError("CpuModel: request must be positive, idle and per-rps usage not negative")


@dataclass(frozen=True)
class PodView:
    """What the metrics pipeline can see of the pods at one instant (arrays aligned with ``names``).

    ``serving`` is False for a pod still loading its model: it has GPU series but no vLLM series yet.
    ``gpu_util`` holds one column per GPU of the pod (percent, as dcgm-exporter prints them: integers).
    ``latency_p99`` (e2e) is NaN where no request completed in the latency window (the term is then missing);
    ``ttft_p99`` and ``itl_p99`` likewise, from vLLM's TTFT and ITL histograms (None when the fleet does not count
    them: it counts only the histograms the policy reads).
    ``running`` (vLLM's ``num_requests_running``) and ``kv_cache_usage`` (``kv_cache_usage_perc``, 0..1) are
    the non-saturating engine signals a composite may read; None when the observer does not provide them.
    """

    now: float
    names: tuple[str, ...]
    serving: npt.NDArray[np.bool_]
    gpu_util: _F64
    queue: _F64
    latency_p99: _F64
    cpu_milli: _F64
    running: _F64 | None = None
    kv_cache_usage: _F64 | None = None
    ttft_p99: _F64 | None = None
    itl_p99: _F64 | None = None


def clairvoyant_reading(peak_rps: float, pods: Sequence[PodInfo]) -> MetricReading:
    """What the clairvoyant policy's HPA reads: every pod the controller counts (not deleted, not Failed) reads
    ``peak_rps`` / their number, rounded by the server's Quantity rule, so the controller's ``ceil(n x average /
    target)`` is ``ceil(peak_rps / target)`` whatever the fleet is doing (applied when outside its tolerance).
    No pods: an empty reading (the controller's error)."""
    if not (math.isfinite(peak_rps) and peak_rps >= 0):
        raise ValueError(f"peak demand must be a finite number >= 0, got {peak_rps!r}")
    names = [p.name for p in pods if not is_ignored(p)]
    if not names:
        return MetricReading.pods({})
    value = to_milli(peak_rps / len(names))
    return MetricReading.pods(dict.fromkeys(names, value))


def gpu_p90(gpu_util: _F64) -> _F64:
    """Per-pod P90 across the pod's GPUs (rows): numpy's linear percentile, the definition
    ``adapter.aggregate.reduce_values(..., "p90")`` and PromQL ``quantile(0.9, ...)`` use."""
    # np.percentile(..., 90, axis=1, method="linear") written out: it is the simulator's hot spot.
    cols = gpu_util.shape[1]
    ordered = np.sort(gpu_util, axis=1)
    pos = 0.9 * (cols - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, cols - 1)
    out: _F64 = ordered[:, lo] + (pos - lo) * (ordered[:, hi] - ordered[:, lo])
    return out


def _values(names: Sequence[str], values: _F64, mask: npt.NDArray[np.bool_] | None = None) -> dict[str, float]:
    keep = np.isfinite(values) if mask is None else (mask & np.isfinite(values))
    return {names[int(i)]: float(values[i]) for i in np.flatnonzero(keep)}


def pod_values(metric: str, view: PodView, catalog: Catalog, boost: float = 1.0) -> dict[str, float]:
    """The value of ``metric`` for each pod that has one, as the server would compute it.

    Pods without data are absent (never 0), as in the server; the SLO guard's metrics read 0 on a serving pod
    whose latency window is empty, as their catalog PromQL does. Raises ``PolicyError`` for a metric the
    simulator does not model.
    """
    names = view.names
    if metric == GPU_METRIC:
        return _values(names, gpu_p90(view.gpu_util))
    if metric == QUEUE_METRIC:
        return _values(names, view.queue, view.serving)
    key = LATENCY_KEY.get(metric)
    if key is not None:
        values = {"e2e": view.latency_p99, "ttft": view.ttft_p99, "itl": view.itl_p99}[key]
        if values is None:
            raise PolicyError(
                f"the metric {metric!r} needs vLLM's TTFT and ITL histograms, which this fleet does not count"
            )
        if metric in GUARD_METRICS:  # an empty window (histogram_quantile's NaN) reads 0 on a serving pod
            values = np.where(np.isnan(values), 0.0, values)
        return _values(names, values, view.serving)
    boosted_base = catalog.boosted_base(metric)
    if boosted_base in catalog.metrics:  # a metric of forecast.also: the server's rule (``boost_value``)
        rule = catalog.boost_rule(metric)
        return {pod: boost_value(v, boost, *rule) for pod, v in pod_values(boosted_base, view, catalog).items()}
    if catalog.forecast is not None and metric == catalog.forecast.boosted:
        base = catalog.composites[catalog.forecast.base]
        fused = _fused(base, view, catalog)
        # The server's one rule (provider ``_at_load`` -> ``aggregate.at_load``); 1 changes nothing.
        if boost == 1.0:
            return {pod: cv.value for pod, cv in fused.items()}
        return {pod: at_load(cv, base.flat_metrics, boost, base.elasticities) for pod, cv in fused.items()}
    composite = catalog.composites.get(metric)
    if composite is not None:
        return {pod: cv.value for pod, cv in _fused(composite, view, catalog).items()}
    raise PolicyError(f"the simulator cannot produce the metric {metric!r}")


def _fused(composite: CompositeDef, view: PodView, catalog: Catalog) -> dict[str, CompositeValue]:
    """The composite per pod, term by term, as the server fuses it."""
    components: dict[str, dict[str, PodValue]] = {}
    for term in composite.terms:
        if term.metric not in components:
            raw = pod_values(term.metric, view, catalog)
            components[term.metric] = {pod: PodValue(v, view.now, 1) for pod, v in raw.items()}
    return fuse(composite.terms, components)


def to_milli(value: float) -> int:
    """``MilliValue()`` of the Quantity the server serves for ``value``: the server's own rule
    (``adapter.api.wire.milli``, Decimal, half up), so the simulated HPA reads exactly what it would."""
    return milli(value)


def readings(
    hpa: HPASpec, view: PodView, catalog: Catalog, boost: float = 1.0, cpu_window_s: float = 60.0
) -> list[MetricReading]:
    """What the HPA controller reads for each of ``hpa.spec.metrics`` from the pods in ``view``.

    Pods metrics: ``{pod: milli-value}`` for every pod the server answers for (an empty answer is the
    controller's "no metrics returned" error). Resource cpu: milli-cores per pod, as metrics-server reports.
    """
    out: list[MetricReading] = []
    for metric in hpa.metrics:
        if metric.type == "Resource" and metric.name == "cpu":
            usage = {n: to_milli(v / 1000.0) for n, v in _values(view.names, view.cpu_milli).items()}
            out.append(MetricReading.pods(usage, timestamp=view.now, window_seconds=cpu_window_s))
            continue
        if metric.type != "Pods":
            raise PolicyError(f"the simulator cannot produce {metric.describe()}")
        values = pod_values(metric.name, view, catalog, boost)
        out.append(MetricReading.pods({pod: to_milli(v) for pod, v in values.items()}))
    return out


def average_usage(reading: MetricReading) -> float | None:
    """Mean of a Pods reading's values (in the metric's unit), or None when it has none."""
    values: Mapping[str, int] | None = reading.pod_values
    if not values:
        return None
    return sum(values.values()) / len(values) / 1000.0
