"""``explain``: why the HPA sees the number it sees, pod by pod.

``explain()`` asks the provider the same questions the API asks it (so the served values are the API's own
answers, not a re-computation), plus one raw query per GPU metric to show the per-GPU samples behind each
P90 (a debugging tool, not the hot path). ``build()`` is pure: it turns those answers into an
``Explanation``, naming the missing piece whenever a value is absent or degraded. ``to_json()`` and
``renderables()`` present it (``rich`` tables render to a terminal or to text, no I/O here).
"""

from __future__ import annotations

import dataclasses
import io
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from adapter.aggregate import group_by_pod, reduce_values
from adapter.api.quantity import milli_value, parse_quantity
from adapter.api.wire import quantity
from adapter.errors import AdapterError, BadRequest, NotFound
from adapter.hpa.controller import HPAModel
from adapter.hpa.proposals import MetricReading as HPAReading
from adapter.hpa.replicas import PodInfo
from adapter.hpa.spec import HPASpec, MetricSpec
from adapter.labels import EVERYTHING, Selector, parse_selector
from adapter.provider.base import MetricInfo, MetricSample, ObjectRef
from adapter.provider.prometheus import MetricReading, PrometheusProvider
from adapter.query.promql import PromQL, Scope, render
from adapter.samples import Sample
from adapter.settings import BOOST_METRIC, FORECAST_METRIC, Catalog, MetricDef
from adapter.workloads import ForecastState, WorkloadKey, key_for_pods

# `NAME{<<matchers>>}` inside a catalog template: the raw series a reduction starts from.
_RAW_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{<<matchers>>\}")


@dataclass(frozen=True)
class GpuSample:
    """One raw per-GPU series of a pod: the labels naming the GPU and its value."""

    gpu: dict[str, str]
    value: float


@dataclass(frozen=True)
class TermExplanation:
    """One metric of the pod (a composite's term, or the metric itself)."""

    metric: str
    value: float | None                   # the pod's value as the provider computed it; None = no data
    target: float | None = None           # composite terms only
    weight: float | None = None           # its share of the composite's weights
    normalized: float | None = None       # (value - idle) / (target - idle)
    contribution: float | None = None     # weight x normalized
    gpu_samples: list[GpuSample] = field(default_factory=list)
    gpu_p90: float | None = None          # numpy P90 of the raw samples: checks the backend's reduction
    missing: str | None = None


@dataclass(frozen=True)
class PodExplanation:
    """Everything about one pod, ending in the value the HPA receives for it."""

    pod: str
    terms: list[TermExplanation]
    value: float | None                   # the base value (composite or metric) before any boost
    boost: float
    served: float | None                  # what the API serves for this pod; None = the pod is omitted
    quantity: str | None                  # the served value as the wire shows it
    missing: list[str]


@dataclass(frozen=True)
class ForecastExplanation:
    """The workload's forecast as the adapter holds it, and the boost it yields now."""

    workload: str
    model: str
    reason: str                           # ok, pending, stale, or why the boost is 1
    boost: float
    current_load: float | None
    forecast: list[float] | None
    peak: float | None
    step_ts: float | None


@dataclass(frozen=True)
class HPAExplanation:
    """What the HPA controller would do with these values (``adapter.hpa``, a fresh controller)."""

    name: str
    metrics: list[str]                    # the spec.metrics entries that use this metric
    ignored: list[str]                    # the other entries (not explained: their values are not ours)
    current_replicas: int
    usage: str | None                     # the metric's usage as the HPA computes it (a Quantity)
    metric_replicas: int | None           # the replica formula's proposal
    desired_replicas: int | None          # after min/max, stabilization and rate limits
    reason: str
    error: str | None = None


@dataclass(frozen=True)
class Explanation:
    """The whole answer; ``to_json()`` is its stable machine form."""

    namespace: str
    metric: str
    base_metric: str
    selector: str | None
    deployment: str | None
    pods: list[PodExplanation]
    queries: dict[str, str]               # metric -> the PromQL the provider sent
    raw_queries: dict[str, str]           # metric -> the raw per-GPU query explain sent
    object_value: float | None = None     # the Deployment's value (Object metric), when a Deployment is named
    object_quantity: str | None = None
    forecast: ForecastExplanation | None = None
    hpa: HPAExplanation | None = None
    problems: list[str] = field(default_factory=list)
    data_age_s: float | None = None       # age of the served values (the value store's data), None = not stored

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


