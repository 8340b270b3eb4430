"""Pure numerics: per-series samples → per-pod values → composite → per-object values.

No I/O, no clock, no event loop: every function here is a plain function over small frozen values, so the
rules that decide what the HPA sees are tested directly.

Rules (documented in docs/metrics.md, "The rules"):
- a series is attributed to a pod by the first catalog layout whose pod label is non-empty and whose trust
  rules accept the series' target labels; a layout that does not trust the series is skipped (and the
  series counted as ``untrusted``); others are ignored;
- non-finite samples (NaN, ±Inf) are dropped before reduction; a pod left with no sample is omitted, never 0;
- for a metric that cannot be negative, a negative sample is dropped (counted as ``negative``), never clamped;
- a pod with a sample no HPA can read (|value| beyond an int64 milli-value, or a timestamp that is not a
  time between 1970 and 9999) is omitted whole (counted), so one bad series never fails the whole list;
- ``p90`` is numpy's linear-interpolation percentile, the same definition as PromQL ``quantile(0.9, ...)``;
- a composite term reads ``max(value - idle, 0) / (target - idle)``; weights are never rescaled, so 1.0 keeps
  meaning "at the last safe operating point" whichever terms a pod has;
- a pod without data for a term gets no composite (``when_missing: omit_pod``, the default: a made-up or
  re-weighted number would be a different metric), unless the term says ``when_missing: idle`` (it then
  reads 0: a latency histogram with no finished request in the window means no latency load);
- a term with ``omit_pod`` that has no data for *any* pod in scope while other terms do is a partial answer
  (an exporter missing, a broken query): ``unservable_terms`` names it and the caller answers 503;
- the forecast-boosted composite is the composite at ``boost`` times the load, term by term (``at_load``); a
  boosted metric (``forecast.also``) is the metric at ``boost`` times the load by one term's rule (``boost_value``).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from adapter.catalog import Combine, Layout, Reduce, Term
from adapter.samples import Sample

PodKey = tuple[str, str]  # (namespace, pod)

# The HPA reads a metric as Quantity.MilliValue(), an int64 (kubernetes/apimachinery
# pkg/api/resource/quantity.go): a value beyond (2^63 - 1) / 1000 cannot reach it intact. The float nearest that
# bound rounds up to 2^63 / 1000 (whose milli-value overflows), so the bound is the float just below it.
MAX_SERVABLE = math.nextafter((2**63 - 1) / 1000, 0.0)
# metav1.Time marshals as RFC 3339, whose years are 0000-9999; before the epoch is no backend sample either.
MAX_TIMESTAMP = 253402300799.0  # 9999-12-31T23:59:59Z


def servable(value: float, ts: float = 0.0) -> bool:
    """Whether an HPA can read ``value`` stamped ``ts``: finite, its milli-value fits an int64, and ``ts`` is a
    time RFC 3339 can write. The one range check of every served value (custom and external paths)."""
    return math.isfinite(value) and abs(value) <= MAX_SERVABLE and 0 <= ts <= MAX_TIMESTAMP


@dataclass
class Rejections:
    """What ``reduce_by_pod`` refused, for the caller to log, count and explain (aggregate does no I/O).

    ``counts``: reason → series/pods refused (``untrusted``, ``negative``, ``extreme_value``, ``bad_timestamp``);
    ``notes``: one human-readable line per refusal (bounded), naming the pod and why.
    """

    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    max_notes: int = 20

    def add(self, reason: str, note: str) -> None:
        self.counts[reason] = self.counts.get(reason, 0) + 1
        if len(self.notes) < self.max_notes:
            self.notes.append(note)

    def __bool__(self) -> bool:
        return bool(self.counts)


@dataclass(frozen=True, slots=True)
class PodValue:
    """A pod's value for one metric, the newest sample timestamp behind it, and how many series fed it."""

    value: float
    ts: float
    series: int


@dataclass(frozen=True, slots=True)
class TermValue:
    metric: str
    raw: float  # the metric's value for the pod
    normalized: float  # (raw - idle) / (target - idle)
    weight: float  # its share of the composite's weights
    contribution: float  # weight * normalized


@dataclass(frozen=True, slots=True)
class CompositeValue:
    value: float
    ts: float
    terms: tuple[TermValue, ...]
    missing: tuple[str, ...]  # metrics of the composite with no data for this pod


def attribute(
    labels: Mapping[str, str], layouts: Sequence[Layout], untrusted: list[Layout] | None = None
) -> PodKey | None:
    """(namespace, pod) a series belongs to, or None when no trusted layout names a pod (e.g. an idle GPU).

    A layout whose pod label is set but whose trust rules reject the series is skipped (appended to
    ``untrusted`` when given): its claim about the pod comes from a target not allowed to make it.
    """
    for lay in layouts:
        pod = labels.get(lay.pod)
        if pod:
            if lay.trust and not lay.trusts(labels):
                if untrusted is not None:
                    untrusted.append(lay)
                continue
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


def _who(labels: Mapping[str, str]) -> str:
    shown = ",".join(f"{k}={v!r}" for k, v in sorted(labels.items())[:8])
    return "{" + shown + ("...}" if len(labels) > 8 else "}")


