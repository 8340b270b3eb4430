"""prometheus-adapter's rules served: custom metrics and external metrics from its configuration file.

``RulesProvider`` keeps the ``Registry`` discovery last built (``adapter/promadapter``): a guarded background
loop lists series once per distinct ``seriesQuery`` every ``RelistSettings.interval_s`` and rebuilds it off the
event loop, keeping the last good one when a listing fails (upstream refuses a partial update too).

Per request, as prometheus-adapter's ``pkg/custom-provider/provider.go``: the metric is looked up by
(group-resource, name), its rule renders the query (``metrics_query``: every request value escaped), and each
answer series is matched to an object by the resource's label (``label_for``). Values are what upstream
serves: ``int64(v * 1000)`` milli-units, truncated toward zero; a NaN or infinite sample is omitted.

Two ways to answer, chosen per (rule, resource) at load time and logged:

- *stored* (the default when the catalog's ``store`` is on): the rule's query is one aggregation
  ``by (<resource label>)`` of series-wise functions (``groups_by_resource``), so one query for every object
  of the namespace (``label!=""``) answers each object exactly as the query naming it. The value store keeps
  that answer per (namespace, rule metric, metricLabelSelector): one backend query per key per refresh,
  whatever the number of HPAs, with the store's per-namespace shares.
- *direct*: any other query (a binary operation, ``topk``...), or with the store off: one query per request,
  as prometheus-adapter does.

External rules are stored per (namespace, metric, metricSelector) the same way: their query names no object.

With an ``ObjectSource`` (the Kubernetes API), each re-list first reads API discovery, so a CRD's plural
resolves as prometheus-adapter's RESTMapper resolves it (kind, version), and ``*`` on any resource lists the
namespace's objects matching the ``labelSelector`` from the API, as upstream's ``ListObjectNames`` does. Without
one, a CRD an override names is served as written, its kind guessed from the plural (``guess_kind``), and ``*``
with a ``labelSelector`` works on pods only.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from adapter.errors import BadRequest, NotFound
from adapter.labels import Selector
from adapter.pods.base import ObjectSource, PodSource, ServedResource
from adapter.promadapter.config import AdapterConfig, Rule, with_table
from adapter.promadapter.discovery import RelistSettings, list_all
from adapter.promadapter.metrics_query import groups_by_resource, render_custom, render_external, resource_label
from adapter.promadapter.registry import CustomMetric, Registry, Source, discover, normalize_request
from adapter.promadapter.resources import BUILTIN, ApiResource, GroupResource, ResourceTable, guess_kind
from adapter.provider.base import MetricInfo, MetricSample, ObjectRef, PodSamples, metric_not_found
from adapter.query.client import PromClient
from adapter.samples import Sample
from adapter.store import Store, StoreConfig
from adapter.tasks import BackgroundLoop

log = logging.getLogger(__name__)
EMPTY = Registry({}, {})
DEFAULT_RELIST = RelistSettings()
PODS = GroupResource("", "pods")
RETRY_S = 30.0  # how soon a failed listing is retried


def served_value(value: float) -> float | None:
    """The value prometheus-adapter serves for a sample: ``NewMilliQuantity(int64(v*1000))`` (truncated toward
    zero, ``pkg/custom-provider/provider.go`` ``metricFor``); None for NaN, infinity or past int64."""
    if not math.isfinite(value) or abs(value) * 1000 >= 2**63:
        return None
    return math.trunc(value * 1000) / 1000


@dataclass(frozen=True, slots=True)
class Answer:
    """One query's answer by object name (custom) or as the list of items (external): value and timestamp."""

    by_name: Mapping[str, tuple[float, float]]
    items: tuple[tuple[Mapping[str, str], float, float], ...] = ()


# A key of the rules' value store: (namespace, or "" for a root-scoped resource; the custom metric, or the
# external metric's name; the request's metricLabelSelector or metricSelector). Its first element is the
# namespace the store's shares charge.
RulesKey = tuple[str, CustomMetric | str, Selector]


@dataclass(frozen=True, slots=True)
class ResolvedResource:
    """A request's resource as the rules know it: canonical name, the kind and apiVersion of its objects."""

    canonical: str
    kind: str
    api_version: str
    root_scoped: bool


@dataclass(frozen=True, slots=True)
class RulesSetup:
    """What ``serve --prometheus-adapter-config`` hands the composition root: the parsed file, the re-list
    cadence, and whether the value store may answer (``stored``; False: every rule direct, as upstream)."""

    config: AdapterConfig
    relist: RelistSettings = DEFAULT_RELIST
    stored: bool = True
    objects: ObjectSource | None = None  # None: the composition root makes one when it reaches the API


