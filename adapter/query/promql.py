"""PromQL is built here, never concatenated elsewhere: pure functions, no I/O.

Every value that comes from a request (namespace, pod names, metricLabelSelector values) passes through
``quote`` (and ``regex_quote`` inside regex matchers) so it can only ever be a string literal: it can never
close the literal, add a matcher, or change the structure of the query.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NewType

from adapter.catalog import LABEL_NAME, Catalog, Layout, MetricDef
from adapter.errors import BadRequest
from adapter.labels import Selector

PromQL = NewType("PromQL", str)

_SIMPLE_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}


_NEEDS_ESCAPE = re.compile(r'[\\"\x00-\x1f\x7f\ud800-\udfff]')


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _SIMPLE_ESCAPES:
        return _SIMPLE_ESCAPES[ch]
    if 0xD800 <= ord(ch) <= 0xDFFF:
        # A lone surrogate cannot be sent as UTF-8; U+FFFD keeps the literal valid (and matches nothing real).
        return "\\ufffd"
    return f"\\x{ord(ch):02x}"


def quote(value: str) -> str:
    """A PromQL double-quoted string literal whose content is exactly ``value``.

    Control characters become ``\\xHH`` escapes (Go Unquote syntax, which Prometheus' lexer uses).
    """
    # One regex pass: pod regexes over 1,000 pods are long, and this runs on the request path.
    return '"' + _NEEDS_ESCAPE.sub(_escape, value) + '"'


_RE2_META_PATTERN = re.compile(r"[\\.+*?()|\[\]{}^$]")


def regex_quote(value: str) -> str:
    """Escape RE2 metacharacters so ``value`` matches only itself inside a regex matcher."""
    return _RE2_META_PATTERN.sub(lambda m: "\\" + m.group(), value)


def any_of(values: Sequence[str]) -> str:
    """A regex (unquoted) matching exactly one of ``values``; Prometheus anchors regex matchers."""
    return "|".join(regex_quote(v) for v in values)


@dataclass(frozen=True)
class Scope:
    """Which pods a query is about: all pods of ``namespace`` (pods=None), exactly ``pods``, or the pods
    whose names match ``pod_regex`` (built by ``deployment_pods_regex``, never from raw request text)."""

    namespace: str
    pods: tuple[str, ...] | None = None
    pod_regex: str | None = None


def deployment_pods_regex(deployments: Sequence[str]) -> str:
    """Pods of these Deployments, past and present: Deployment pods are named
    ``<deployment>-<pod-template-hash>-<suffix>`` (kube-controller-manager's ReplicaSet and pod name
    generation), so the pattern keeps matching across rollouts and pod churn."""
    return f"(?:{any_of(deployments)})-[a-z0-9]+-[a-z0-9]+"


def selector_matchers(selector: Selector, what: str = "metricLabelSelector") -> list[str]:
    """Label matchers equivalent to a Kubernetes selector on a series' own labels.

    Raises BadRequest for keys that are not Prometheus label names and for gt/lt, which PromQL matchers
    cannot express exactly.
    """
    out = []
    for req in selector.requirements:
        if not LABEL_NAME.match(req.key):
            raise BadRequest(f"{what}: {req.key!r} is not a valid Prometheus label name")
        op = req.operator
        if op in ("=", "=="):
            out.append(f"{req.key}={quote(req.values[0])}")
        elif op == "!=":
            out.append(f"{req.key}!={quote(req.values[0])}")
        elif op == "in":
            out.append(f"{req.key}=~{quote(any_of(req.values))}")
        elif op == "notin":
            out.append(f"{req.key}!~{quote(any_of(req.values))}")
        elif op == "exists":
            out.append(f'{req.key}!=""')
        elif op == "!":
            out.append(f'{req.key}=""')
        else:
            raise BadRequest(f"{what}: operator {op!r} is not supported on metric labels")
    return out


def _pod_match(scope: Scope) -> tuple[str, str]:
    """(operator, quoted operand) that selects the scope's pods by the pod label."""
    if scope.pod_regex is not None:
        return "=~", quote(scope.pod_regex)
    if scope.pods is None:
        return "!=", '""'
    if len(scope.pods) == 1:
        return "=", quote(scope.pods[0])
    return "=~", quote(any_of(scope.pods))


def layout_matchers(
    layout: Layout, scope: Scope, extra: Sequence[str] = (), pod_match: tuple[str, str] | None = None
) -> str:
    """The matchers that pick the scope's pods in one label layout, followed by ``extra``."""
    op, operand = pod_match or _pod_match(scope)
    # The layout's trust rules go into the query itself, so series from untrusted targets never reach a
    # backend-side reduction (a sum over an attacker's series and the victim's could not be undone here).
    trust = [f"{label}=~{quote(rx)}" for label, rx in layout.trust]
    return ",".join([f"{layout.namespace}={quote(scope.namespace)}", f"{layout.pod}{op}{operand}", *trust, *extra])


def render(metric: MetricDef, catalog: Catalog, scope: Scope, metric_selector: Selector) -> PromQL:
    """The one PromQL expression that reads ``metric`` for every pod of ``scope`` in one round-trip.

    The template is rendered once per pod-label layout the metric trusts (``Catalog.layouts_for``) and
    the branches are joined with ``or``.
    """
    if scope.pods is not None and not scope.pods:
        raise ValueError("render() needs at least one pod; callers skip the query for an empty pod list")
    extra = selector_matchers(metric_selector)
    by = ", ".join(catalog.pod_labels)
    gpu = ", ".join(catalog.gpu_labels)
    pod_match = _pod_match(scope)
    branches = []
    layouts = catalog.layouts_for(metric)
    for layout in layouts:
        q = metric.query.replace("<<by>>", by).replace("<<gpu>>", gpu)
        if metric.window is not None:
            q = q.replace("<<window>>", metric.window)
        q = q.replace("<<matchers>>", layout_matchers(layout, scope, extra, pod_match))
        branches.append(f"({q})" if len(layouts) > 1 else q)
    return PromQL(" or ".join(branches))


def namespace_series(name: str, catalog: Catalog, namespace: str, matchers: Sequence[str] = ()) -> PromQL:
    """``name{<ns label>="ns", ...}`` for every distinct namespace label of the layouts, joined with ``or``."""
    ns_labels = dict.fromkeys(lay.namespace for lay in catalog.layouts)
    branches = [f"{name}{{{','.join([f'{label}={quote(namespace)}', *matchers])}}}" for label in ns_labels]
    return PromQL(" or ".join(branches))
