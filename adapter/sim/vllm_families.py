"""vLLM's metric families as a V1 engine exports them, for simulated token-level engines.

``render_vllm`` writes Prometheus text exposition for a set of engines: the latency histograms operators scale
and alert on (``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
``vllm:e2e_request_latency_seconds``, ``vllm:request_queue_time_seconds``, ``vllm:request_prefill_time_seconds``,
``vllm:request_decode_time_seconds``), the token counters, the preemption counter, the running / waiting /
KV-usage gauges and ``vllm:request_success_total`` by ``finished_reason``. Names, types, label names (``engine``,
``model_name``) and bucket bounds are those of a real vLLM V1 server (``tests/data/samples/vllm.prom``;
``tests/sim/test_vllm_families.py`` compares them). The intervals are vLLM's (vllm/v1/metrics/stats.py): queue
from arrival to first scheduled, prefill from first scheduled to first token, decode from first token to last;
preemptions inside an interval count in it. Pure.

``EngineCounters`` is what one engine has accumulated; ``TokenFleet.engine_counters()`` gives one per pod.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adapter.exposition import label_pairs
from adapter.sim.config import VLLM_E2E_LATENCY_BUCKETS

_F64 = npt.NDArray[np.float64]

# Bucket upper bounds (seconds; +Inf implicit) of a vLLM V1 server, as in tests/data/samples/vllm.prom.
TTFT_BUCKETS: tuple[float, ...] = (
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
    80.0, 160.0, 640.0, 2560.0,
)  # fmt: skip
ITL_BUCKETS: tuple[float, ...] = (
    0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
)  # fmt: skip
REQUEST_TIME_BUCKETS = VLLM_E2E_LATENCY_BUCKETS  # e2e, queue, prefill, decode and inference time share them
FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")

_HELP = {
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "vllm:num_preemptions_total": "Cumulative number of preemption from the engine.",
    "vllm:prompt_tokens_total": "Number of prefill tokens processed.",
    "vllm:generation_tokens_total": "Number of generation tokens processed.",
    "vllm:request_success_total": "Count of successfully processed requests.",
    "vllm:time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    "vllm:inter_token_latency_seconds": "Histogram of inter-token latency in seconds.",
    "vllm:e2e_request_latency_seconds": "Histogram of e2e request latency in seconds.",
    "vllm:request_queue_time_seconds": "Histogram of time spent in WAITING phase for request.",
    "vllm:request_prefill_time_seconds": "Histogram of time spent in PREFILL phase for request.",
    "vllm:request_decode_time_seconds": "Histogram of time spent in DECODE phase for request.",
}
HISTOGRAM_BOUNDS: dict[str, tuple[float, ...]] = {
    "vllm:time_to_first_token_seconds": TTFT_BUCKETS,
    "vllm:inter_token_latency_seconds": ITL_BUCKETS,
    "vllm:e2e_request_latency_seconds": REQUEST_TIME_BUCKETS,
    "vllm:request_queue_time_seconds": REQUEST_TIME_BUCKETS,
    "vllm:request_prefill_time_seconds": REQUEST_TIME_BUCKETS,
    "vllm:request_decode_time_seconds": REQUEST_TIME_BUCKETS,
}


@dataclass(frozen=True)
class EngineCounters:
    """One engine's gauges now and what it accumulated since it started.

    ``histograms`` maps a family of ``HISTOGRAM_BOUNDS`` to (cumulative counts per bound then +Inf, sum);
    counts may be fractional (a fluid model's expected counts).
    """

    running: float
    waiting: float
    kv_cache_usage: float
    preemptions: float
    prompt_tokens: float
    generation_tokens: float
    success: float
    histograms: dict[str, tuple[_F64, float]]


def _number(value: float) -> str:
    return repr(float(value))


def _labels(pairs: Sequence[tuple[str, str]]) -> str:
    return "{" + label_pairs(pairs) + "}"  # values escaped: a model name may hold quotes or backslashes


def render_vllm(
    engines: Sequence[tuple[Sequence[tuple[str, str]], EngineCounters]], *, model_name: str, engine: str = "0"
) -> str:
    """Text exposition of every engine's families. Each engine's series carry its own labels (e.g. the pod's,
    for a target standing in for many pods) followed by ``engine`` and ``model_name``, as vLLM orders them."""
    out: list[str] = []

    def family(name: str, kind: str) -> None:
        out.append(f"# HELP {name} {_HELP[name]}")
        out.append(f"# TYPE {name} {kind}")

    def own(extra: Sequence[tuple[str, str]], *more: tuple[str, str]) -> list[tuple[str, str]]:
        return [*extra, ("engine", engine), *more, ("model_name", model_name)]

    scalars = (
        ("vllm:num_requests_running", "gauge", "running"),
        ("vllm:num_requests_waiting", "gauge", "waiting"),
        ("vllm:kv_cache_usage_perc", "gauge", "kv_cache_usage"),
        ("vllm:num_preemptions_total", "counter", "preemptions"),
        ("vllm:prompt_tokens_total", "counter", "prompt_tokens"),
        ("vllm:generation_tokens_total", "counter", "generation_tokens"),
    )
    for name, kind, field in scalars:
        family(name, kind)
        for extra, counters in engines:
            out.append(f"{name}{_labels(own(extra))} {_number(getattr(counters, field))}")
    family("vllm:request_success_total", "counter")
    for extra, counters in engines:
        for reason in FINISHED_REASONS:
            value = counters.success if reason == "stop" else 0.0
            out.append(f"vllm:request_success_total{_labels(own(extra, ('finished_reason', reason)))} {_number(value)}")
    for name, bounds in HISTOGRAM_BOUNDS.items():
        family(name, "histogram")
        for extra, counters in engines:
            cumulative, total = counters.histograms.get(name, (np.zeros(len(bounds) + 1), 0.0))
            labels = own(extra)
            for le, count in zip((*(_number(b) for b in bounds), "+Inf"), cumulative, strict=True):
                out.append(f"{name}_bucket{_labels([*labels[:-1], ('le', le), labels[-1]])} {_number(count)}")
            out.append(f"{name}_count{_labels(labels)} {_number(cumulative[-1])}")
            out.append(f"{name}_sum{_labels(labels)} {_number(total)}")
    return "\n".join(out) + "\n"