def table_with(base: ResourceTable, served: list[ServedResource]) -> ResourceTable:
    """``base`` extended with what API discovery serves beyond it (a cluster's CRDs), after the built-ins."""
    known = {(r.group, r.plural) for r in base.resources}
    extra = [
        ApiResource(r.group, r.plural, r.singular, r.kind, r.version)
        for r in served
        if (r.group, r.plural) not in known
    ]
    return base.with_resources(extra) if extra else base


class RulesProvider:
    """custom.metrics.k8s.io and external.metrics.k8s.io for a prometheus-adapter configuration (see the module
    docstring). ``store`` None: every request queries the backend (direct mode for every rule)."""

    def __init__(
        self,
        config: AdapterConfig,
        client: PromClient,
        pods: PodSource | None,
        clock: Callable[[], float] = time.time,
        *,
        relist: RelistSettings = DEFAULT_RELIST,
        store: StoreConfig | None = None,
        table: ResourceTable = BUILTIN,
        on_modes: Callable[[list[tuple[str, str, str]]], None] | None = None,
        objects: ObjectSource | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.pods = pods
        self.clock = clock
        self.relist = relist
        self.base_table = self.table = table
        self.active = config  # the rules as the current table resolves them
        self.objects = objects
        self.discovery_error = ""  # the last failed API discovery's reason, "" after a success
        self._written: frozenset[GroupResource] = frozenset()  # served resources no table entry knows
        self.on_modes = on_modes  # told (rule, resource, mode) after every discovery swapped in
        self.on_listed: Callable[[], None] | None = None  # called after every discovery swapped in
        self.registry = EMPTY
        self.listings = 0  # successful re-lists
        self.listing_error = ""  # the last failed re-list's reason, "" after a success
        self.store: Store[RulesKey, Answer] | None = None
        if store is not None:
            self.store = Store("promadapter", self._load, store, clock)
        self._stored: dict[tuple[int, GroupResource], bool] = {}
        self._loop = BackgroundLoop("promadapter-relist", self._relist_later, relist.interval_s, log=log)
        self._first = True

    # -- discovery ---------------------------------------------------------------------------------
    async def relist_once(self) -> None:
        """List every distinct ``seriesQuery`` and swap in the registry it gives; on failure keep the last one."""
        queries = [r.series_query for r in self.config.rules + self.config.external_rules]
        await self._discover_api()
        try:
            answers = await list_all(self.client, queries, now=self.clock(), relist=self.relist)
            registry = await asyncio.to_thread(discover, self.active, answers)
        except Exception as exc:  # the listing failed: serve what the last good one found
            self.listing_error = str(exc) or type(exc).__name__
            log.warning("prometheus-adapter rules: series listing failed, keeping the last discovery: %s", exc)
            # Retried sooner than a whole interval (10 min by default): a backend down at start-up must not
            # leave the rules unserved that long.
            self._loop.interval_s = min(self.relist.interval_s, RETRY_S)
            return
        self.registry = registry
        self._written = frozenset(m.resource for m in registry.custom if self.table.api_resource(m.resource) is None)
        if self.on_modes is not None:
            self.on_modes(self.mode_table())
        if self.on_listed is not None:
            self.on_listed()
        self.listings += 1
        self.listing_error = ""
        self._loop.interval_s = self.relist.interval_s

    async def _discover_api(self) -> None:
        """Extend the resource table with the cluster's API discovery; on failure keep the last table."""
        if self.objects is None:
            return
        try:
            served = await self.objects.served_resources(skip_groups=self.base_table.groups)
        except Exception as exc:  # the API is unreachable or refuses: resolve as the last discovery did
            self.discovery_error = str(exc) or type(exc).__name__
            log.warning("prometheus-adapter rules: Kubernetes API discovery failed, keeping the last one: %s", exc)
            return
        self.discovery_error = ""
        table = table_with(self.base_table, served)
        if table != self.table:
            self.table = table
            self.active = with_table(self.config, table)
            self._stored.clear()

    def stored(self, rule: Rule, resource: GroupResource) -> bool:
        """Whether requests for ``resource`` under ``rule`` are answered from the value store."""
        key = (id(rule), resource)
        if key not in self._stored:
            self._stored[key] = self.store is not None and groups_by_resource(rule, resource)
        return self._stored[key]

    def mode_table(self) -> list[tuple[str, str, str]]:
        """(rule, resource or ``external``, ``stored``/``direct``) for every resource a rule serves; the rule by
        its place in the file (``rules[0]``, ``externalRules[1]``), never by its text (a tenant's series)."""
        rows = {
            (
                source.rule.where.split(" ", 1)[0],
                str(m.resource),
                "stored" if self.stored(source.rule, m.resource) else "direct",
            )
            for m, source in self.registry.custom.items()
        }
        external = "direct" if self.store is None else "stored"
        rows |= {
            (source.rule.where.split(" ", 1)[0], "external", external) for source in self.registry.external.values()
        }
        return sorted(rows)

    def modes(self) -> list[str]:
        """Per rule, how each resource it serves is answered (``rules[0] (...): pods stored, services direct``):
        what start-up logs, one line per rule whatever the number of metrics."""
        by_rule: dict[str, dict[str, str]] = {}
        for m, source in sorted(self.registry.custom.items()):
            mode = "stored" if self.stored(source.rule, m.resource) else "direct"
            by_rule.setdefault(source.rule.where, {})[str(m.resource)] = mode
        for source in self.registry.external.values():
            by_rule.setdefault(source.rule.where, {})["external"] = "direct" if self.store is None else "stored"
        return [f"{where}: " + ", ".join(f"{r} {m}" for r, m in modes.items()) for where, modes in by_rule.items()]

    async def start(self) -> None:
        """The first listing (awaited, so discovery is complete when serving starts), then the re-list loop."""
        await self.relist_once()
        for line in self.modes():
            log.info("prometheus-adapter rules: %s", line)
        if self.store is not None:
            self.store.start()
        self._loop.start()

    async def _relist_later(self) -> None:
        # The loop runs its body at once when started; start() has just listed, so that first run is skipped.
        if self._first:
            self._first = False
            return
        await self.relist_once()

    async def close(self) -> None:
        await self._loop.stop()
        if self.store is not None:
            await self.store.close()
        if self.objects is not None:
            await self.objects.close()

    # -- custom.metrics.k8s.io ---------------------------------------------------------------------
    def list_all_metrics(self) -> list[MetricInfo]:
        """Every custom metric discovery found (``MetricInfo(resource, metric, namespaced)``)."""
        return [MetricInfo(str(m.resource), m.metric, m.namespaced) for m in self.registry.custom_metrics()]

    def resolve(self, resource: str) -> ResolvedResource | None:
        """A request URL's resource (``services``, ``deployment.apps``, ``jobs.batch``, a CRD's
        ``plural.group``) as the rules know it."""
        gr = self._normalize(resource)
        if gr is None:
            return None
        kind, api_version = self.reference(gr)
        return ResolvedResource(str(gr), kind, api_version, not gr.namespaced_metric)

    def _normalize(self, resource: str) -> GroupResource | None:
        gr = normalize_request(self.table, resource)
        if gr is None:  # a CRD an override names as written, which no discovery knows
            plural, _, group = resource.partition(".")
            written = GroupResource(group, plural.lower())
            gr = written if group and written in self._written else None
        return gr

    def reference(self, gr: GroupResource) -> tuple[str, str]:
        """``describedObject``'s kind and apiVersion for ``gr``: the table's (built-in or discovered), else for a
        CRD no discovery knows the kind guessed from its plural and ``group/`` (upstream's ``group/version``
        with the version unknown)."""
        entry = self.table.api_resource(gr)
        if entry is not None:
            return entry.kind, entry.api_version
        return guess_kind(gr.resource), f"{gr.group}/"

    def serves(self, info: MetricInfo) -> bool:
        return self._find(info) is not None

    def _find(self, info: MetricInfo) -> tuple[CustomMetric, Source] | None:
        gr = self._normalize(info.resource)
        return None if gr is None else self.registry.find_custom(gr, info.metric)

    async def get_metric_by_name(self, obj: ObjectRef, info: MetricInfo, metric_selector: Selector) -> MetricSample:
        """The value of one object; NotFound when the answer has none for it."""
        found = self._find(info)
        if found is None:
            raise metric_not_found(info, obj.name)
        answer = await self._answer(found, obj.namespace, [obj.name], metric_selector)
        hit = answer.by_name.get(obj.name)
        if hit is None:
            raise metric_not_found(info, obj.name, metric_selector)
        return MetricSample(obj, info.metric, hit[1], hit[0], None, metric_selector)

    async def get_metric_by_selector(
        self, namespace: str, selector: Selector, info: MetricInfo, metric_selector: Selector
    ) -> Sequence[MetricSample]:
        """One value per object matching ``selector`` with data. Pods come from the pod source, other resources'
        objects from the Kubernetes API (``objects``); without it, an empty ``labelSelector`` lists the objects
        the answer has data for."""
        found = self._find(info)
        if found is None:
            raise metric_not_found(info, "*")
        metric, _ = found
        names: list[str] | None = None
        if metric.resource == PODS and self.pods is not None:
            names = sorted(await self.pods.pods_for_selector(namespace, selector))
        elif self.objects is not None:
            names = await self._object_names(metric.resource, namespace, selector)
        elif not selector.is_everything():
            raise BadRequest(
                f"a labelSelector on {metric.resource} needs the objects' labels, which only the Kubernetes API "
                "has (pod source kubernetes); name the object, or select pods"
            )
        if names is not None and not names:
            return []
        answer = await self._answer(found, namespace, names, metric_selector)
        if names is not None and metric.resource == PODS:  # the wire encoder's columnar fast path
            hits = [n for n in names if n in answer.by_name]
            by_name = answer.by_name
            ts = [by_name[n][1] for n in hits]
            values = [by_name[n][0] for n in hits]
            return PodSamples(namespace, info.metric, None, metric_selector, hits, ts, values)
        kind, api_version = self.reference(metric.resource)
        wanted = sorted(answer.by_name) if names is None else [n for n in names if n in answer.by_name]
        return [
            MetricSample(
                ObjectRef(kind, api_version, n, namespace),
                info.metric,
                answer.by_name[n][1],
                answer.by_name[n][0],
                None,
                metric_selector,
            )
            for n in wanted
        ]

    async def _object_names(self, resource: GroupResource, namespace: str, selector: Selector) -> list[str]:
        assert self.objects is not None
        entry = self.table.api_resource(resource)
        if entry is None:
            raise BadRequest(
                f"{resource} is not served by the Kubernetes API's discovery, so its objects cannot be listed;"
                " name the object"
            )
        return await self.objects.names(entry.group, entry.version, entry.plural, namespace, selector)

    async def _answer(
        self,
        found: tuple[CustomMetric, Source],
        namespace: str | None,
        names: list[str] | None,
        metric_selector: Selector,
    ) -> Answer:
        metric, source = found
        ns = None if not metric.namespaced else namespace
        if self.store is not None and self.stored(source.rule, metric.resource):
            key: RulesKey = (ns or "", metric, metric_selector)
            answer = (await self.store.get(key)).value
            if names is not None and any(n not in answer.by_name for n in names):
                self.store.refresh_soon(key, [n for n in names if n not in answer.by_name])  # a new object
            return answer
        return await self._query_custom(source, metric.resource, ns, names, metric_selector, self.clock())

    async def _query_custom(
        self,
        source: Source,
        resource: GroupResource,
        namespace: str | None,
        names: list[str] | None,
        metric_selector: Selector,
        at: float,
    ) -> Answer:
        promql = render_custom(source.rule, source.series, resource, namespace, names, metric_selector)
        label = resource_label(source.rule, resource)
        samples = await self.client.query(promql, at)
        by_name: dict[str, tuple[float, float]] = {}
        for s in samples:
            name = s.labels.get(label)
            value = served_value(s.value)
            if name and value is not None:
                by_name[name] = (value, s.ts)
        return Answer(by_name)

    async def _load(self, key: RulesKey, at: float) -> Answer:
        """The store's loader: the namespace-wide query of the key's metric under the current discovery."""
        namespace, metric, selector = key
        if isinstance(metric, str):
            source = self.registry.external.get(metric)
            if source is None:
                raise NotFound(f"external metric {metric!r} is no longer discovered")
            return await self._query_external(source, namespace, selector, at)
        found = self.registry.find_custom(metric.resource, metric.metric)
        if found is None:
            raise NotFound(f"{metric.name} is no longer discovered")
        return await self._query_custom(found[1], metric.resource, namespace or None, None, selector, at)

    # -- external.metrics.k8s.io -------------------------------------------------------------------
    def list_external(self) -> list[str]:
        """Every external metric discovery found."""
        return sorted(self.registry.external)

    def serves_external(self, metric: str) -> bool:
        return metric in self.registry.external

    async def get_external(
        self, namespace: str, metric: str, selector: Selector
    ) -> list[tuple[dict[str, str], float, float]]:
        """The items (all the sample's labels, value, timestamp) of an external metric; NotFound when unknown."""
        source = self.registry.external.get(metric)
        if source is None:
            raise NotFound(f"external metric {metric!r} is not served; see discovery")
        if self.store is not None:
            answer = (await self.store.get((namespace, metric, selector))).value
        else:
            answer = await self._query_external(source, namespace, selector, self.clock())
        return [(dict(labels), value, ts) for labels, value, ts in answer.items]

    async def _query_external(self, source: Source, namespace: str, selector: Selector, at: float) -> Answer:
        promql = render_external(source.rule, source.series, namespace, selector)
        samples: list[Sample] = await self.client.query(promql, at)
        items = []
        for s in samples:
            value = served_value(s.value)
            if value is not None:
                items.append((dict(s.labels), value, s.ts))
        return Answer({}, tuple(items))