# -- pure construction ---------------------------------------------------------------------------------
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
        raw = MetricDef(name=name, help="", query=" or ".join(f"{s}{{<<matchers>>}}" for s in selectors),
                        reduce="max", objects="max")
        out[name] = render(raw, catalog, scope, EVERYTHING)
    return out


def _read_metrics(catalog: Catalog, base: str) -> list[str]:
    """The catalog metrics a read of ``base`` queries (itself, or a composite's terms)."""
    if base in catalog.metrics:
        return [base]
    return list(dict.fromkeys(t.metric for t in catalog.composites[base].terms))


def _milli(value: float) -> int:
    return milli_value(parse_quantity(quantity(value)))


def _gpu_metric(name: str, catalog: Catalog, raw: Mapping[str, list[Sample]]) -> bool:
    """A metric over per-GPU series: its raw series carry a GPU label (or, when none came back at all,
    it reads dcgm-exporter series)."""
    if any(any(s.labels.get(g) for g in catalog.gpu_labels) for s in raw.get(name, ())):
        return True
    return name in raw and not raw[name] and ("DCGM_" in catalog.metrics[name].query
                                              or name.startswith("gpu_"))


def _term_missing(name: str, pod: str, namespace: str, catalog: Catalog, raw: Mapping[str, list[Sample]],
                  pod_raw: list[Sample]) -> str:
    mdef = catalog.metrics[name]
    pod_labels = "/".join(lay.pod for lay in catalog.layouts)
    if _gpu_metric(name, catalog, raw):
        if not pod_raw:
            selectors = ", ".join(dict.fromkeys(_RAW_SELECTOR.findall(mdef.query)))
            return (f"no GPU series: {selectors} has no series for pod {pod} in namespace {namespace} "
                    f"under any pod label ({pod_labels}); is dcgm-exporter running on its node with pod "
                    "attribution?")
        return f"{name}: the pod's GPU series have no finite value"
    if mdef.window is not None:
        return (f"no data for {name} over its {mdef.window} window (e.g. no request finished in it, or the "
                f"engine is not scraped with pod labels {pod_labels})")
    return f"no series for {name} for this pod (query returned nothing with pod labels {pod_labels})"


def build(*, catalog: Catalog, namespace: str, metric: str, base: str, pods: Sequence[str],
          reading: MetricReading | None, raw: Mapping[str, list[Sample]], raw_promql: Mapping[str, str],
          served: Mapping[str, float], boost: float, forecast: ForecastExplanation | None,
          selector: str | None = None, deployment: str | None = None, object_value: float | None = None,
          hpa: HPAExplanation | None = None, problems: Sequence[str] = (),
          data_age_s: float | None = None) -> Explanation:
    """Assemble the explanation from what the provider answered (pure)."""
    problems = list(problems)
    if reading is not None:
        problems += [f"refused: {note}" for note in reading.rejected]
    names = _read_metrics(catalog, base) if reading is not None else []
    terms_of = {t.metric: t for t in catalog.composites[base].terms} if base in catalog.composites else {}
    raw_by_pod = {n: group_by_pod(raw.get(n, []), catalog.layouts_for(catalog.metrics[n]) if n in catalog.metrics
                                  else catalog.layouts, namespace, pods,
                                  nonnegative=n in catalog.metrics and catalog.metrics[n].nonnegative)
                  for n in raw}
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
            gpus = [GpuSample({g: s.labels[g] for g in catalog.gpu_labels if s.labels.get(g)}, s.value)
                    for s in pod_raw]
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
            terms.append(TermExplanation(
                metric=name, value=value, target=spec.target if spec else None,
                weight=part.weight if part else None, normalized=part.normalized if part else None,
                contribution=part.contribution if part else None, gpu_samples=gpus, gpu_p90=p90,
                missing=miss))
        base_value = cv.value if cv is not None else (
            reading.values[pod].value if reading is not None and pod in reading.values else None)
        if reading is not None and base_value is None:
            missing.append(f"no value for {base}: the pod is left out of the answer (the HPA treats a pod "
                           "without a value as missing data)")
        if forecast is not None and forecast.reason != "ok":
            missing.append(f"forecast degraded ({forecast.reason}): boost is {forecast.boost:g}")
        value_served = served.get(pod)
        out.append(PodExplanation(pod=pod, terms=terms, value=base_value, boost=boost, served=value_served,
                                  quantity=quantity(value_served) if value_served is not None else None,
                                  missing=missing))
    if not pods:
        what = f"Deployment {deployment}" if deployment else f"selector {selector}"
        problems.append(f"no pod matches {what} in namespace {namespace}")
    return Explanation(namespace=namespace, metric=metric, base_metric=base, selector=selector,
                       deployment=deployment, pods=out,
                       queries=dict(reading.queries) if reading is not None else {},
                       raw_queries=dict(raw_promql),
                       object_value=object_value,
                       object_quantity=quantity(object_value) if object_value is not None else None,
                       forecast=forecast, hpa=hpa, problems=problems, data_age_s=data_age_s)


