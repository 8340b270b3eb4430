"""Kubernetes wire documents as plain ordered dicts, in Go's field order, and Go-compatible JSON encoding.

Dicts instead of pydantic models: the shapes are small and fixed, field order matters (it is what the Go
encoder emits), and building a 1,000-item list must stay cheap on the request path.

The one document on the HPA's path, ``MetricValueList``, is also written directly as bytes
(``MetricValueList.encode``): the same bytes ``go_json`` gives for ``metric_value_list`` (tested against it),
without building a dict per item first, with the escaped strings and timestamps of recurring names and
instants memoized and each value's Quantity taken from the sample when the provider formatted it already
(once per store refresh instead of once per request).
"""

from __future__ import annotations

__all__ = ["milli", "quantity"]  # the served-value rule lives in adapter/quantity.py; re-exported for callers here

import functools
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from adapter.api.groups import GROUP, VERSIONS
from adapter.errors import RETRY_AFTER_S, AdapterError
from adapter.labels import Selector
from adapter.provider.base import CORE_API_VERSION, POD_KIND, MetricInfo, MetricSample, ObjectRef, PodSamples
from adapter.quantity import milli, quantity


def _go_escape(text: str) -> str:
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


def go_json(obj: Any, pretty: bool = False) -> bytes:
    """Encode like Go's encoding/json as the apiserver uses it: compact with a trailing newline, or
    two-space indent without one; ``<``, ``>``, ``&``, U+2028 and U+2029 escaped (apimachinery json.go).
    A ``MetricValueList`` is written by its own encoder (the same bytes)."""
    if isinstance(obj, MetricValueList):
        return go_json(obj.to_dict(), pretty=True) if pretty else obj.encode()
    if pretty:
        text = json.dumps(obj, indent=2, ensure_ascii=False)
    else:
        text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False) + "\n"
    return _go_escape(text).encode("utf-8")


def rfc3339(ts: float) -> str:
    """RFC3339 UTC at second precision, as metav1.Time marshals (fraction truncated)."""
    return _rfc3339(int(ts))


@functools.lru_cache(maxsize=4096)  # the samples of one refresh share a handful of instants
def _rfc3339(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(second))


def error_headers(err: AdapterError) -> dict[str, str]:
    """The headers an error's response carries besides its type and length: ``Retry-After`` on every 429 (the
    error's ``details.retryAfterSeconds`` when it names one, else one second), as the apiserver sends with its
    own 429s (apiserver pkg/server/filters/maxinflight.go ``tooManyRequests``) and client-go honours."""
    if err.code != 429:
        return {}
    retry = (err.details or {}).get("retryAfterSeconds")
    seconds = retry if isinstance(retry, int) and not isinstance(retry, bool) and retry > 0 else RETRY_AFTER_S
    return {"retry-after": str(seconds)}


def status(err: AdapterError) -> dict[str, Any]:
    """metav1.Status for an error (field order of apimachinery types.go; details omitted when None)."""
    doc: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": err.message,
    }
    if err.reason:
        doc["reason"] = err.reason
    if err.details is not None:
        doc["details"] = err.details
    doc["code"] = err.code
    return doc


def resource_list(group_version: str, metrics: Iterable[MetricInfo]) -> dict[str, Any]:
    """APIResourceList for discovery (custom-metrics-apiserver pkg/provider/resource_lister.go)."""
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": [
            {
                "name": f"{m.resource}/{m.metric}",
                "singularName": "",
                "namespaced": m.namespaced,
                "kind": "MetricValueList",
                "verbs": ["get"],
            }
            for m in metrics
        ],
    }


def api_group() -> dict[str, Any]:
    versions = [{"groupVersion": f"{GROUP}/{v}", "version": v} for v in VERSIONS]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": GROUP,
        "versions": versions,
        "preferredVersion": versions[0],
    }


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
            item: dict[str, Any] = {
                "describedObject": _described(s),
                "metricName": s.metric,
                "timestamp": rfc3339(s.ts),
            }
            if s.window_s is not None:
                item["window"] = s.window_s
            item["value"] = quantity(s.value)
            item["selector"] = selector
        else:
            item = {
                "describedObject": _described(s),
                "metric": {"name": s.metric, "selector": selector},
                "timestamp": rfc3339(s.ts),
            }
            if s.window_s is not None:
                item["windowSeconds"] = s.window_s
            item["value"] = quantity(s.value)
        items.append(item)
    return {"kind": "MetricValueList", "apiVersion": f"{GROUP}/{version}", "metadata": {}, "items": items}


