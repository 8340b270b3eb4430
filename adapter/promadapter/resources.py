"""Group-resources and which series labels name them, as prometheus-adapter resolves them.

prometheus-adapter normalizes every group-resource through the cluster's RESTMapper
(``CustomMetricInfo.Normalized``: ``ResourceFor`` then ``ResourceSingularizer``), so ``pod``, ``pods`` and
``Pods`` are one resource, ``deployment`` is ``deployments.apps``, ``job`` is ``jobs.batch``; a name that no
served API knows is an error for an override and skipped for a template-matched label
(``pkg/naming/resource_converter.go``). Here the RESTMapper is a ``ResourceTable``: Kubernetes' built-in
resources (``BUILTIN``), extended with a cluster's CRDs by whoever has its discovery (``with_resources``).

``ResourceConverter`` is the two directions of one rule's ``resources``: label -> group-resource for discovery
(overrides first, then the template read backwards as a regular expression) and group-resource -> label for
queries (overrides first, then the template executed with the group's dots and dashes as underscores and the
resource singular).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from adapter.promadapter.gotemplate import Struct, Template, TemplateError

# Root-scoped resources whose metrics prometheus-adapter lists as not namespaced
# (pkg/naming/resource_converter.go NsGroupResource, NodeGroupResource, PVGroupResource).
_ROOT_SCOPED = frozenset({("", "namespaces"), ("", "nodes"), ("", "persistentvolumes")})
_MAX_RESOLVED = 10_000
_GROUP_SANITIZER = str.maketrans({".": "_", "-": "_"})


@dataclass(frozen=True, order=True)
class GroupResource:
    """A Kubernetes group-resource: ``pods`` (core group ``""``), ``deployments.apps``."""

    group: str
    resource: str

    def __str__(self) -> str:
        """``resource.group``, or ``resource`` for the core group (apimachinery ``GroupResource.String``)."""
        return f"{self.resource}.{self.group}" if self.group else self.resource

    @property
    def namespaced_metric(self) -> bool:
        """Whether prometheus-adapter lists this resource's metrics as namespaced (all but namespaces, nodes and
        persistentvolumes, whatever the resource's real scope: ``series_registry.go`` ``SetSeries``)."""
        return (self.group, self.resource) not in _ROOT_SCOPED


NAMESPACES = GroupResource("", "namespaces")


@dataclass(frozen=True)
class ApiResource:
    """One served resource as API discovery lists it: group, plural, singular, kind, preferred version."""

    group: str
    plural: str
    singular: str
    kind: str
    version: str = "v1"

    @property
    def api_version(self) -> str:
        """``describedObject.apiVersion`` as prometheus-adapter writes it: ``group + "/" + version``, so ``/v1``
        for the core group (``pkg/custom-provider/helpers.go`` ``ReferenceFor``)."""
        return f"{self.group}/{self.version}"


def _core(*entries: tuple[str, str, str]) -> list[ApiResource]:
    return [ApiResource("", p, s, k) for p, s, k in entries]


def _group(group: str, *entries: tuple[str, str, str], version: str = "v1") -> list[ApiResource]:
    return [ApiResource(group, p, s, k, version) for p, s, k in entries]


