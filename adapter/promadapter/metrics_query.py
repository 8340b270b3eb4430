"""A rule's ``metricsQuery`` rendered for one request: the template's data, built from escaped values only.

The data is prometheus-adapter's ``queryTemplateArgs`` (``pkg/naming/metrics_query.go`` ``Build`` and
``BuildExternal``), in its order: the ``metricSelector``'s matchers first (sorted by key, as a parsed selector
is), then ``<namespace label>="<namespace>"``, then for custom metrics the resource's label, ``="name"`` for one
object and ``=~"a|b"`` for several. ``GroupBy`` is the resource's label (custom) or empty (external, as
upstream passes ``""``); ``GroupBySlice`` its list form; ``LabelValuesByName`` maps each matched label to its
values joined by ``|``.

Where upstream writes request values raw into the query, here every one goes through
``adapter.query.promql``: matchers through ``quote`` (and ``any_of``'s RE2 escaping inside ``=~``), and each
``LabelValuesByName`` value is the escaped content of such a literal, so ``pod=~"<<index .LabelValuesByName
"pod">>"`` matches exactly the requested objects. Upstream, one value of an ``in`` selector is a raw regex
("a passthrough for their label selector", ``selectTargetValue``); here it is the value itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from adapter.catalog import LABEL_NAME
from adapter.errors import InternalError, NotFound
from adapter.labels import EVERYTHING, Selector
from adapter.promadapter.config import Rule
from adapter.promadapter.gotemplate import Struct, TemplateError, Value
from adapter.promadapter.resources import GroupResource
from adapter.query.promql import PromQL, any_of, quote, selector_matchers


def _literal_content(values: Sequence[str]) -> str:
    """What sits between the quotes of ``quote(any_of(values))``: safe inside a double-quoted literal."""
    return quote(any_of(values))[1:-1]


def _selector_values(selector: Selector) -> dict[str, Value]:
    return {req.key: _literal_content(req.values) for req in selector.requirements}


def _execute(rule: Rule, data: Struct) -> PromQL:
    try:
        text = rule.metrics_query.render(data)
    except TemplateError as exc:
        raise InternalError(f"{rule.where}: metricsQuery: {exc}") from None
    if not text:
        raise InternalError(f"{rule.where}: metricsQuery: empty query produced by metrics query template")
    return PromQL(text)


def resource_label(rule: Rule, resource: GroupResource) -> str:
    """The label naming ``resource`` in the rule's queries and answers; ``NotFound`` when it has none."""
    try:
        label = rule.resources.label_for(resource)
    except TemplateError as exc:
        raise InternalError(f"{rule.where}: resources.template: {exc}") from None
    if label is None:
        raise NotFound(f"{rule.where}: no label names {resource}")
    if not LABEL_NAME.match(label):
        raise InternalError(f"{rule.where}: resources.template makes {label!r} for {resource}: not a label name")
    return label


def render_custom(
    rule: Rule,
    series: str,
    resource: GroupResource,
    namespace: str | None,
    names: Sequence[str] | None,
    metric_selector: Selector,
) -> PromQL:
    """The query for ``series`` on the named objects of ``resource`` (in ``namespace``, None for a root-scoped
    resource); ``names`` None: every object that has the label (``label!=""``, the value store's one query per
    namespace). ``NotFound`` when the rule has no label for the resource or the namespace (prometheus-adapter:
    metric not found); ``BadRequest`` for a selector PromQL cannot express; ``ValueError`` for no names."""
    if names is not None and not names:
        raise ValueError("render_custom needs at least one object name")
    matchers = selector_matchers(metric_selector)
    values = _selector_values(metric_selector)
    if namespace is not None:
        if rule.namespace_label is None:
            raise NotFound(f"{rule.where}: no label names namespaces, so {resource} in a namespace cannot be queried")
        matchers.append(f"{rule.namespace_label}={quote(namespace)}")
        values[rule.namespace_label] = _literal_content([namespace])
    label = resource_label(rule, resource)
    if names is None:
        matchers.append(f'{label}!=""')
        values[label] = ".+"
    elif len(names) == 1:
        matchers.append(f"{label}={quote(names[0])}")
        values[label] = _literal_content(names)
    else:
        matchers.append(f"{label}=~{quote(any_of(names))}")
        values[label] = _literal_content(names)
    data = Struct(
        Series=series,
        LabelMatchers=",".join(matchers),
        LabelValuesByName=values,
        GroupBy=label,
        GroupBySlice=[label],
    )
    return _execute(rule, data)


def render_external(rule: Rule, series: str, namespace: str, metric_selector: Selector) -> PromQL:
    """The query for an external metric requested in ``namespace`` with ``metricSelector``; the namespace is
    matched unless the rule says ``resources: {namespaced: false}``."""
    matchers = selector_matchers(metric_selector)
    values = _selector_values(metric_selector)
    if rule.namespaced and namespace and rule.namespace_label is not None:
        matchers.append(f"{rule.namespace_label}={quote(namespace)}")
        values[rule.namespace_label] = _literal_content([namespace])
    data = Struct(
        Series=series, LabelMatchers=",".join(matchers), LabelValuesByName=values, GroupBy="", GroupBySlice=[]
    )
    return _execute(rule, data)


# Functions that act on each series alone: selecting fewer series before them selects fewer after them.
_PER_SERIES = frozenset(
    {
        "rate", "irate", "increase", "delta", "idelta", "deriv", "resets", "changes",
        "avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "count_over_time",
        "last_over_time", "present_over_time", "quantile_over_time", "stddev_over_time", "stdvar_over_time",
        "abs", "ceil", "floor", "round", "exp", "ln", "log2", "log10", "sqrt", "clamp", "clamp_min", "clamp_max",
    }
)  # fmt: skip
_AGGREGATE = r"(?:sum|min|max|avg|count)"
_CALL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*\(")
_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\b")


def _inner_is_per_series(inner: str) -> bool:
    text = _STRINGS.sub('""', inner)
    text = re.sub(r"\{[^{}]*\}", "{}", text)  # matchers: label names are not calls
    text = re.sub(r"\[[^\[\]]*\]", "[]", text)
    if _GROUPING.search(text):
        return False
    return all(name in _PER_SERIES for name in _CALL.findall(text))


def groups_by_resource(rule: Rule, resource: GroupResource) -> bool:
    """Whether the rule's query for ``resource`` is one aggregation ``by (<label>)`` of series-wise functions of
    its selector (``sum(rate(x{..}[5m])) by (pod)``): then the query for every object of a namespace answers,
    for each object, what the query naming it answers, and the value store can keep one query per namespace.
    Anything else (a binary operation, ``topk``, a nested aggregation) is answered per request, as upstream."""
    try:
        label = resource_label(rule, resource)
        text = str(render_custom(rule, "series", resource, "namespace", None, EVERYTHING)).strip()
    except (NotFound, InternalError):
        return False
    by = rf"by\s*\(\s*{re.escape(label)}\s*\)"
    m = re.fullmatch(rf"{_AGGREGATE}\s*\((?P<inner>.*)\)\s*{by}", text, re.DOTALL) or re.fullmatch(
        rf"{_AGGREGATE}\s*{by}\s*\((?P<inner>.*)\)", text, re.DOTALL
    )
    return m is not None and _inner_is_per_series(m.group("inner"))
