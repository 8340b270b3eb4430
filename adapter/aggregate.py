"""Pure numerics: per-series samples → per-pod values → composite → per-object values.

No I/O, no clock, no event loop: every function here is a plain function over small frozen values, so the
rules that decide what the HPA sees are tested directly.

Rules (documented in the README):
- a series is attributed to a pod by the first catalog layout whose pod label is non-empty; others are ignored;
- non-finite samples (NaN, ±Inf) are dropped before reduction; a pod left with no sample is omitted, never 0;
- ``p90`` is numpy's linear-interpolation percentile, the same definition as PromQL ``quantile(0.9, ...)``;
- a composite term reads ``max(value - idle, 0) / (target - idle)``; weights are never rescaled, so 1.0 keeps
  meaning "at the last safe operating point" whichever terms a pod has;
- a pod without data for a term gets no composite (``when_missing: omit_pod``, the default: a made-up or
  re-weighted number would be a different metric), unless the term says ``when_missing: idle`` (it then
  reads 0: a latency histogram with no finished request in the window means no latency load);
- a term with ``omit_pod`` that has no data for *any* pod in scope while other terms do is a partial answer
  (an exporter missing, a broken query): ``unservable_terms`` names it and the caller answers 503.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from adapter.query.results import Sample
from adapter.settings import Combine, Layout, Reduce, Term

PodKey = tuple[str, str]  # (namespace, pod)


@dataclass(frozen=True, slots=True)
class PodValue:
    """A pod's value for one metric, the newest sample timestamp behind it, and how many series fed it."""

    value: float
    ts: float
    series: int


@dataclass(frozen=True, slots=True)
class TermValue:
    metric: str
    raw: float          # the metric's value for the pod
    normalized: float   # (raw - idle) / (target - idle)
    weight: float       # its share of the composite's weights
    contribution: float # weight * normalized


@dataclass(frozen=True, slots=True)
class CompositeValue:
    value: float
    ts: float
    terms: tuple[TermValue, ...]
    missing: tuple[str, ...]  # metrics of the composite with no data for this pod


def attribute(labels: Mapping[str, str], layouts: Sequence[Layout]) -> PodKey | None:
    """(namespace, pod) a series belongs to, or None when no layout names a pod (e.g. an idle GPU)."""
    for lay in layouts:
        pod = labels.get(lay.pod)
        if pod:
            ns = labels.get(lay.namespace)
            return (ns, pod) if ns else None
    return None


def reduce_values(values: Sequence[float], how: Reduce) -> float:
    """Reduce the finite values of one pod's series (non-empty) to the pod's value."""
    if how == "any_nonzero":
        return 1.0 if any(v != 0 for v in values) else 0.0
    if len(values) == 1:  # the common case once the backend has reduced across GPUs: no numpy round-trip
        return float(values[0])
    arr = np.asarray(values, dtype=float)
    if how == "p90":
        return float(np.percentile(arr, 90))
    if how == "sum":
        return float(arr.sum())
    if how == "max":
        return float(arr.max())
    if how == "min":
        return float(arr.min())
    if how == "mean":
        return float(arr.mean())
    raise ValueError(f"unknown reduction {how!r}")


def group_by_pod(samples: Iterable[Sample], layouts: Sequence[Layout], namespace: str,
                 pods: Collection[str] | None) -> dict[str, list[Sample]]:
    """The finite samples of each pod of ``namespace`` (restricted to ``pods`` when given)."""
    out: dict[str, list[Sample]] = {}
    for s in samples:
        if not math.isfinite(s.value):
            continue
        key = attribute(s.labels, layouts)
        if key is None or key[0] != namespace or (pods is not None and key[1] not in pods):
            continue
        out.setdefault(key[1], []).append(s)
    return out


def reduce_by_pod(samples: Iterable[Sample], layouts: Sequence[Layout], how: Reduce, namespace: str,
                  pods: Collection[str] | None = None) -> dict[str, PodValue]:
    """Per-pod values of one metric; pods without a finite sample are absent."""
    out = {}
    for pod, group in group_by_pod(samples, layouts, namespace, pods).items():
        value = reduce_values([s.value for s in group], how)
        if math.isfinite(value):
            out[pod] = PodValue(value=value, ts=max(s.ts for s in group), series=len(group))
    return out


def normalize(term: Term, value: float) -> float:
    """A term's reading: 0 at its idle value, 1 at its target, linear in between and beyond."""
    return max(value - term.idle, 0.0) / (term.target - term.idle)


def fuse(terms: Sequence[Term], components: Mapping[str, Mapping[str, PodValue]]) -> dict[str, CompositeValue]:
    """The composite per pod: Σ wᵢ·normalize(vᵢ) / Σ wᵢ over all terms (weights as written, summing to 1 in
    the shipped catalog). A pod lacking an ``omit_pod`` term is absent; a lacking ``idle`` term reads 0."""
    pods = sorted({pod for t in terms for pod in components.get(t.metric, {})})
    total_w = sum(t.weight for t in terms)
    out = {}
    for pod in pods:
        present = [(t, components[t.metric][pod]) for t in terms if pod in components.get(t.metric, {})]
        missing = tuple(t.metric for t in terms if pod not in components.get(t.metric, {}))
        if any(t.when_missing == "omit_pod" for t in terms if t.metric in missing):
            continue
        parts = []
        for t, pv in present:
            w = t.weight / total_w
            norm = normalize(t, pv.value)
            parts.append(TermValue(t.metric, pv.value, norm, w, w * norm))
        value = sum(p.contribution for p in parts)
        if not math.isfinite(value):
            continue
        out[pod] = CompositeValue(value=value, ts=max(pv.ts for _, pv in present), terms=tuple(parts),
                                  missing=missing)
    return out


def unservable_terms(terms: Sequence[Term], components: Mapping[str, Mapping[str, PodValue]]) -> list[str]:
    """The ``omit_pod`` terms with no data for any pod while some other term has data for some pod.

    Such an answer is partial (dcgm-exporter not scraped, a renamed engine metric): serving the pods it
    leaves would be nothing (every pod omitted) and serving a re-weighted value would be a different metric,
    so the caller reports these terms as unavailable (503). No data at all is no workload, not an outage.
    """
    if not any(components.get(t.metric) for t in terms):
        return []
    return [t.metric for t in terms if t.when_missing == "omit_pod" and not components.get(t.metric)]


def combine(values: Sequence[float], how: Combine) -> float:
    """Combine per-pod values into one object value (Deployment, namespace)."""
    if not values:
        raise ValueError("combine() needs at least one value")
    arr = np.asarray(values, dtype=float)
    if how == "mean":
        return float(arr.mean())
    if how == "sum":
        return float(arr.sum())
    if how == "max":
        return float(arr.max())
    raise ValueError(f"unknown combination {how!r}")
