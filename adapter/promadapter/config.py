"""prometheus-adapter's configuration file (the YAML its ``--config`` reads), read as it is and resolved.

The grammar is ``pkg/config/config.go``'s ``MetricsDiscoveryConfig`` read with yaml.v2's ``UnmarshalStrict``
(``pkg/config/loader.go``): an unknown or repeated key is an error. Each rule is resolved the way
``naming.NamersFromConfig`` resolves it at prometheus-adapter's start-up: overrides normalized to canonical
group-resources, templates parsed, regular expressions compiled, ``name.as`` defaulted (``$0`` without a
capture group, ``$1`` with one, an error with more), ``name.matches`` appended to the series filters.

Every error names the rule (its list, index and ``seriesQuery``) and the field, and all of a file's errors are
reported at once. ``resourceRules`` (metrics.k8s.io, what ``kubectl top`` reads) is accepted and not served,
with one warning: the Helm chart fills it from ``rules.resource``, and a file from a working cluster must load.
Nothing here does I/O: the caller reads the file.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import yaml

from adapter.errors import ConfigError
from adapter.promadapter.goregexp import compile_go
from adapter.promadapter.gotemplate import Kind, Template, TemplateError, parse_template
from adapter.promadapter.resources import (
    BUILTIN,
    NAMESPACES,
    GroupResource,
    ResourceConverter,
    ResourceTable,
    template_regex,
)

RuleKind = Literal["rules", "externalRules"]

# The data of each template (pkg/naming/metrics_query.go queryTemplateArgs; schema.GroupResource).
QUERY_FIELDS: Mapping[str, Kind] = {
    "Series": "str",
    "LabelMatchers": "str",
    "GroupBy": "str",
    "GroupBySlice": "list",
    "LabelValuesByName": "map",
}
RESOURCE_FIELDS: Mapping[str, Kind] = {"Group": "str", "Resource": "str"}

_TOP_KEYS = ("rules", "externalRules", "resourceRules")
_RULE_KEYS = ("seriesQuery", "seriesFilters", "resources", "name", "metricsQuery")
_RESOURCES_KEYS = ("template", "overrides", "namespaced")
_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
# The label an external rule's namespace matcher uses when its resources name none (docs/externalmetrics.md:
# "the adapter will automatically add a `namespace` label").
DEFAULT_NAMESPACE_LABEL = "namespace"
# How errors name the file itself.
_TOP = "prometheus-adapter config"


@dataclass(frozen=True)
class SeriesFilter:
    """``is: <regex>`` (positive) or ``isNot: <regex>``, matched unanchored against a series' name."""

    pattern: str
    positive: bool
    regex: re.Pattern[str]

    def matches(self, name: str) -> bool:
        """Whether a series of this name passes the filter (``ReMatcher.Matches``)."""
        return (self.regex.search(name) is not None) == self.positive


@dataclass(frozen=True)
class Rule:
    """One resolved rule of ``rules`` or ``externalRules``.

    ``series_filters`` ends with ``name.matches`` as an ``is`` filter when it is given; ``namespaced`` is
    ``resources.namespaced`` (default true; prometheus-adapter reads it on external rules only);
    ``namespace_label`` is the label a request's namespace is matched on (None: the rule has none).
    """

    kind: RuleKind
    index: int
    series_query: str
    series_filters: tuple[SeriesFilter, ...]
    resources: ResourceConverter
    namespaced: bool
    namespace_label: str | None
    name_matches: re.Pattern[str]
    name_as: str
    metrics_query: Template

    @property
    def where(self) -> str:
        """How errors and logs name the rule: ``rules[2] (seriesQuery '{namespace!=""}')``."""
        return f"{self.kind}[{self.index}] (seriesQuery {self.series_query!r})"


@dataclass(frozen=True)
class AdapterConfig:
    """The whole file: its custom-metrics rules, its external-metrics rules, and what was read but not served."""

    rules: tuple[Rule, ...]
    external_rules: tuple[Rule, ...]
    warnings: tuple[str, ...]