def explain_forecast(key: WorkloadKey, state: ForecastState | None, boost: float,
                     reason: str) -> ForecastExplanation:
    """The forecast section from the service's state and its ``boost(key)`` answer."""
    workload = ",".join(key.deployments)
    if state is None:
        return ForecastExplanation(workload, "", reason, boost, None, None, None, None)
    values = [float(v) for v in state.forecast] if state.forecast is not None else None
    return ForecastExplanation(workload, state.model, reason, boost,
                               state.current if math.isfinite(state.current) else None, values, state.peak,
                               state.step_ts)


def _uses(m: MetricSpec, metric: str, deployment: str | None) -> bool:
    if m.name != metric:
        return False
    if m.type == "Pods":
        return True
    return (m.type == "Object" and m.described_object is not None and m.described_object.kind == "Deployment"
            and (deployment is None or m.described_object.name == deployment))


def explain_hpa(spec: HPASpec, metric: str, served: Mapping[str, float], object_value: float | None,
                pods: Sequence[str], now: float, deployment: str | None = None) -> HPAExplanation:
    """Run the HPA model on the values the API serves, for the ``spec.metrics`` entries using ``metric``.

    The controller is fresh (no recommendation history) and the current replica count is the number of
    pods found, so the answer is the replica formula under the HPA's bounds and first-sync behavior.
    """
    used = [m for m in spec.metrics if _uses(m, metric, deployment)]
    ignored = [m.describe() for m in spec.metrics if m not in used]
    current = len(pods)
    if not used:
        return HPAExplanation(spec.name, [], ignored, current, None, None, None, "NotExplained",
                              f"the HPA has no Pods or Object(Deployment) metric named {metric}")
    readings = []
    for m in used:
        if m.type == "Pods":
            # The HPA reads the Quantity the wire carries, as MilliValue (horizontal.go).
            readings.append(HPAReading.pods({p: _milli(v) for p, v in served.items()}))
        elif object_value is not None:
            readings.append(HPAReading.object(_milli(object_value)))
        else:
            readings.append(HPAReading.failed(f"no value for {m.describe()}: name the Deployment"))
    model = HPAModel(dataclasses.replace(spec, metrics=tuple(used)), recommendations=())
    decision = model.reconcile(now, spec_replicas=current, status_replicas=current, metrics=readings,
                               pods=[PodInfo(p, start_time=now - 3600.0) for p in pods])
    usage = next((p.usage for p in decision.proposals if p.usage is not None), None)
    return HPAExplanation(spec.name, [m.describe() for m in used], ignored, current,
                          quantity(usage / 1000) if usage is not None else None, decision.metric_replicas,
                          decision.desired_replicas if decision.metric_replicas is not None else None,
                          decision.reason, decision.error)


