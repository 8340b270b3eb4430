"""The metric catalog's grammar: layouts, metrics, composites, the forecast and the store, parsed and validated
once at start-up (``Settings`` in ``adapter.settings`` carries the parsed ``Catalog``).

Every catalog error names the entry it is about (``metrics.gpu_utilization_p90.reduce: ...``) so a user
editing the YAML sees at once what to fix. Nothing here does I/O except ``load_catalog`` reading its file.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, cast, get_args

import yaml

from adapter.errors import ConfigError
from adapter.forecast.boost import DEFAULT_MAX_BOOST, DEFAULT_RISE_QUANTILE
from adapter.forecast.registry import AUTO, DEFAULT_MODEL, MODELS
from adapter.store import StoreConfig

Reduce = Literal["p90", "sum", "max", "mean", "min", "any_nonzero"]
Combine = Literal["mean", "sum", "max"]

# Prometheus' label and metric name grammar (prometheus/common model/labels.go, metric.go).
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
METRIC_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
# PromQL durations: 30s, 2m, 1h30m ... (prometheus/common model/time.go ParseDuration).
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")
_FRACTIONAL_DURATION = re.compile(r"^(\d+(\.\d+)?(ms|s|m|h|d|w|y))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
PLACEHOLDERS = ("<<matchers>>", "<<by>>", "<<gpu>>", "<<window>>")


def duration_seconds(text: str, *, fractional: bool = False) -> float:
    """Seconds in a PromQL duration such as ``2m`` or ``1h30m``; ValueError if it is not one.

    The one duration rule: the catalog, the simulator and the command line all parse through it. With
    ``fractional`` (command-line flags only, never PromQL) a part may have decimals, e.g. ``1.5h``."""
    if not (_FRACTIONAL_DURATION if fractional else DURATION).match(text):
        raise ValueError(f"{text!r} is not a duration like 30s, 5m or 1h")
    number = float if fractional else int  # int parts keep whole-second sums ints, as they always were
    return sum(number(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(text))


@dataclass(frozen=True)
class Layout:
    """One way a series can name its pod: the pod label and the namespace label.

    ``trust`` is the trust model: (label, RE2 regex) pairs the series' *scrape-target* labels must fully
    match before this layout may attribute it to a pod. Prometheus keeps ``exported_*`` labels from any
    target (even with ``honorLabels: false``), so a layout naming the pod through labels the scraped
    process writes itself must be trusted only from the exporters that own those labels (e.g. the
    dcgm-exporter's namespace). Empty: trusted from any target (labels set by service discovery).
    """

    pod: str
    namespace: str
    name: str = ""
    trust: tuple[tuple[str, str], ...] = ()

    def trusts(self, labels: Mapping[str, str]) -> bool:
        """True if a series with ``labels`` comes from a target this layout trusts (regexes anchored)."""
        return all(re.fullmatch(rx, labels.get(label, "")) is not None for label, rx in self.trust)


@dataclass(frozen=True)
class MetricDef:
    """A metric read from the backend: one PromQL template, reduced per pod, combined over pods."""

    name: str
    help: str
    query: str
    reduce: Reduce
    objects: Combine
    window: str | None = None
    layouts: tuple[str, ...] | None = None  # names of the layouts read for this metric; None = all
    nonnegative: bool = True  # a negative sample is dropped (and reported), never served
    gpu: bool = False  # reads per-GPU series (explain shows them and names dcgm-exporter)

    @property
    def window_seconds(self) -> int | None:
        return int(duration_seconds(self.window)) if self.window else None


WhenMissing = Literal["omit_pod", "idle"]
# A term's elasticity (``Term.elasticity``): 4 is a term that grows 16 times when the load doubles, 0.25 one that
# grows by a fifth. Beyond them a term is a threshold, not a load signal, and the boost would not know its load.
MIN_ELASTICITY = 0.25
MAX_ELASTICITY = 4.0


@dataclass(frozen=True)
class Term:
    """One term of a composite: ``weight x max(value - idle, 0) / (target - idle)``.

    ``target`` is the metric's value at the last safe operating point (the term then reads 1.0) and ``idle``
    its value at zero load (the term reads 0), so a metric with a floor (a P99 latency is never below the
    service time) still grows in proportion to the load. ``when_missing`` says what a pod without data for
    this term gets: ``omit_pod`` (no composite for that pod) or ``idle`` (the term reads 0: for a latency
    term, no request finished in the window means no latency load).
    ``flat`` marks a presence term: it reads its target at any busy load (``calibrate`` finds GPU utilization
    pinned near 100 % below the knee), so it says "busy", not "how busy"; the boost raises it only up to its target.
    ``elasticity`` is how the term's reading grows with the pod's load: a term reading ``x`` at load ``L`` reads
    ``x b^elasticity`` at ``b L`` (1: in proportion to the load). The boosted composite uses it to read the term
    at the boosted load (``adapter.aggregate.at_load``); ``calibrate`` measures it. Not for a ``flat`` term.
    """

    metric: str
    weight: float
    target: float
    idle: float = 0.0
    when_missing: WhenMissing = "omit_pod"
    flat: bool = False
    elasticity: float = 1.0


@dataclass(frozen=True)
class CompositeDef:
    """A weighted sum of normalized terms ((value - idle) / (target - idle)); 1.0 = every term at its target."""

    name: str
    help: str
    terms: tuple[Term, ...]
    objects: Combine

    @functools.cached_property
    def flat_metrics(self) -> frozenset[str]:
        """The metrics of the ``flat`` terms (``adapter.aggregate.at_load`` raises them only up to their target).
        Cached: every boosted value on the request path reads it."""
        return frozenset(t.metric for t in self.terms if t.flat)

    @functools.cached_property
    def elasticities(self) -> dict[str, float]:
        """Each term's ``elasticity`` other than 1, by metric (``adapter.aggregate.at_load``). Cached as above."""
        return {t.metric: t.elasticity for t in self.terms if t.elasticity != 1.0}

    @property
    def flat_share(self) -> float:
        """The weight share of the ``flat`` terms: what the composite reads on a busy pod at any load."""
        return sum(t.weight for t in self.terms if t.flat) / sum(t.weight for t in self.terms)


BOOSTED_SUFFIX = "_boosted"
FORECAST_METRIC = "llm_load_forecast"
BOOST_METRIC = "llm_load_boost"


@dataclass(frozen=True)
class AlsoBoosted:
    """A metric of ``forecast.also``: served at boost x the load by the rule of the base composite's term on
    ``like`` (its idle and elasticity: ``idle + (value - idle) x boost ** e``), or in proportion (``value x
    boost``) without one (``Catalog.boost_rule``). A guard on the histogram a composite term reads then reads, at
    the boosted composite's own equilibrium, what it reads where the composite reads 1."""

    metric: str
    like: str | None = None


@dataclass(frozen=True)
class ForecastDef:
    """The forecast-boosted composite: ``<base>_boosted`` = the base composite at ``boost`` times the load
    (``adapter.aggregate.at_load``: its ``flat`` terms up to their target, the rest times the boost), with
    ``boost = clamp(max(peak forecast / current load, 1 + rise), 1, max)`` (``adapter.forecast.boost``)."""

    base: str  # the composite that gets boosted
    load: MetricDef  # the workload's load (request rate), summed over its pods
    # Catalog metrics also served at the forecast's load, ``<name>_boosted`` (``adapter.aggregate.boost_value``):
    # the example HPA's SLO guard, so that its P99 targets get the forecast's headroom too.
    also: tuple[AlsoBoosted, ...] = ()
    step_s: float = 300.0
    history_points: int = 120
    horizon_steps: int = 6
    model: str = DEFAULT_MODEL
    max_boost: float = DEFAULT_MAX_BOOST
    # The boost's upper-quantile part (``adapter.forecast.boost.rise_quantile``): the load's rise within
    # ``rise_lead_steps`` at this quantile of the fitted history; 0 turns it off.
    rise_quantile: float = DEFAULT_RISE_QUANTILE
    rise_lead_steps: int = 3
    forget_after_s: float = 3600.0
    workloads: tuple[tuple[str, str], ...] = ()  # (namespace, deployment) always forecast
    # At most this many workloads are forecast at once: each costs one range query per step and two
    # /metrics series, and a workload is registered by a request, so the bound is what keeps a caller
    # naming many Deployments from growing either without limit. New workloads beyond it get boost 1.
    max_workloads: int = 500
    # -- per-namespace shares (catalog ``forecast``: max_workloads_per_namespace, max_sets_per_namespace) -----
    # A namespace runs tens of boosted HPAs; 50 lets ten namespaces fill the global cap before a fair split
    # (adapter/forecast_service.py) takes over. A set of several Deployments (one HPA's selector spanning them) is
    # rare, and one selector's pods can name 2^n - 1 sets of n Deployments: a handful per namespace.
    max_workloads_per_namespace: int = 50
    max_sets_per_namespace: int = 8
    # -- end of the per-namespace shares --

    @property
    def boosted(self) -> str:
        return self.base + BOOSTED_SUFFIX

    @property
    def boosted_bases(self) -> dict[str, str]:
        """Every boosted name served -> what it boosts: the composite's, then each of ``also``."""
        return {self.boosted: self.base, **{a.metric + BOOSTED_SUFFIX: a.metric for a in self.also}}


@dataclass(frozen=True)
class Catalog:
    layouts: tuple[Layout, ...]
    gpu_labels: tuple[str, ...]
    metrics: dict[str, MetricDef]
    composites: dict[str, CompositeDef]
    cache_ttl_seconds: float = 0.0
    forecast: ForecastDef | None = None
    store: StoreConfig | None = StoreConfig()  # None: every request queries the backend (``store: false``)

    def names(self) -> list[str]:
        return sorted([*self.metrics, *self.composites])

    def forecast_names(self) -> list[str]:
        """Metrics that exist only with a forecast section: boosted composite and metrics, forecast, boost."""
        if self.forecast is None:
            return []
        return [*self.forecast.boosted_bases, FORECAST_METRIC, BOOST_METRIC]

    def boosted_base(self, name: str) -> str | None:
        """What the boosted metric ``name`` boosts (a composite or a metric); None if it is no boosted metric."""
        return None if self.forecast is None else self.forecast.boosted_bases.get(name)

    def boost_rule(self, name: str) -> tuple[float, float]:
        """(idle, elasticity) with which the boosted metric ``name`` of ``forecast.also`` reads its metric at boost
        x the load: those of the base composite's term on its ``like`` when the composite has one that tracks load
        (not flat); (0, 1), in proportion, otherwise (no ``like``, or a composite whose terms changed, e.g. pasted
        from ``calibrate`` on another histogram)."""
        if self.forecast is None:
            return 0.0, 1.0
        for also in self.forecast.also:
            if also.metric + BOOSTED_SUFFIX == name and also.like is not None:
                for term in self.composites[self.forecast.base].terms:
                    if term.metric == also.like and not term.flat:
                        return term.idle, term.elasticity
        return 0.0, 1.0

    @property
    def boost_flat_share(self) -> float:
        """The boosted composite's flat share (``adapter.aggregate.at_load``); 0 without a forecast section."""
        return 0.0 if self.forecast is None else self.composites[self.forecast.base].flat_share

    @property
    def pod_labels(self) -> tuple[str, ...]:
        """Every label any layout uses, in layout order (namespace before pod), followed by the labels
        the trust rules check (so a backend-side ``by (...)`` keeps them), without repeats."""
        seen: dict[str, None] = {}
        for lay in self.layouts:
            seen.setdefault(lay.namespace)
            seen.setdefault(lay.pod)
        for lay in self.layouts:
            for label, _ in lay.trust:
                seen.setdefault(label)
        return tuple(seen)

    def layouts_for(self, metric: MetricDef) -> tuple[Layout, ...]:
        """The layouts trusted to attribute ``metric``'s series to pods (catalog order)."""
        if metric.layouts is None:
            return self.layouts
        return tuple(lay for lay in self.layouts if lay.name in metric.layouts)


def _require(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise ConfigError(f"{where}: {msg}")


def _mapping(value: Any, where: str) -> dict[str, Any]:
    _require(isinstance(value, dict), where, f"expected a mapping, got {type(value).__name__}")
    return value  # type: ignore[no-any-return]


def _str(entry: dict[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = entry.get(key, default)
    _require(isinstance(value, str) and value != "", f"{where}.{key}", "required, a non-empty string")
    return value  # type: ignore[return-value]


def _number(entry: dict[str, Any], key: str, where: str) -> float:
    value = entry.get(key)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and value == value
    _require(ok, f"{where}.{key}", f"required, a number (got {value!r})")
    return float(value)  # type: ignore[arg-type]


def _parse_metric(name: str, raw: Any, layout_names: tuple[str, ...] = ()) -> MetricDef:
    where = f"metrics.{name}"
    _require(bool(METRIC_NAME.match(name)), where, "a metric name must match [a-zA-Z_:][a-zA-Z0-9_:]*")
    entry = _mapping(raw, where)
    unknown = set(entry) - {"help", "query", "reduce", "objects", "window", "layouts", "nonnegative", "gpu"}
    _require(not unknown, where, f"unknown keys {sorted(unknown)}")
    query = _str(entry, "query", where)
    _require("<<matchers>>" in query, f"{where}.query", "must contain <<matchers>> (it selects the pods)")
    for token in re.findall(r"<<[^>]*>>", query):
        _require(token in PLACEHOLDERS, f"{where}.query", f"unknown placeholder {token}; known: {PLACEHOLDERS}")
    reduce = _str(entry, "reduce", where, "max")
    _require(reduce in get_args(Reduce), f"{where}.reduce", f"{reduce!r} is not one of {get_args(Reduce)}")
    objects = _str(entry, "objects", where, "mean")
    _require(objects in get_args(Combine), f"{where}.objects", f"{objects!r} is not one of {get_args(Combine)}")
    window = entry.get("window")
    if window is not None:
        _require(
            isinstance(window, str) and bool(DURATION.match(window)),
            f"{where}.window",
            f"{window!r} is not a PromQL duration like 2m",
        )
    _require(
        ("<<window>>" in query) == (window is not None),
        f"{where}.window",
        "a query using <<window>> needs a window, and a window is only allowed when the query uses it",
    )
    layouts = entry.get("layouts")
    if layouts is not None:
        _require(
            isinstance(layouts, list) and len(layouts) > 0 and all(isinstance(n, str) for n in layouts),
            f"{where}.layouts",
            "a non-empty list of layout names",
        )
        for n in layouts:
            _require(n in layout_names, f"{where}.layouts", f"{n!r} is not a layout name; known: {list(layout_names)}")
        layouts = tuple(layouts)
    nonnegative = entry.get("nonnegative", True)
    _require(isinstance(nonnegative, bool), f"{where}.nonnegative", "true or false")
    gpu = entry.get("gpu", False)
    _require(isinstance(gpu, bool), f"{where}.gpu", "true or false")
    return MetricDef(
        name=name,
        help=str(entry.get("help", "")),
        query=query,
        reduce=cast(Reduce, reduce),
        objects=cast(Combine, objects),
        window=window,
        layouts=layouts,
        nonnegative=nonnegative,
        gpu=gpu,
    )


def _parse_composite(name: str, raw: Any, metrics: dict[str, MetricDef]) -> CompositeDef:
    where = f"composites.{name}"
    _require(bool(METRIC_NAME.match(name)), where, "a metric name must match [a-zA-Z_:][a-zA-Z0-9_:]*")
    _require(name not in metrics, where, "a composite cannot share its name with a metric")
    entry = _mapping(raw, where)
    unknown = set(entry) - {"help", "terms", "objects"}
    _require(not unknown, where, f"unknown keys {sorted(unknown)}")
    raw_terms = entry.get("terms")
    _require(isinstance(raw_terms, list) and len(raw_terms) > 0, f"{where}.terms", "required, a non-empty list")
    terms = []
    for i, raw_term in enumerate(raw_terms):  # type: ignore[arg-type]
        tw = f"{where}.terms[{i}]"
        t = _mapping(raw_term, tw)
        metric = _str(t, "metric", tw)
        _require(metric in metrics, f"{tw}.metric", f"{metric!r} is not a metric of this catalog")
        unknown_t = set(t) - {"metric", "weight", "target", "idle", "when_missing", "flat", "elasticity"}
        _require(not unknown_t, tw, f"unknown keys {sorted(unknown_t)}")
        weight, target = _number(t, "weight", tw), _number(t, "target", tw)
        idle = _number(t, "idle", tw) if "idle" in t else 0.0
        _require(weight > 0, f"{tw}.weight", "must be > 0")
        _require(target > 0, f"{tw}.target", "must be > 0")
        _require(0 <= idle < target, f"{tw}.idle", "must be >= 0 and below the target")
        when_missing = _str(t, "when_missing", tw, "omit_pod")
        _require(
            when_missing in get_args(WhenMissing),
            f"{tw}.when_missing",
            f"{when_missing!r} is not one of {get_args(WhenMissing)}",
        )
        flat = t.get("flat", False)
        _require(isinstance(flat, bool), f"{tw}.flat", f"must be true or false, got {flat!r}")
        elasticity = _number(t, "elasticity", tw) if "elasticity" in t else 1.0
        _require(
            MIN_ELASTICITY <= elasticity <= MAX_ELASTICITY,
            f"{tw}.elasticity",
            f"must be between {MIN_ELASTICITY:g} and {MAX_ELASTICITY:g} (1: the term grows in proportion to the load)",
        )
        _require(
            not (flat and "elasticity" in t),
            f"{tw}.elasticity",
            "a flat term rises only up to its target under the boost: it takes no elasticity",
        )
        terms.append(
            Term(
                metric=metric,
                weight=weight,
                target=target,
                idle=idle,
                when_missing=cast(WhenMissing, when_missing),
                flat=flat,
                elasticity=elasticity,
            )
        )
    objects = _str(entry, "objects", where, "mean")
    _require(
        not all(t.flat for t in terms),
        f"{where}.terms",
        "every term is flat: nothing would track load (the boost would have nothing to scale)",
    )
    _require(objects in get_args(Combine), f"{where}.objects", f"{objects!r} is not one of {get_args(Combine)}")
    return CompositeDef(name=name, help=str(entry.get("help", "")), terms=tuple(terms), objects=objects)  # type: ignore[arg-type]


def _parse_layout(i: int, raw: Any) -> Layout:
    where = f"layouts[{i}]"
    entry = _mapping(raw, where)
    unknown = set(entry) - {"pod", "namespace", "name", "trust"}
    _require(not unknown, where, f"unknown keys {sorted(unknown)}")
    pod, ns = _str(entry, "pod", where), _str(entry, "namespace", where)
    for label in (pod, ns):
        _require(bool(LABEL_NAME.match(label)), where, f"{label!r} is not a Prometheus label name")
    name = _str(entry, "name", where, pod)
    trust = []
    for label, rx in _mapping(entry.get("trust") or {}, f"{where}.trust").items():
        _require(
            isinstance(label, str) and bool(LABEL_NAME.match(label)),
            f"{where}.trust",
            f"{label!r} is not a Prometheus label name",
        )
        _require(label not in (pod, ns), f"{where}.trust", f"{label!r} is this layout's own pod/namespace label")
        _require(isinstance(rx, str), f"{where}.trust.{label}", "a regex string")
        try:
            re.compile(rx)
        except re.error as exc:
            raise ConfigError(f"{where}.trust.{label}: not a valid regex: {exc}") from None
        trust.append((label, rx))
    return Layout(pod=pod, namespace=ns, name=name, trust=tuple(trust))


def _parse_forecast(
    raw: Any,
    composites: dict[str, CompositeDef],
    layout_names: tuple[str, ...] = (),
    metrics: Mapping[str, MetricDef] | None = None,
) -> ForecastDef:
    where = "forecast"
    entry = _mapping(raw, where)
    known = {
        "base",
        "also",
        "load_query",
        "window",
        "step",
        "history_points",
        "horizon_steps",
        "model",
        "max_boost",
        "rise_quantile",
        "rise_within",
        "forget_after",
        "workloads",
        "load_layouts",
        "max_workloads",
        # -- per-namespace shares --
        "max_workloads_per_namespace",
        "max_sets_per_namespace",
    }
    unknown = set(entry) - known
    _require(not unknown, where, f"unknown keys {sorted(unknown)}")
    base = _str(entry, "base", where)
    _require(base in composites, f"{where}.base", f"{base!r} is not a composite of this catalog")
    load_doc = {
        "query": _str(entry, "load_query", where),
        "window": entry.get("window"),
        "reduce": "sum",
        "objects": "sum",
    }
    if entry.get("load_layouts") is not None:
        load_doc["layouts"] = entry["load_layouts"]
    load = _parse_metric("forecast_load", load_doc, layout_names)
    durations: dict[str, float] = {}
    for key, default in (("step", "5m"), ("forget_after", "1h")):
        text = entry.get(key, default)
        try:
            durations[key] = duration_seconds(str(text))
        except ValueError as exc:
            raise ConfigError(f"{where}.{key}: {exc}") from None
        _require(durations[key] > 0, f"{where}.{key}", "must be > 0")
    ints: dict[str, int] = {}
    shares = (  # per-namespace shares
        ("max_workloads_per_namespace", ForecastDef.max_workloads_per_namespace, 1),
        ("max_sets_per_namespace", ForecastDef.max_sets_per_namespace, 0),
    )
    for key, int_default, low in (
        ("history_points", 120, 10),
        ("horizon_steps", 6, 1),
        ("max_workloads", 500, 1),
        *shares,
    ):
        value = entry.get(key, int_default)
        _require(
            isinstance(value, int) and not isinstance(value, bool) and value >= low,
            f"{where}.{key}",
            f"an integer >= {low}",
        )
        ints[key] = int(value)
    model = str(entry.get("model", DEFAULT_MODEL))
    _require(model == AUTO or model in MODELS, f"{where}.model", f"{model!r} is not one of {sorted([*MODELS, AUTO])}")
    max_boost = entry.get("max_boost", DEFAULT_MAX_BOOST)
    _require(
        isinstance(max_boost, (int, float)) and not isinstance(max_boost, bool) and max_boost >= 1,
        f"{where}.max_boost",
        "a number >= 1",
    )
    rise_q = entry.get("rise_quantile", DEFAULT_RISE_QUANTILE)
    _require(
        isinstance(rise_q, (int, float)) and not isinstance(rise_q, bool) and 0 <= rise_q < 1,
        f"{where}.rise_quantile",
        "a number in [0, 1) (0: no rise term)",
    )
    try:
        rise_within = duration_seconds(str(entry.get("rise_within", "15m")))
    except ValueError as exc:
        raise ConfigError(f"{where}.rise_within: {exc}") from None
    lead_steps = rise_within / durations["step"]
    _require(
        lead_steps >= 1 and abs(lead_steps - round(lead_steps)) < 1e-9,
        f"{where}.rise_within",
        "a whole number (>= 1) of steps",
    )
    also = _parse_also(entry.get("also") or [], metrics or {}, f"{where}.also")
    workloads = []
    for i, w in enumerate(entry.get("workloads") or []):
        ww = _mapping(w, f"{where}.workloads[{i}]")
        workloads.append(
            (_str(ww, "namespace", f"{where}.workloads[{i}]"), _str(ww, "deployment", f"{where}.workloads[{i}]"))
        )
    return ForecastDef(
        base=base,
        load=load,
        also=tuple(also),
        step_s=durations["step"],
        history_points=ints["history_points"],
        horizon_steps=ints["horizon_steps"],
        model=model,
        max_boost=float(max_boost),
        rise_quantile=float(rise_q),
        rise_lead_steps=round(lead_steps),
        forget_after_s=durations["forget_after"],
        workloads=tuple(workloads),
        max_workloads=ints["max_workloads"],
        max_workloads_per_namespace=ints["max_workloads_per_namespace"],
        max_sets_per_namespace=ints["max_sets_per_namespace"],
    )


def _parse_also(raw: Any, metrics: Mapping[str, MetricDef], where: str) -> tuple[AlsoBoosted, ...]:
    """``forecast.also``: metric names, or ``{metric: NAME, like: METRIC}`` to boost it by the rule of the base
    composite's term on METRIC (``Catalog.boost_rule``)."""
    _require(isinstance(raw, list), where, "a list of metric names or {metric, like} entries")
    out = []
    for i, item in enumerate(raw):
        here = f"{where}[{i}]"
        entry = {"metric": item} if isinstance(item, str) else _mapping(item, here)
        unknown = set(entry) - {"metric", "like"}
        _require(not unknown, here, f"unknown keys {sorted(unknown)}")
        name = _str(entry, "metric", here)
        _require(name in metrics, f"{here}.metric", f"{name!r} is not a metric of this catalog (not a composite)")
        like = entry.get("like")
        if like is not None:
            _require(
                isinstance(like, str) and like in metrics, f"{here}.like", f"{like!r} is not a metric of this catalog"
            )
        out.append(AlsoBoosted(name, like))
    _require(len({a.metric for a in out}) == len(out), where, "a metric is named twice")
    return tuple(out)


def _parse_store(raw: Any) -> StoreConfig | None:
    """The ``store`` section: ``false`` turns the store off; absent keys take ``StoreConfig``'s defaults
    (``max_staleness`` defaults to two refresh intervals of the refresh given)."""
    if raw is False:
        return None
    entry = _mapping(raw if raw is not None else {}, "store")
    share_keys = {"max_keys_per_namespace", "loads_per_namespace", "active"}  # per-namespace shares
    unknown = set(entry) - {"refresh", "max_staleness", "max_keys", "idle"} - share_keys
    _require(not unknown, "store", f"unknown keys {sorted(unknown)}")
    seconds: dict[str, float] = {}
    for key in ("refresh", "max_staleness", "idle", "active"):
        if key in entry:
            try:
                seconds[key] = duration_seconds(str(entry[key]))
            except ValueError as exc:
                raise ConfigError(f"store.{key}: {exc}") from None
            _require(seconds[key] > 0, f"store.{key}", "must be > 0")
    default = StoreConfig()
    refresh = seconds.get("refresh", default.refresh_s)
    staleness = seconds.get("max_staleness", 2 * refresh)
    _require(staleness >= refresh, "store.max_staleness", "must be at least one refresh interval")
    max_keys = entry.get("max_keys", default.max_keys)
    _require(
        isinstance(max_keys, int) and not isinstance(max_keys, bool) and max_keys >= 1,
        "store.max_keys",
        "an integer >= 1",
    )
    # -- per-namespace shares (adapter/store.py) ------------------------------------------------------------
    counts: dict[str, int] = {}
    for key in ("max_keys_per_namespace", "loads_per_namespace"):
        value = entry.get(key, getattr(default, key))
        _require(
            isinstance(value, int) and not isinstance(value, bool) and value >= 1, f"store.{key}", "an integer >= 1"
        )
        counts[key] = int(value)
    active = seconds.get("active")
    _require(active is None or active >= refresh, "store.active", "must be at least one refresh interval")
    # -- end of the per-namespace shares --
    return StoreConfig(
        refresh_s=refresh,
        max_staleness_s=staleness,
        max_keys=int(max_keys),
        idle_s=seconds.get("idle", default.idle_s),
        max_keys_per_namespace=counts["max_keys_per_namespace"],
        loads_per_namespace=counts["loads_per_namespace"],
        active_s=active,
    )


def parse_catalog(doc: Any) -> Catalog:
    """Validate a catalog document (the parsed YAML). Raises ConfigError naming the bad entry."""
    root = _mapping(doc, "catalog")
    unknown = set(root) - {"layouts", "gpu_labels", "metrics", "composites", "cache_ttl_seconds", "forecast", "store"}
    _require(not unknown, "catalog", f"unknown keys {sorted(unknown)}")
    raw_layouts = root.get("layouts")
    _require(isinstance(raw_layouts, list) and len(raw_layouts) > 0, "layouts", "required, a non-empty list")
    layouts = [_parse_layout(i, raw) for i, raw in enumerate(raw_layouts)]  # type: ignore[arg-type]
    layout_names = tuple(lay.name for lay in layouts)
    _require(len(set(layout_names)) == len(layout_names), "layouts", f"layout names repeat: {list(layout_names)}")
    gpu_labels = root.get("gpu_labels", [])
    _require(
        isinstance(gpu_labels, list) and all(isinstance(g, str) and LABEL_NAME.match(g) for g in gpu_labels),
        "gpu_labels",
        "a list of Prometheus label names",
    )
    raw_metrics = _mapping(root.get("metrics", {}), "metrics")
    metrics = {name: _parse_metric(str(name), raw, layout_names) for name, raw in raw_metrics.items()}
    raw_composites = _mapping(root.get("composites", {}) or {}, "composites")
    composites = {name: _parse_composite(str(name), raw, metrics) for name, raw in raw_composites.items()}
    _require(bool(metrics), "metrics", "the catalog serves no metric")
    ttl = root.get("cache_ttl_seconds", 0)
    _require(
        isinstance(ttl, (int, float)) and not isinstance(ttl, bool) and ttl >= 0, "cache_ttl_seconds", "a number >= 0"
    )
    forecast = _parse_forecast(root["forecast"], composites, layout_names, metrics) if root.get("forecast") else None
    catalog = Catalog(
        layouts=tuple(layouts),
        gpu_labels=tuple(gpu_labels),
        metrics=metrics,
        composites=composites,
        cache_ttl_seconds=float(ttl),
        forecast=forecast,
        store=_parse_store(root.get("store", {})),
    )
    names = catalog.names()
    for extra in catalog.forecast_names():
        _require(extra not in names, "forecast", f"{extra!r} is also the name of a metric or composite")
    return catalog


def load_catalog(path: str | Path | None) -> Catalog:
    """Load and validate a catalog file; ``None`` loads the embedded default (``adapter/catalog.yaml``)."""
    if path is None:
        text = resources.files("adapter").joinpath("catalog.yaml").read_text(encoding="utf-8")
        where = "embedded catalog"
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read catalog {path}: {exc.strerror}") from None
        where = str(path)
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{where}: not valid YAML: {exc}") from None
    try:
        return parse_catalog(doc)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