def _key_path(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def _repeated_keys(root: yaml.Node) -> list[tuple[str, str]]:
    """Every key given twice in one mapping, as (where, message), the rule named as ``_rule`` names it.

    yaml.v2 ``UnmarshalStrict`` refuses them ("line N: field resources already set in type
    config.DiscoveryRule"), even when the first value is empty; PyYAML keeps the last one silently.
    """
    found: list[tuple[str, str]] = []
    seen: set[int] = set()

    def walk(node: yaml.Node, where: str, path: tuple[str | int, ...]) -> None:
        if id(node) in seen:  # an alias: its anchor was walked already
            return
        seen.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                walk(item, where, (*path, i))
        elif isinstance(node, yaml.MappingNode):
            first: dict[str, int] = {}
            for key_node, value in node.value:
                key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
                line = key_node.start_mark.line + 1
                if key_node.tag == "tag:yaml.org,2002:merge":
                    walk(value, where, path)
                    continue
                if key in first:
                    found.append(
                        (
                            where,
                            f"{_key_path((*path, key))}: given twice (lines {first[key]} and {line});"
                            " prometheus-adapter (yaml.v2 UnmarshalStrict) refuses a repeated key",
                        )
                    )
                else:
                    first[key] = line
                if (
                    not path
                    and where == _TOP
                    and key in ("rules", "externalRules")
                    and isinstance(value, yaml.SequenceNode)
                ):
                    for i, item in enumerate(value.value):
                        walk(item, _rule_where(key, i, item), ())
                else:
                    walk(value, where, (*path, key))

    walk(root, _TOP, ())
    return found


def _rule_where(kind: str, index: int, node: yaml.Node) -> str:
    """``rules[2] (seriesQuery '...')`` from the rule's node, as ``_rule`` words it (the last seriesQuery given,
    the one the loaded document keeps)."""
    where = f"{kind}[{index}]"
    if isinstance(node, yaml.MappingNode):
        for key_node, value in node.value:
            if key_node.value == "seriesQuery":
                is_str = isinstance(value, yaml.ScalarNode) and value.tag.endswith(":str")
                where = f"{kind}[{index}] (seriesQuery {value.value!r})" if is_str else f"{kind}[{index}]"
    return where


class _Errors:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, where: str, path: str, message: str) -> None:
        self.items.append(f"{where}: {path}: {message}")


def _mapping(value: Any, where: str, path: str, keys: tuple[str, ...], errors: _Errors) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.add(where, path, f"must be a mapping, not {type(value).__name__}")
        return {}
    for key in value:
        if key not in keys:
            errors.add(where, f"{path}.{key}" if path else str(key), f"unknown field (known: {', '.join(keys)})")
    return value


def _string(value: Any, where: str, path: str, errors: _Errors) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        errors.add(where, path, f"must be a string, not {type(value).__name__}")
        return ""
    return value


def _regex(pattern: str, where: str, path: str, errors: _Errors) -> re.Pattern[str] | None:
    try:
        return compile_go(pattern)
    except ValueError as exc:
        errors.add(where, path, str(exc))
        return None


def _template(source: str, fields: Mapping[str, Kind], where: str, path: str, errors: _Errors) -> Template | None:
    try:
        return parse_template(source, fields)
    except TemplateError as exc:
        errors.add(where, path, f"{exc} (in {source!r})")
        return None


# `${.Resource}$`: the delimiters of a 2018 pre-release image (k8s-prometheus-adapter:advanced-config) that
# conference demos published; every release since v0.2.1 parses with Delims("<<", ">>"), so it is plain text.
_DOLLAR_ACTION = re.compile(r"\$\{\s*\.[A-Za-z]\w*\s*\}\$")


def _dollar_delimiters(source: str) -> str:
    """A hint when ``source`` writes ``${.Field}$`` actions, which prometheus-adapter reads as plain text."""
    found = _DOLLAR_ACTION.search(source)
    if found is None:
        return ""
    return f" ({found.group(0)!r} is plain text to prometheus-adapter: its templates write actions as <<.Field>>)"


