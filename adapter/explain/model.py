"""What ``explain`` answers: frozen dataclasses, from one GPU sample up to the whole ``Explanation``.

``Explanation.to_json()`` is the stable machine form (the HTTP endpoint's JSON, the CLI's ``--json``).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class GpuSample:
    """One raw per-GPU series of a pod: the labels naming the GPU and its value."""

    gpu: dict[str, str]
    value: float


@dataclass(frozen=True)
class TermExplanation:
    """One metric of the pod (a composite's term, or the metric itself)."""

    metric: str
    value: float | None  # the pod's value as the provider computed it; None = no data
    target: float | None = None  # composite terms only
    weight: float | None = None  # its share of the composite's weights
    normalized: float | None = None  # (value - idle) / (target - idle)
    contribution: float | None = None  # weight x normalized
    gpu_samples: list[GpuSample] = field(default_factory=list)
    gpu_p90: float | None = None  # numpy P90 of the raw samples: checks the backend's reduction
    missing: str | None = None


@dataclass(frozen=True)
class PodExplanation:
    """Everything about one pod, ending in the value the HPA receives for it."""

    pod: str
    terms: list[TermExplanation]
    value: float | None  # the base value (composite or metric) before any boost
    boost: float
    served: float | None  # what the API serves for this pod; None = the pod is omitted
    quantity: str | None  # the served value as the wire shows it
    missing: list[str]


@dataclass(frozen=True)
class ForecastExplanation:
    """The workload's forecast as the adapter holds it, and the boost it yields now."""

    workload: str
    model: str
    reason: str  # ok, pending, stale, or why the boost is 1
    boost: float
    current_load: float | None
    forecast: list[float] | None
    peak: float | None
    step_ts: float | None
    rise: float = 0.0  # the boost is at least 1 + rise (forecast.rise_quantile of the load's own rises)


@dataclass(frozen=True)
class HPAMetricExplanation:
    """One ``spec.metrics`` entry the adapter serves: what the HPA reads from it and the replicas it proposes."""

    metric: str  # the entry, e.g. ``Pods/llm_composite_load_boosted``
    target: str  # e.g. ``AverageValue 1.8``
    usage: str | None  # the usage as the HPA computes it (a Quantity); None = no valid reading
    replicas: int | None  # this entry's proposal; None = invalid (``error`` says why)
    error: str | None = None


@dataclass(frozen=True)
class HPAExplanation:
    """What the HPA controller would do with these values (``adapter.hpa``, a fresh controller).

    Every ``spec.metrics`` entry the adapter serves for this workload is read (a Pods metric, the Deployment's
    Object metric, an External metric whose selector pins the Deployment) and run through the controller
    together, as the HPA does: the largest proposal wins (``decided_by``)."""

    name: str
    metrics: list[str]  # the spec.metrics entries explained (served by this adapter for this workload)
    ignored: list[str]  # the other entries (not explained: their values are not ours)
    current_replicas: int
    usage: str | None  # the explained metric's usage as the HPA computes it (a Quantity)
    metric_replicas: int | None  # the replica formula's proposal: the largest over the explained entries
    desired_replicas: int | None  # after min/max, stabilization and rate limits
    reason: str
    error: str | None = None
    proposals: list[HPAMetricExplanation] = field(default_factory=list)  # one per explained entry
    decided_by: str | None = None  # the entry whose proposal won (one of ``metrics``)


@dataclass(frozen=True)
class Explanation:
    """The whole answer; ``to_json()`` is its stable machine form."""

    namespace: str
    metric: str
    base_metric: str
    selector: str | None
    deployment: str | None
    pods: list[PodExplanation]
    queries: dict[str, str]  # metric -> the PromQL the provider sent
    raw_queries: dict[str, str]  # metric -> the raw per-GPU query explain sent
    object_value: float | None = None  # the Deployment's value (Object metric), when a Deployment is named
    object_quantity: str | None = None
    forecast: ForecastExplanation | None = None
    hpa: HPAExplanation | None = None
    problems: list[str] = field(default_factory=list)
    data_age_s: float | None = None  # age of the served values (the value store's data), None = not stored
    # The weight share of the boosted composite's flat terms, which the boost raises only up to their target
    # (aggregate.at_load); 0 for any other metric.
    boost_flat_share: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict; non-finite numbers become null."""
        return _clean(dataclasses.asdict(self))  # type: ignore[no-any-return]


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj
