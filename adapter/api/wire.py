"""Kubernetes wire documents as plain ordered dicts, in Go's field order, and Go-compatible JSON encoding.

Dicts instead of pydantic models: the shapes are small and fixed, field order matters (it is what the Go
encoder emits), and building a 1,000-item list must stay cheap on the request path.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from adapter.api.quantity import format_quantity
from adapter.errors import AdapterError
from adapter.provider.base import MetricInfo, MetricSample

GROUP = "custom.metrics.k8s.io"
VERSIONS = ("v1beta2", "v1beta1")  # preferred first
_MILLI = Decimal("0.001")


def go_json(obj: Any, pretty: bool = False) -> bytes:
    """Encode like Go's encoding/json as the apiserver uses it: compact with a trailing newline, or
    two-space indent without one; ``<``, ``>``, ``&``, U+2028 and U+2029 escaped (apimachinery json.go)."""
    if pretty:
        text = json.dumps(obj, indent=2, ensure_ascii=False)
    else:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"
    text = (text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))
    return text.encode("utf-8")


def rfc3339(ts: float) -> str:
    """RFC3339 UTC at second precision, as metav1.Time marshals (fraction truncated)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(ts)))


_MILLI_SUFFIXES = ("m", "", "k", "M", "G", "T", "P", "E")


def milli(value: float) -> int:
    """The served value's ``MilliValue()``: rounded half up to a whole number of milli-units (the rule of
    ``quantity``; the what-if simulator feeds its HPA model through it)."""
    return int(Decimal(repr(value)).quantize(_MILLI, rounding=ROUND_HALF_UP).scaleb(3))


def quantity(value: float) -> str:
    """The canonical Quantity for a served value, at milli precision (what the HPA reads: MilliValue).

    Rounds half up to a whole number of milli-units, then writes it as canonical DecimalSI (the same
    string ``format_quantity`` gives, tested against it): the mantissa without trailing zero triples and
    the matching suffix. Direct integer arithmetic: this runs once per item of every list we serve.
    """
    whole = milli(value)
    if whole == 0:
        return "0"
    sign = "-" if whole < 0 else ""
    m, k = abs(whole), 0
    while m % 1000 == 0 and k < len(_MILLI_SUFFIXES) - 1:
        m //= 1000
        k += 1
    if k == len(_MILLI_SUFFIXES) - 1:  # beyond E: keep the E suffix with a longer mantissa
        return format_quantity(Decimal(whole).scaleb(-3))
    return f"{sign}{m}{_MILLI_SUFFIXES[k]}"


def status(err: AdapterError) -> dict[str, Any]:
    """metav1.Status for an error (field order of apimachinery types.go; details omitted when None)."""
    doc: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                           "message": err.message}
    if err.reason:
        doc["reason"] = err.reason
    if err.details is not None:
        doc["details"] = err.details
    doc["code"] = err.code
    return doc


def resource_list(group_version: str, metrics: Iterable[MetricInfo]) -> dict[str, Any]:
    """APIResourceList for discovery (custom-metrics-apiserver pkg/provider/resource_lister.go)."""
    return {
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version,
        "resources": [{"name": f"{m.resource}/{m.metric}", "singularName": "", "namespaced": m.namespaced,
                       "kind": "MetricValueList", "verbs": ["get"]} for m in metrics],
    }


def api_group() -> dict[str, Any]:
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in VERSIONS]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": GROUP, "versions": versions,
            "preferredVersion": versions[0]}


def api_group_list() -> dict[str, Any]:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [api_group()]}


def _described(s: MetricSample) -> dict[str, Any]:
    ref: dict[str, Any] = {"kind": s.obj.kind}
    if s.obj.namespace is not None:
        ref["namespace"] = s.obj.namespace
    ref["name"] = s.obj.name
    ref["apiVersion"] = s.obj.api_version
    return ref


def metric_value_list(version: str, samples: Iterable[MetricSample]) -> dict[str, Any]:
    """MetricValueList in the requested version (kubernetes/metrics custom_metrics v1beta1/v1beta2 types.go)."""
    items = []
    for s in samples:
        selector = s.selector.to_label_selector()
        if version == "v1beta1":
            item: dict[str, Any] = {"describedObject": _described(s), "metricName": s.metric,
                                    "timestamp": rfc3339(s.ts)}
            if s.window_s is not None:
                item["window"] = s.window_s
            item["value"] = quantity(s.value)
            item["selector"] = selector
        else:
            item = {"describedObject": _described(s), "metric": {"name": s.metric, "selector": selector},
                    "timestamp": rfc3339(s.ts)}
            if s.window_s is not None:
                item["windowSeconds"] = s.window_s
            item["value"] = quantity(s.value)
        items.append(item)
    return {"kind": "MetricValueList", "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": items}