def _filters(raw: Any, where: str, errors: _Errors) -> list[SeriesFilter]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        errors.add(where, "seriesFilters", "must be a list of {is: <regex>} or {isNot: <regex>}")
        return []
    out = []
    for i, item in enumerate(raw):
        path = f"seriesFilters[{i}]"
        body = _mapping(item, where, path, ("is", "isNot"), errors)
        is_ = _string(body.get("is"), where, f"{path}.is", errors)
        is_not = _string(body.get("isNot"), where, f"{path}.isNot", errors)
        if is_ and is_not:
            errors.add(where, path, f"cannot have both an `is` ({is_!r}) and `isNot` ({is_not!r}) expression")
            continue
        if not is_ and not is_not:
            errors.add(where, path, "must have either an `is` or `isNot` expression")
            continue
        pattern = is_ or is_not
        regex = _regex(pattern, where, f"{path}.{'is' if is_ else 'isNot'}", errors)
        if regex is not None:
            out.append(SeriesFilter(pattern, bool(is_), regex))
    return out


def _resources(raw: Any, where: str, table: ResourceTable, errors: _Errors, warnings: list[str]) -> ResourceConverter:
    body = _mapping(raw, where, "resources", _RESOURCES_KEYS, errors)
    source = _string(body.get("template"), where, "resources.template", errors)
    template = _template(source, RESOURCE_FIELDS, where, "resources.template", errors) if source else None
    if template is not None:
        try:
            template_regex(template)
        except TemplateError as exc:
            errors.add(where, "resources.template", f"{exc}{_dollar_delimiters(source)}")
            template = None
    overrides: dict[str, GroupResource] = {}
    raw_overrides = body.get("overrides")
    if raw_overrides is not None and not isinstance(raw_overrides, dict):
        errors.add(where, "resources.overrides", "must be a mapping of label -> {group, resource}")
        raw_overrides = None
    for label, target in (raw_overrides or {}).items():
        path = f"resources.overrides.{label}"
        if not isinstance(label, str) or not _LABEL_NAME.match(label):
            errors.add(where, path, f"{label!r} is not a Prometheus label name")
            continue
        spec = _mapping(target, where, path, ("group", "resource"), errors)
        group = _string(spec.get("group"), where, f"{path}.group", errors)
        resource = _string(spec.get("resource"), where, f"{path}.resource", errors)
        if not resource:
            errors.add(where, f"{path}.resource", "missing")
            continue
        normalized = table.normalize(group, resource)
        if normalized is None and group and not any(r.group == group for r in table.resources):
            # A CRD's group this table does not list: taken as written (the plural, as `kubectl api-resources`
            # shows it). prometheus-adapter asks the cluster; the serving step can extend the table from it.
            normalized = GroupResource(group, resource.lower())
            warnings.append(
                f"{where}: {path}: {normalized} is not a built-in resource; served as written (give its plural)"
            )
        if normalized is None:
            shown = f"{resource}.{group}" if group else resource
            errors.add(where, path, f"unable to normalize group-resource {shown!r}: no such resource")
            continue
        overrides[label] = normalized
    return ResourceConverter(overrides, template, table)


def _namespaced(raw: Any, where: str, errors: _Errors) -> bool:
    value = raw.get("namespaced") if isinstance(raw, dict) else None
    if value is None:
        return True
    if not isinstance(value, bool):
        errors.add(where, "resources.namespaced", f"must be true or false, not {value!r}")
        return True
    return value