# Kubernetes v1.32's built-in resources that carry metrics in practice, in the order API discovery lists their
# groups (core first), which is the RESTMapper's priority when a bare name exists in two groups (``events``).
_BUILTIN = [
    *_core(
        ("pods", "pod", "Pod"),
        ("services", "service", "Service"),
        ("namespaces", "namespace", "Namespace"),
        ("nodes", "node", "Node"),
        ("persistentvolumes", "persistentvolume", "PersistentVolume"),
        ("persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim"),
        ("endpoints", "endpoints", "Endpoints"),
        ("configmaps", "configmap", "ConfigMap"),
        ("secrets", "secret", "Secret"),
        ("serviceaccounts", "serviceaccount", "ServiceAccount"),
        ("replicationcontrollers", "replicationcontroller", "ReplicationController"),
        ("resourcequotas", "resourcequota", "ResourceQuota"),
        ("limitranges", "limitrange", "LimitRange"),
        ("events", "event", "Event"),
    ),
    *_group(
        "apps",
        ("deployments", "deployment", "Deployment"),
        ("statefulsets", "statefulset", "StatefulSet"),
        ("daemonsets", "daemonset", "DaemonSet"),
        ("replicasets", "replicaset", "ReplicaSet"),
        ("controllerrevisions", "controllerrevision", "ControllerRevision"),
    ),
    *_group("batch", ("jobs", "job", "Job"), ("cronjobs", "cronjob", "CronJob")),
    *_group(
        "autoscaling", ("horizontalpodautoscalers", "horizontalpodautoscaler", "HorizontalPodAutoscaler"), version="v2"
    ),
    *_group(
        "networking.k8s.io",
        ("ingresses", "ingress", "Ingress"),
        ("networkpolicies", "networkpolicy", "NetworkPolicy"),
        ("ingressclasses", "ingressclass", "IngressClass"),
    ),
    *_group("policy", ("poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget")),
    *_group("discovery.k8s.io", ("endpointslices", "endpointslice", "EndpointSlice")),
    *_group("storage.k8s.io", ("storageclasses", "storageclass", "StorageClass")),
    *_group("coordination.k8s.io", ("leases", "lease", "Lease")),
    *_group("events.k8s.io", ("events", "event", "Event")),
]


@dataclass(frozen=True)
class ResourceTable:
    """What the RESTMapper knows: resources in priority order."""

    resources: tuple[ApiResource, ...]

    def with_resources(self, extra: Iterable[ApiResource]) -> ResourceTable:
        """This table plus ``extra`` (a cluster's CRDs, from its API discovery), after the built-ins."""
        return ResourceTable(self.resources + tuple(extra))

    def resolve(self, group: str, resource: str) -> ApiResource | None:
        """``RESTMapper.ResourceFor``: the resource named by its plural or singular (any case), in ``group``
        or, when ``group`` is empty, in the first group that has it; None when nothing serves it."""
        name = resource.lower()
        for entry in self.resources:
            if (not group or entry.group == group) and name in (entry.plural, entry.singular):
                return entry
        return None

    def normalize(self, group: str, resource: str) -> GroupResource | None:
        """The canonical group-resource (plural, real group) for a name as a rule or a URL writes it."""
        entry = self.resolve(group, resource)
        return None if entry is None else GroupResource(entry.group, entry.plural)

    def singular(self, gr: GroupResource) -> str:
        """``RESTMapper.ResourceSingularizer``: the singular of a normalized resource (itself if unknown)."""
        entry = self.resolve(gr.group, gr.resource)
        return gr.resource if entry is None else entry.singular

    def kind(self, gr: GroupResource) -> str | None:
        """The kind a ``describedObject`` names (``Pod``, ``Deployment``), None for an unknown resource."""
        entry = self.resolve(gr.group, gr.resource)
        return None if entry is None else entry.kind

    def api_resource(self, gr: GroupResource) -> ApiResource | None:
        """The entry of a normalized group-resource (its kind and ``describedObject.apiVersion``), or None."""
        return self.resolve(gr.group, gr.resource)

    @property
    def groups(self) -> frozenset[str]:
        """Every API group this table lists (``""`` for the core group)."""
        return frozenset(r.group for r in self.resources)


def guess_kind(plural: str) -> str:
    """A kind for a resource no discovery knows, from its plural: the inverse of apimachinery's
    ``UnsafeGuessKindToResource`` (``-ies`` -> ``-y``, ``-ses`` -> ``-s``, else the ``s`` dropped), capitalized.
    Only the first letter can be recovered (``inferenceservices`` -> ``Inferenceservice``)."""
    name = plural.lower()
    if name.endswith("ies"):
        name = name[:-3] + "y"
    elif name.endswith("ses"):
        name = name[:-2]
    elif name.endswith("s"):
        name = name[:-1]
    return name[:1].upper() + name[1:]