# -- MetricValueList written directly --------------------------------------------------------------------------


@functools.lru_cache(maxsize=65536)  # pod and metric names recur in every poll; bounded, pure
def _json_str(text: str) -> str:
    return _go_escape(json.dumps(text, ensure_ascii=False))


@functools.lru_cache(maxsize=65536)
def _described_json(obj: ObjectRef) -> str:
    namespace = "" if obj.namespace is None else f',"namespace":{_json_str(obj.namespace)}'
    return (
        f'{{"kind":{_json_str(obj.kind)}{namespace},"name":{_json_str(obj.name)},'
        f'"apiVersion":{_json_str(obj.api_version)}}}'
    )


def _selector_json(selector: Selector) -> str:
    return _go_escape(json.dumps(selector.to_label_selector(), separators=(",", ":"), ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class MetricValueList:
    """A MetricValueList to answer: ``to_dict()`` is ``metric_value_list``; ``encode()`` its compact
    ``go_json`` bytes, written without the intermediate dicts (the request path's encoder)."""

    version: str
    samples: Sequence[MetricSample]

    def to_dict(self) -> dict[str, Any]:
        return metric_value_list(self.version, self.samples)

    def encode(self) -> bytes:
        v1beta1 = self.version == "v1beta1"
        parts = [
            f'{{"kind":"MetricValueList","apiVersion":{_json_str(f"{GROUP}/{self.version}")},"metadata":{{}},"items":['
        ]
        if isinstance(self.samples, PodSamples):
            self._encode_pods(self.samples, v1beta1, parts)
            parts.append("]}\n")
            return "".join(parts).encode("utf-8")
        # The metric name, selector and window are the same for every item of an answer: rendered once
        # per distinct (metric, selector, window), compared by identity first.
        last: tuple[str, Selector, int | None] | None = None
        before = after = tail = ""
        for i, s in enumerate(self.samples):
            if last is None or not (s.metric is last[0] and s.selector is last[1] and s.window_s == last[2]):
                last = (s.metric, s.selector, s.window_s)
                selector, name = _selector_json(s.selector), _json_str(s.metric)
                if v1beta1:
                    before = f',"metricName":{name},"timestamp":"'
                    window = "" if s.window_s is None else f',"window":{json.dumps(s.window_s)}'
                    after = f'"{window},"value":"'
                    tail = f'","selector":{selector}}}'
                else:
                    before = f',"metric":{{"name":{name},"selector":{selector}}},"timestamp":"'
                    window = "" if s.window_s is None else f',"windowSeconds":{json.dumps(s.window_s)}'
                    after = f'"{window},"value":"'
                    tail = '"}'
            q = s.quantity if s.quantity is not None else quantity(s.value)
            parts.append(
                f'{"," if i else ""}{{"describedObject":{_described_json(s.obj)}{before}'
                f"{_rfc3339(int(s.ts))}{after}{q}{tail}"
            )
        parts.append("]}\n")
        return "".join(parts).encode("utf-8")

    @staticmethod
    def _encode_pods(samples: PodSamples, v1beta1: bool, parts: list[str]) -> None:
        """The items of a column-wise list: the per-answer parts rendered once, three strings per pod."""
        if not samples.pods:
            return
        selector, name = _selector_json(samples.selector), _json_str(samples.metric)
        window_key = "window" if v1beta1 else "windowSeconds"
        window = "" if samples.window_s is None else f',"{window_key}":{json.dumps(samples.window_s)}'
        after = f'"{window},"value":"'
        head = f'{{"describedObject":{{"kind":{_json_str(POD_KIND)},"namespace":{_json_str(samples.namespace)},"name":'
        api_version = _json_str(CORE_API_VERSION)
        if v1beta1:
            mid = f',"apiVersion":{api_version}}},"metricName":{name},"timestamp":"'
            tail = f'","selector":{selector}}}'
        else:
            mid = f',"apiVersion":{api_version}}},"metric":{{"name":{name},"selector":{selector}}},"timestamp":"'
            tail = '"}'
        text = samples.quantities
        first = True
        for pod, ts, value in zip(samples.pods, samples.ts, samples.values, strict=True):
            q = text[pod] if text is not None else quantity(value)
            parts.append(f"{'' if first else ','}{head}{_json_str(pod)}{mid}{_rfc3339(int(ts))}{after}{q}{tail}")
            first = False