def _rule(
    kind: RuleKind, index: int, raw: Any, table: ResourceTable, errors: _Errors, warnings: list[str]
) -> Rule | None:
    query_text = raw.get("seriesQuery") if isinstance(raw, dict) else None
    where = f"{kind}[{index}] (seriesQuery {query_text!r})" if isinstance(query_text, str) else f"{kind}[{index}]"
    before = len(errors.items)
    body = _mapping(raw, where, "", _RULE_KEYS, errors)
    series_query = _string(body.get("seriesQuery"), where, "seriesQuery", errors)
    if not series_query.strip():
        errors.add(where, "seriesQuery", "missing (the series selector discovery lists, e.g. '{namespace!=\"\"}')")
    filters = _filters(body.get("seriesFilters"), where, errors)
    resources = _resources(body.get("resources"), where, table, errors, warnings)
    namespaced = _namespaced(body.get("resources"), where, errors)
    if kind == "rules" and not namespaced:
        warnings.append(f"{where}: resources.namespaced: false has no effect on a custom-metrics rule (external only)")

    name = _mapping(body.get("name"), where, "name", ("matches", "as"), errors)
    matches = _string(name.get("matches"), where, "name.matches", errors)
    name_as = _string(name.get("as"), where, "name.as", errors)
    name_regex = _regex(matches or ".*", where, "name.matches", errors)
    if name_regex is not None:
        if matches:
            filters.append(SeriesFilter(matches, True, name_regex))
        if not name_as:
            groups = name_regex.groups
            if groups > 1:
                errors.add(
                    where,
                    "name.as",
                    f"must be given: name.matches {matches!r} has {groups} capture groups (the default is $0 with"
                    " none, $1 with one)",
                )
            name_as = "$0" if groups == 0 else "$1"

    query_source = _string(body.get("metricsQuery"), where, "metricsQuery", errors)
    metrics_query = None
    if not query_source.strip():
        errors.add(where, "metricsQuery", "missing (every request for this rule's metrics would fail)")
    else:
        metrics_query = _template(query_source, QUERY_FIELDS, where, "metricsQuery", errors)
        if metrics_query is not None and (hint := _dollar_delimiters(query_source)):
            warnings.append(f"{where}: metricsQuery: sent to the backend as written{hint}")

    namespace_label = None
    if len(errors.items) == before:
        try:
            namespace_label = resources.label_for(NAMESPACES)
        except TemplateError as exc:
            errors.add(where, "resources.template", f"{exc} (executed for namespaces)")
    if namespace_label is not None and not _LABEL_NAME.match(namespace_label):
        errors.add(where, "resources.template", f"makes {namespace_label!r} for namespaces: not a label name")
    if kind == "externalRules" and namespaced and namespace_label is None:
        namespace_label = DEFAULT_NAMESPACE_LABEL
        warnings.append(
            f"{where}: resources: no label for namespaces; a request's namespace is matched on"
            f" {DEFAULT_NAMESPACE_LABEL!r} (docs/externalmetrics.md)"
        )
    if len(errors.items) != before or name_regex is None or metrics_query is None:
        return None
    return Rule(
        kind=kind,
        index=index,
        series_query=series_query,
        series_filters=tuple(filters),
        resources=resources,
        namespaced=namespaced,
        namespace_label=namespace_label,
        name_matches=name_regex,
        name_as=name_as,
        metrics_query=metrics_query,
    )


def parse_config(text: str, table: ResourceTable = BUILTIN) -> AdapterConfig:
    """The resolved configuration; ``ConfigError`` listing every error (each naming rule and field).

    ``table`` resolves resource names (the built-ins by default; a cluster's CRDs extend it).
    """
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        doc = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"prometheus-adapter config: not YAML: {exc}") from None
    errors = _Errors()
    for where, message in _repeated_keys(root) if root is not None else []:
        errors.items.append(f"{where}: {message}")
    warnings: list[str] = []
    top = _mapping(doc, _TOP, "", _TOP_KEYS, errors)
    if "resourceRules" in top:
        warnings.append(
            "resourceRules: read and not served: this adapter serves custom.metrics.k8s.io and"
            " external.metrics.k8s.io, not metrics.k8s.io (kubectl top); leave v1beta1.metrics.k8s.io where it is"
        )
    parsed: dict[RuleKind, list[Rule]] = {"rules": [], "externalRules": []}
    for kind in ("rules", "externalRules"):
        raw = top.get(kind)
        if raw is None:
            continue
        if not isinstance(raw, list):
            errors.add("prometheus-adapter config", kind, "must be a list of rules")
            continue
        for i, item in enumerate(raw):
            rule = _rule(kind, i, item, table, errors, warnings)
            if rule is not None:
                parsed[kind].append(rule)
    if errors.items:
        n = len(errors.items)
        raise ConfigError(
            f"prometheus-adapter config: {n} error{'s' if n > 1 else ''}:\n" + "\n".join(f"  {e}" for e in errors.items)
        )
    return AdapterConfig(tuple(parsed["rules"]), tuple(parsed["externalRules"]), tuple(warnings))


def with_table(config: AdapterConfig, table: ResourceTable) -> AdapterConfig:
    """``config`` with every rule's resources resolved by ``table`` (the built-ins plus a cluster's discovery,
    as prometheus-adapter's RESTMapper resolves them); the namespace label does not change (a built-in)."""

    def rule(r: Rule) -> Rule:
        return dataclasses.replace(r, resources=r.resources.with_table(table))

    return dataclasses.replace(
        config, rules=tuple(map(rule, config.rules)), external_rules=tuple(map(rule, config.external_rules))
    )