BUILTIN = ResourceTable(tuple(_BUILTIN))

_SENTINEL_GROUP = "\x00group\x00"
_SENTINEL_RESOURCE = "\x00resource\x00"


def template_regex(template: Template) -> re.Pattern[str]:
    """The label pattern a resource template stands for (``labelGroupResExtractor``): the template executed with
    a lazy capture group for ``.Group`` and ``.Resource``, anchored. ``TemplateError`` when it has no
    ``.Resource`` or executes to nothing."""
    text = template.render(Struct(Group=_SENTINEL_GROUP, Resource=_SENTINEL_RESOURCE))
    if not text:
        raise TemplateError("unable to convert label template to matcher: empty template")
    if _SENTINEL_RESOURCE not in text:
        raise TemplateError("must include at least `<<.Resource>>` in the label template")
    pattern = re.escape(text)
    pattern = pattern.replace(re.escape(_SENTINEL_GROUP), "(?P<group>.+?)", 1)
    pattern = pattern.replace(re.escape(_SENTINEL_RESOURCE), "(?P<resource>.+?)", 1)
    # A second .Group/.Resource must repeat what the first captured.
    pattern = pattern.replace(re.escape(_SENTINEL_GROUP), "(?P=group)").replace(
        re.escape(_SENTINEL_RESOURCE), "(?P=resource)"
    )
    return re.compile(f"^{pattern}$")


@dataclass(frozen=True)
class ResourceConverter:
    """One rule's ``resources``: which labels name which group-resource, both ways.

    ``overrides`` maps label -> normalized group-resource; ``template`` (optional) is the parsed
    ``resources.template``; ``table`` resolves names.
    """

    overrides: Mapping[str, GroupResource]
    template: Template | None
    table: ResourceTable

    @functools.cached_property
    def _label_pattern(self) -> re.Pattern[str] | None:
        return None if self.template is None else template_regex(self.template)

    @functools.cached_property
    def _resolved(self) -> dict[str, GroupResource | None]:
        # Label names repeat across every listed series; each is resolved once (upstream keeps the same cache).
        return {}

    def with_table(self, table: ResourceTable) -> ResourceConverter:
        """The same rule resolved by ``table`` (a cluster's discovery): an override taken as written for a CRD
        the old table did not know is normalized again (a singular becomes the plural the cluster serves)."""
        overrides = {label: table.normalize(gr.group, gr.resource) or gr for label, gr in self.overrides.items()}
        return ResourceConverter(overrides, self.template, table)

    def resource_for_label(self, label: str) -> GroupResource | None:
        """The group-resource a series label names, or None (overrides first, then the template)."""
        override = self.overrides.get(label)
        if override is not None or self._label_pattern is None:
            return override
        memo = self._resolved
        if label in memo:
            return memo[label]
        m = self._label_pattern.match(label)
        found = None if m is None else self.table.normalize(m.groupdict().get("group") or "", m.group("resource"))
        if len(memo) < _MAX_RESOLVED:  # a backend inventing label names cannot grow it without bound
            memo[label] = found
        return found

    def resources_for_labels(self, labels: Iterable[str]) -> list[GroupResource]:
        """Every group-resource the labels of one series name, sorted, each once (``ResourcesForSeries``)."""
        found = {gr for label in labels if label != "__name__" and (gr := self.resource_for_label(label))}
        return sorted(found)

    def label_for(self, gr: GroupResource) -> str | None:
        """The label that names ``gr`` in queries (``LabelForResource``), None when the rule has none."""
        for label, override in self.overrides.items():
            if override == gr:
                return label
        if self.template is None:
            return None
        text = self.template.render(
            Struct(Group=gr.group.translate(_GROUP_SANITIZER), Resource=self.table.singular(gr))
        )
        return text or None
