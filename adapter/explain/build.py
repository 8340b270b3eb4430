"""Pure construction of an ``Explanation`` from what the provider answered: no I/O, no clock.

Whether a metric is a GPU metric (its raw per-GPU samples are shown, a missing value names dcgm-exporter) is
the catalog's to say: the metric is marked ``gpu: true``, or its raw series carry one of ``gpu_labels``.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence

from adapter.aggregate import group_by_pod, reduce_values
from adapter.api.wire import quantity
from adapter.catalog import Catalog, MetricDef
from adapter.explain.model import (
    Explanation,
    ForecastExplanation,
    GpuSample,
    HPAExplanation,
    HPAMetricExplanation,
    PodExplanation,
    TermExplanation,
)
from adapter.forecast_service import ForecastState, WorkloadKey
from adapter.hpa.controller import HPAModel
from adapter.hpa.proposals import MetricReading as HPAReading
from adapter.hpa.replicas import PodInfo
from adapter.hpa.spec import HPASpec, MetricSpec
from adapter.labels import EVERYTHING
from adapter.provider.values import MetricReading
from adapter.quantity import milli_value, parse_quantity
from adapter.query.promql import PromQL, Scope, render
from adapter.samples import Sample

# `NAME{<<matchers>>}` inside a catalog template: the raw series a reduction starts from.
_RAW_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{<<matchers>>\}")


def raw_queries(catalog: Catalog, metrics: Sequence[str], scope: Scope) -> dict[str, PromQL]:
    """The raw series query of each GPU-style metric: its template's selectors, unreduced.

    Metrics over a range window (rates of histograms) are left out: their raw counters explain nothing.
    """
    out: dict[str, PromQL] = {}
    for name in metrics:
        mdef = catalog.metrics[name]
        if mdef.window is not None:
            continue
        selectors = list(dict.fromkeys(_RAW_SELECTOR.findall(mdef.query)))
        if not selectors:
            continue
        raw = MetricDef(
            name=name,
            help="",
            query=" or ".join(f"{s}{{<<matchers>>}}" for s in selectors),
            reduce="max",
            objects="max",
        )
        out[name] = render(raw, catalog, scope, EVERYTHING)
    return out


def read_metrics(catalog: Catalog, base: str) -> list[str]:
    """The catalog metrics a read of ``base`` queries (itself, or a composite's terms)."""
    if base in catalog.metrics:
        return [base]
    return list(dict.fromkeys(t.metric for t in catalog.composites[base].terms))


def _milli(value: float) -> int:
    return milli_value(parse_quantity(quantity(value)))


def gpu_metric(name: str, catalog: Catalog, raw: Mapping[str, list[Sample]]) -> bool:
    """A metric over per-GPU series, by the catalog: marked ``gpu: true``, or its raw series carry one of the
    catalog's ``gpu_labels``."""
    if catalog.metrics[name].gpu:
        return True
    return any(any(s.labels.get(g) for g in catalog.gpu_labels) for s in raw.get(name, ()))


def _term_missing(
    name: str, pod: str, namespace: str, catalog: Catalog, raw: Mapping[str, list[Sample]], pod_raw: list[Sample]
) -> str:
    mdef = catalog.metrics[name]
    pod_labels = "/".join(lay.pod for lay in catalog.layouts)
    if gpu_metric(name, catalog, raw):
        if not pod_raw:
            selectors = ", ".join(dict.fromkeys(_RAW_SELECTOR.findall(mdef.query)))
            return (
                f"no GPU series: {selectors} has no series for pod {pod} in namespace {namespace} "
                f"under any pod label ({pod_labels}); is dcgm-exporter running on its node with pod "
                "attribution?"
            )
        return f"{name}: the pod's GPU series have no finite value"
    if mdef.window is not None:
        return (
            f"no data for {name} over its {mdef.window} window (e.g. no request finished in it, or the "
            f"engine is not scraped with pod labels {pod_labels})"
        )
    return f"no series for {name} for this pod (query returned nothing with pod labels {pod_labels})"


def build(
    *,
    catalog: Catalog,
    namespace: str,
    metric: str,
    base: str,
    pods: Sequence[str],
    reading: MetricReading | None,
    raw: Mapping[str, list[Sample]],
    raw_promql: Mapping[str, str],
    served: Mapping[str, float],
    boost: float,
    forecast: ForecastExplanation | None,
    selector: str | None = None,
    deployment: str | None = None,
    object_value: float | None = None,
    hpa: HPAExplanation | None = None,
    problems: Sequence[str] = (),
    data_age_s: float | None = None,
) -> Explanation:
    """Assemble the explanation from what the provider answered (pure)."""
    problems = list(problems)
    if reading is not None:
        problems += [f"refused: {note}" for note in reading.rejected]
    names = read_metrics(catalog, base) if reading is not None else []
    terms_of = {t.metric: t for t in catalog.composites[base].terms} if base in catalog.composites else {}
    raw_by_pod = {
        n: group_by_pod(
            raw.get(n, []),
            catalog.layouts_for(catalog.metrics[n]) if n in catalog.metrics else catalog.layouts,
            namespace,
            pods,
            nonnegative=n in catalog.metrics and catalog.metrics[n].nonnegative,
        )
        for n in raw
    }
    out = []
    for pod in pods:
        missing: list[str] = []
        terms = []
        cv = reading.composite.get(pod) if reading is not None and reading.composite is not None else None
        parts = {t.metric: t for t in cv.terms} if cv is not None else {}
        for name in names:
            assert reading is not None
            pv = reading.values.get(pod) if name == base else None
            pod_raw = raw_by_pod.get(name, {}).get(pod, [])
            gpus = [
                GpuSample({g: s.labels[g] for g in catalog.gpu_labels if s.labels.get(g)}, s.value) for s in pod_raw
            ]
            p90 = reduce_values([g.value for g in gpus], "p90") if gpus else None
            part = parts.get(name)
            if pv is None and reading.terms is not None and pod in reading.terms.get(name, {}):
                pv = reading.terms[name][pod]  # a term of a pod the composite left out: still shown
            value = part.raw if part is not None else (pv.value if pv is not None else None)
            miss = None
            if value is None:
                miss = _term_missing(name, pod, namespace, catalog, raw, pod_raw)
                missing.append(miss)
            spec = terms_of.get(name)
            terms.append(
                TermExplanation(
                    metric=name,
                    value=value,
                    target=spec.target if spec else None,
                    weight=part.weight if part else None,
                    normalized=part.normalized if part else None,
                    contribution=part.contribution if part else None,
                    gpu_samples=gpus,
                    gpu_p90=p90,
                    missing=miss,
                )
            )
        base_value = (
            cv.value
            if cv is not None
            else (reading.values[pod].value if reading is not None and pod in reading.values else None)
        )
        if reading is not None and base_value is None:
            missing.append(
                f"no value for {base}: the pod is left out of the answer (the HPA treats a pod "
                "without a value as missing data)"
            )
        if forecast is not None and forecast.reason != "ok":
            missing.append(f"forecast degraded ({forecast.reason}): boost is {forecast.boost:g}")
        value_served = served.get(pod)
        out.append(
            PodExplanation(
                pod=pod,
                terms=terms,
                value=base_value,
                boost=boost,
                served=value_served,
                quantity=quantity(value_served) if value_served is not None else None,
                missing=missing,
            )
        )
    if not pods:
        what = f"Deployment {deployment}" if deployment else f"selector {selector}"
        problems.append(f"no pod matches {what} in namespace {namespace}")
    return Explanation(
        namespace=namespace,
        metric=metric,
        base_metric=base,
        selector=selector,
        deployment=deployment,
        pods=out,
        queries=dict(reading.queries) if reading is not None else {},
        raw_queries=dict(raw_promql),
        object_value=object_value,
        object_quantity=quantity(object_value) if object_value is not None else None,
        forecast=forecast,
        boost_flat_share=catalog.boost_flat_share if base != metric and base in catalog.composites else 0.0,
        hpa=hpa,
        problems=problems,
        data_age_s=data_age_s,
    )


def explain_forecast(key: WorkloadKey, state: ForecastState | None, boost: float, reason: str) -> ForecastExplanation:
    """The forecast section from the service's state and its ``boost(key)`` answer."""
    workload = ",".join(key.deployments)
    if state is None:
        return ForecastExplanation(workload, "", reason, boost, None, None, None, None)
    values = [float(v) for v in state.forecast] if state.forecast is not None else None
    return ForecastExplanation(
        workload,
        state.model,
        reason,
        boost,
        state.current if math.isfinite(state.current) else None,
        values,
        state.peak,
        state.step_ts,
        state.rise,
    )


def serves(m: MetricSpec, deployment: str | None) -> bool:
    """Whether the adapter answers this ``spec.metrics`` entry for the workload explained: a Pods metric, the
    Deployment's Object metric, or an External metric whose selector is ``matchLabels: {deployment: NAME}`` (the
    per-Deployment read, ``provider/external.py``: the Deployment's Object value). Whether the catalog serves the
    name is the caller's to check."""
    if m.type == "Pods":
        return True
    if m.type == "Object":
        return (
            m.described_object is not None
            and m.described_object.kind == "Deployment"
            and (deployment is None or m.described_object.name == deployment)
        )
    if m.type == "External" and deployment is not None and m.selector is not None:
        return m.selector.get("matchLabels") == {"deployment": deployment} and not m.selector.get("matchExpressions")
    return False


def _target(m: MetricSpec) -> str:
    t = m.target
    milli = t.average_value_milli if t.average_value_milli is not None else t.value_milli
    if milli is None:
        return f"{t.type} {t.average_utilization}%" if t.average_utilization is not None else t.type
    return f"{t.type} {quantity(milli / 1000)}"


def explain_hpa(
    spec: HPASpec,
    metric: str,
    values: Mapping[str, tuple[Mapping[str, float], float | None]],
    pods: Sequence[str],
    now: float,
    deployment: str | None = None,
) -> HPAExplanation:
    """Run the HPA model on the values the API serves, for every ``spec.metrics`` entry the adapter answers.

    ``values`` maps each metric name read to its served per-pod values and its Deployment (Object) value;
    ``metric`` is the one explained pod by pod. The controller is fresh (no recommendation history) and the
    current replica count is the number of pods found, so the answer is the replica formula under the HPA's
    bounds and first-sync behavior.
    """
    used = [m for m in spec.metrics if m.name in values and serves(m, deployment)]
    ignored = [m.describe() for m in spec.metrics if m not in used]
    current = len(pods)
    if not used:
        return HPAExplanation(
            spec.name,
            [],
            ignored,
            current,
            None,
            None,
            None,
            "NotExplained",
            f"the HPA has no Pods, Object(Deployment) or External(deployment={deployment or 'NAME'}) metric "
            f"this adapter serves (asked: {metric})",
        )
    readings = []
    for m in used:
        served, object_value = values[m.name]
        if m.type == "Pods":
            # The HPA reads the Quantity the wire carries, as MilliValue (horizontal.go).
            readings.append(HPAReading.pods({p: _milli(v) for p, v in served.items()}))
        elif object_value is None:
            what = "name the Deployment" if deployment is None else f"Deployment {deployment} has none"
            readings.append(HPAReading.failed(f"no value for {m.describe()}: {what}"))
        elif m.type == "Object":
            readings.append(HPAReading.object(_milli(object_value)))
        else:  # External pinned to the Deployment: the one item the adapter answers
            readings.append(HPAReading.external((_milli(object_value),)))
    model = HPAModel(dataclasses.replace(spec, metrics=tuple(used)), recommendations=())
    decision = model.reconcile(
        now,
        spec_replicas=current,
        status_replicas=current,
        metrics=readings,
        pods=[PodInfo(p, start_time=now - 3600.0) for p in pods],
    )
    proposals = [
        HPAMetricExplanation(
            p.metric.describe(),
            _target(p.metric),
            quantity(p.usage / 1000) if p.usage is not None else None,
            p.replicas,
            p.error,
        )
        for p in decision.proposals
    ]
    usage = next((p.usage for p in decision.proposals if p.usage is not None and p.metric.name == metric), None)
    return HPAExplanation(
        spec.name,
        [m.describe() for m in used],
        ignored,
        current,
        quantity(usage / 1000) if usage is not None else None,
        decision.metric_replicas,
        decision.desired_replicas if decision.metric_replicas is not None else None,
        decision.reason,
        decision.error,
        proposals,
        next((p.metric.describe() for p in decision.proposals if p.description == decision.metric_name), None),
    )