# -- the reads (through the provider, as the API does) -------------------------------------------------
async def explain(provider: PrometheusProvider, *, namespace: str, metric: str, selector: str | None = None,
                  deployment: str | None = None, hpa: HPASpec | None = None,
                  refresh_forecast: bool = False) -> Explanation:
    """Explain ``metric`` for the pods of ``selector`` or ``deployment`` in ``namespace``.

    ``refresh_forecast`` pulls the history and fits once when the provider holds no forecast for the
    workload yet (the one-shot CLI); the server's endpoint shows the forecast it already holds.
    Raises NotFound for a metric the catalog does not serve, BadRequest for a bad selector or arguments.
    """
    if (selector is None) == (deployment is None):
        raise BadRequest("give exactly one of selector or deployment")
    if not provider.knows(metric):
        known = ", ".join(i for i in sorted({m.metric for m in provider.list_all_metrics()}))
        raise NotFound(f"the catalog serves no metric {metric!r}; it serves: {known}")
    catalog = provider.catalog
    sel: Selector | None = None
    if selector is not None:
        try:
            sel = parse_selector(selector)
        except ValueError as exc:
            raise BadRequest(f"invalid selector {selector!r}: {exc}") from None
        pods = await provider.pods.pods_for_selector(namespace, sel)
    else:
        assert deployment is not None
        pods = await provider.pods.pods_for_deployment(namespace, deployment)
    forecast_metrics = {FORECAST_METRIC, BOOST_METRIC}
    boosted = catalog.forecast.boosted if catalog.forecast is not None else None
    base = catalog.forecast.base if catalog.forecast is not None and metric == boosted else metric
    problems: list[str] = []

    forecast = None
    boost = 1.0
    if provider.forecasts is not None and (metric == boosted or metric in forecast_metrics):
        key = WorkloadKey(namespace, (deployment,)) if deployment else key_for_pods(namespace, pods)
        service = provider.forecasts
        if refresh_forecast and service.state(key) is None:
            service.touch(key)
            await service.refresh(key)
        b, reason = service.boost(key)
        forecast = explain_forecast(key, service.state(key), b, reason)
        boost = b if metric == boosted else 1.0
    elif metric == boosted:
        problems.append("the adapter runs no forecast service: the boost is 1")

    if metric in forecast_metrics:
        object_value = await _object_value(provider, namespace, deployment, metric, problems)
        return build(catalog=catalog, namespace=namespace, metric=metric, base=metric, pods=pods,
                     reading=None, raw={}, raw_promql={}, served={}, boost=boost, forecast=forecast,
                     selector=selector,
                     deployment=deployment, object_value=object_value, problems=problems)

    reading = None
    raw: dict[str, list[Sample]] = {}
    raw_promql: dict[str, PromQL] = {}
    served: dict[str, float] = {}
    object_value = None
    if pods:
        scope = Scope(namespace, tuple(pods))
        reading = await provider.read(base, scope)
        names = _read_metrics(catalog, base)
        raw_promql = raw_queries(catalog, names, scope)
        at = provider.clock()
        for name, q in raw_promql.items():
            raw[name] = await provider.client.query(q, at)
        for name in [n for n in raw_promql if not _gpu_metric(n, catalog, raw)]:
            del raw[name], raw_promql[name]   # per-engine series, not per-GPU: nothing to show
        if sel is not None:
            samples = await provider.get_metric_by_selector(namespace, sel, MetricInfo("pods", metric, True),
                                                            EVERYTHING)
            served = {s.obj.name: s.value for s in samples}
        else:
            for pod in pods:
                sample = await _by_name(provider, ObjectRef("Pod", "/v1", pod, namespace), "pods", metric)
                if sample is not None:
                    served[pod] = sample.value
            object_value = await _object_value(provider, namespace, deployment, metric, problems)
    hpa_part = None
    if hpa is not None:
        hpa_part = explain_hpa(hpa, metric, served, object_value, pods, provider.clock(), deployment)
    return build(catalog=catalog, namespace=namespace, metric=metric, base=base, pods=pods, reading=reading,
                 raw=raw, raw_promql=raw_promql, served=served, boost=boost, forecast=forecast,
                 selector=selector, deployment=deployment, object_value=object_value, hpa=hpa_part,
                 problems=problems, data_age_s=provider.data_age(namespace, base))


async def _by_name(provider: PrometheusProvider, obj: ObjectRef, resource: str,
                   metric: str) -> MetricSample | None:
    try:
        return await provider.get_metric_by_name(obj, MetricInfo(resource, metric, True), EVERYTHING)
    except NotFound:
        return None


async def _object_value(provider: PrometheusProvider, namespace: str, deployment: str | None, metric: str,
                        problems: list[str]) -> float | None:
    if deployment is None:
        return None
    try:
        sample = await provider.get_metric_by_name(ObjectRef("Deployment", "apps/v1", deployment, namespace),
                                                   MetricInfo("deployments.apps", metric, True), EVERYTHING)
    except AdapterError as exc:
        problems.append(f"Deployment {deployment}: {exc.message}")
        return None
    return sample.value