def group_by_pod(
    samples: Iterable[Sample],
    layouts: Sequence[Layout],
    namespace: str,
    pods: Collection[str] | None,
    *,
    nonnegative: bool = False,
    rejected: Rejections | None = None,
) -> dict[str, list[Sample]]:
    """The finite samples of each pod of ``namespace`` (restricted to ``pods`` when given).

    With ``nonnegative``, negative samples are dropped too. Refusals are reported in ``rejected``.
    """
    out: dict[str, list[Sample]] = {}
    for s in samples:
        if not math.isfinite(s.value):
            continue
        untrusted: list[Layout] = []
        key = attribute(s.labels, layouts, untrusted)
        if untrusted and rejected is not None:
            lay = untrusted[0]
            rejected.add(
                "untrusted",
                f"ignored {lay.pod}={s.labels.get(lay.pod)!r} of series {_who(s.labels)}: "
                f"layout {lay.name!r} trusts only targets matching {dict(lay.trust)}",
            )
        if key is None or key[0] != namespace or (pods is not None and key[1] not in pods):
            continue
        if nonnegative and s.value < 0:
            if rejected is not None:
                rejected.add(
                    "negative",
                    f"pod {key[1]}: dropped negative sample {s.value!r} of series "
                    f"{_who(s.labels)} (this metric cannot be negative)",
                )
            continue
        out.setdefault(key[1], []).append(s)
    return out


def _servable(pod: str, group: Sequence[Sample], rejected: Rejections | None) -> bool:
    """False (and reported) if a sample of the pod cannot be served: the whole pod is omitted."""
    for s in group:
        if abs(s.value) > MAX_SERVABLE:
            if rejected is not None:
                rejected.add(
                    "extreme_value",
                    f"pod {pod} omitted: sample {s.value!r} of series {_who(s.labels)} "
                    f"is beyond what an HPA can read (|v| <= {MAX_SERVABLE:.4g})",
                )
            return False
        if not (0 <= s.ts <= MAX_TIMESTAMP):  # also false for NaN
            if rejected is not None:
                rejected.add("bad_timestamp", f"pod {pod} omitted: series {_who(s.labels)} has timestamp {s.ts!r}")
            return False
    return True


def reduce_by_pod(
    samples: Iterable[Sample],
    layouts: Sequence[Layout],
    how: Reduce,
    namespace: str,
    pods: Collection[str] | None = None,
    *,
    nonnegative: bool = False,
    rejected: Rejections | None = None,
) -> dict[str, PodValue]:
    """Per-pod values of one metric; pods without a usable sample are absent (see the module rules)."""
    out = {}
    groups = group_by_pod(samples, layouts, namespace, pods, nonnegative=nonnegative, rejected=rejected)
    for pod, group in groups.items():
        if not _servable(pod, group, rejected):
            continue
        value = reduce_values([s.value for s in group], how)
        if not math.isfinite(value):
            continue
        if abs(value) > MAX_SERVABLE:  # e.g. a sum of large values
            if rejected is not None:
                rejected.add("extreme_value", f"pod {pod} omitted: its value {value!r} is beyond what an HPA can read")
            continue
        out[pod] = PodValue(value=value, ts=max(s.ts for s in group), series=len(group))
    return out


class Scale(Protocol):
    """What a term's reading needs: a catalog ``Term``, or a term ``calibrate`` proposes."""

    @property
    def idle(self) -> float: ...

    @property
    def target(self) -> float: ...


def normalize(term: Scale, value: float) -> float:
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
        out[pod] = CompositeValue(value=value, ts=max(pv.ts for _, pv in present), terms=tuple(parts), missing=missing)
    return out


def at_load(
    cv: CompositeValue, flat: Collection[str], boost: float, elasticity: Mapping[str, float] | None = None
) -> float:
    """The pod's composite at ``boost`` times its load: what the boosted composite serves.

    A term that tracks load reads ``boost ** e`` times its value, ``e`` its ``elasticity`` (``Term.elasticity``,
    by metric; 1 when absent: in proportion to the load). A ``flat`` term (a presence term, e.g. GPU
    utilization pinned near 100 % on any busy pod: ``Term.flat``) rises with the load only up to its target
    and never falls below what it reads: a saturated one stays as it is, one that still tracks load on this
    fleet (a GPU below its busy level) rises like a proportional term until it saturates. The HPA settles where
    the served value is 1, so a term read at ``b`` times the load buys ``b`` times the pods when it does grow
    as its elasticity says (multiplying the whole composite bought ``(1 - f) b / (1 - f b)`` times the pods
    with a saturated flat share f; multiplying a term that grows as ``load ** e`` by ``b`` buys ``b ** (1/e)``
    times the pods). Never below ``cv.value``; a boost that is not a finite number >= 1 changes nothing.
    """
    if not math.isfinite(boost) or boost <= 1.0:
        return cv.value
    elasticity = elasticity or {}
    total = 0.0
    for t in cv.terms:
        if t.metric in flat:
            total += t.weight * max(t.normalized, min(boost * t.normalized, 1.0))
        else:
            e = elasticity.get(t.metric, 1.0)
            total += t.weight * (boost if e == 1.0 else boost**e) * t.normalized
    return max(total, cv.value)


def boost_value(value: float, boost: float, idle: float = 0.0, elasticity: float = 1.0) -> float:
    """A metric of the catalog's ``forecast.also`` at ``boost`` times the load: ``idle + (value - idle) x
    boost ** elasticity``, the rule of a composite term (``at_load``) on the value itself; with the defaults,
    value x boost (in proportion to the load). The example HPA's SLO guard reads the ITL P99 with the idle and
    elasticity of the composite's ITL term, the TTFT P99 in proportion. Never below ``value``; a boost that is
    not a finite number > 1 changes nothing."""
    if not math.isfinite(boost) or boost <= 1.0 or value <= idle:
        return value
    return idle + (value - idle) * (boost if elasticity == 1.0 else boost**elasticity)


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
