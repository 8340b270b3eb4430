"""Pure numerics: per-series samples → per-pod values → composite → per-object values.

No I/O, no clock, no event loop: every function here is a plain function over small frozen values, so the
rules that decide what the HPA sees are tested directly.

Rules (documented in the README):
- a series is attributed to a pod by the first catalog layout whose pod label is non-empty; others are ignored;
- non-finite samples (NaN, ±Inf) are dropped before reduction; a pod left with no sample is omitted, never 0;
- ``p90`` is numpy's linear-interpolation percentile, the same definition as PromQL ``quantile(0.9, ...)``;
- a composite rescales the weights of the terms that have data to sum to 1; no term → the pod is omitted.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from adapter.samples import Sample
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
    normalized: float   # raw / target
    weight: float       # the weight after rescaling over the terms present
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


def fuse(terms: Sequence[Term], components: Mapping[str, Mapping[str, PodValue]]) -> dict[str, CompositeValue]:
    """The composite per pod: Σ wᵢ·(vᵢ/targetᵢ) over the terms with data, weights rescaled to sum to 1."""
    pods = sorted({pod for t in terms for pod in components.get(t.metric, {})})
    out = {}
    for pod in pods:
        present = [(t, components[t.metric][pod]) for t in terms if pod in components.get(t.metric, {})]
        total_w = sum(t.weight for t, _ in present)
        parts = []
        for t, pv in present:
            w = t.weight / total_w
            norm = pv.value / t.target
            parts.append(TermValue(t.metric, pv.value, norm, w, w * norm))
        value = sum(p.contribution for p in parts)
        if not math.isfinite(value):
            continue
        missing = tuple(t.metric for t in terms if pod not in components.get(t.metric, {}))
        out[pod] = CompositeValue(value=value, ts=max(pv.ts for _, pv in present), terms=tuple(parts),
                                  missing=missing)
    return out


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