# -- presentation ----------------------------------------------------------------------------------------
def _num(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}g}"


def renderables(ex: Explanation) -> list[RenderableType]:
    """Rich tables and lines for a terminal (``rich.console.Console.print`` each, or export as text)."""
    out: list[RenderableType] = []
    target = f"Deployment {ex.deployment}" if ex.deployment else f"selector {ex.selector}"
    out.append(Text(f"{ex.metric} for {target} in namespace {ex.namespace}"
                    + (f" (reads {ex.base_metric})" if ex.base_metric != ex.metric else ""), style="bold"))
    if ex.data_age_s is not None:
        out.append(Text(f"served values are {ex.data_age_s:.1f} s old (the value store's latest refresh)"))
    if ex.queries or ex.raw_queries:
        q = Table(title="PromQL sent (one query per metric for all the pods)", show_lines=True, expand=False)
        q.add_column("metric")
        q.add_column("kind")
        q.add_column("PromQL", overflow="fold")
        for name, text in ex.queries.items():
            q.add_row(name, "served", text)
        for name, text in ex.raw_queries.items():
            q.add_row(name, "raw per-GPU", text)
        out.append(q)
    for pod in ex.pods:
        t = Table(title=f"pod {pod.pod}", title_justify="left")
        for col in ("term", "value", "per-GPU samples", "P90 (numpy)", "target", "weight", "value/target",
                    "contribution"):
            t.add_column(col, overflow="fold")
        for term in pod.terms:
            gpus = " ".join(f"{g.gpu.get('gpu') or next(iter(g.gpu.values()), '?')}={g.value:g}"
                            for g in term.gpu_samples)
            t.add_row(term.metric, _num(term.value), gpus or "-", _num(term.gpu_p90), _num(term.target),
                      _num(term.weight, 3), _num(term.normalized), _num(term.contribution))
        lines: list[RenderableType] = [t]
        receives = pod.quantity if pod.quantity is not None else "nothing"
        lines.append(Text(f"  {ex.base_metric} = {_num(pod.value, 6)}   boost = {pod.boost:g}   "
                          f"HPA receives {ex.metric} = {receives}", style="bold"))
        for m in pod.missing:
            lines.append(Text(f"  missing: {m}", style="red"))
        out.append(Group(*lines))
    if ex.object_quantity is not None:
        out.append(Text(f"Deployment {ex.deployment}: {ex.metric} = {ex.object_quantity}", style="bold"))
    if ex.forecast is not None:
        f = ex.forecast
        fc = ", ".join(_num(v) for v in f.forecast) if f.forecast is not None else "-"
        out.append(Text(f"forecast for {f.workload}: model {f.model or '-'}, {f.reason}; load now "
                        f"{_num(f.current_load)} req/s, forecast [{fc}] (peak {_num(f.peak)}), "
                        f"boost {f.boost:g}"))
    if ex.hpa is not None:
        h = ex.hpa
        used = ", ".join(h.metrics) or "no matching metric"
        out.append(Text(f"HPA {h.name} ({used}): {h.current_replicas} replicas now, usage {h.usage or '-'}, "
                        f"formula proposes {h.metric_replicas}, desired {h.desired_replicas} ({h.reason})"
                        + (f"; {h.error}" if h.error else ""), style="bold"))
        if h.ignored:
            out.append(Text(f"  not explained (not this metric): {', '.join(h.ignored)}", style="dim"))
    for p in ex.problems:
        out.append(Text(f"problem: {p}", style="red"))
    return out


def to_text(ex: Explanation, width: int = 120) -> str:
    """The tables as plain text (the HTTP endpoint's ``format=text``)."""
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    for r in renderables(ex):
        console.print(r)
    return console.export_text()


__all__ = [
    "Explanation",
    "ForecastExplanation",
    "GpuSample",
    "HPAExplanation",
    "PodExplanation",
    "TermExplanation",
    "build",
    "explain",
    "explain_forecast",
    "explain_hpa",
    "raw_queries",
    "renderables",
    "to_text",
]
