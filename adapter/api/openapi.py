"""OpenAPI v3 for the served group-versions, derived from the catalog, in the Kubernetes layout.

``GET /openapi/v3`` is the discovery document kube-aggregator fetches (``{"paths": {"apis/<g>/<v>":
{"serverRelativeURL": ...}}}``, kube-openapi handler3); each group-version then has an OpenAPI 3.0
document describing its routes, the MetricValueList/Status schemas, and every error we may answer.
``/openapi/v2`` stays 404, which the aggregator skips gracefully (k8s-metrics-protocol.md §3.6).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from adapter.api.groups import GROUP, VERSIONS

NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
NS_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def _status_schema() -> dict[str, Any]:
    return {
        "type": "object",
        "required": ["kind", "apiVersion", "status", "message", "code"],
        "properties": {
            "kind": {"type": "string", "enum": ["Status"]},
            "apiVersion": {"type": "string"},
            "metadata": {"type": "object"},
            "status": {"type": "string"},
            "message": {"type": "string"},
            "reason": {"type": "string"},
            "details": {"type": "object"},
            "code": {"type": "integer"},
        },
    }


def _value_schema(version: str) -> dict[str, Any]:
    obj = {
        "type": "object",
        "required": ["kind", "name"],
        "properties": {k: {"type": "string"} for k in ("kind", "namespace", "name", "apiVersion")},
    }
    selector = {"type": "object", "nullable": True}
    props: dict[str, Any] = {
        "describedObject": obj,
        "timestamp": {"type": "string", "format": "date-time"},
        "value": {"type": "string"},
    }
    if version == "v1beta1":
        props.update(metricName={"type": "string"}, window={"type": "integer"}, selector=selector)
        required = ["describedObject", "metricName", "timestamp", "value"]
    else:
        props.update(
            metric={
                "type": "object",
                "required": ["name"],
                "properties": {"name": {"type": "string"}, "selector": selector},
            },
            windowSeconds={"type": "integer"},
        )
        required = ["describedObject", "metric", "timestamp", "value"]
    return {"type": "object", "required": required, "properties": props}


def _responses(ok: str) -> dict[str, Any]:
    def ref(name: str) -> dict[str, Any]:
        return {"content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}}}

    return {
        "200": {"description": "OK", **ref(ok)},
        "400": {"description": "malformed selector or object name", **ref("Status")},
        "404": {"description": "unknown metric, object without data, or no such route", **ref("Status")},
        "503": {"description": "the metrics backend is unreachable or failing", **ref("Status")},
    }


def group_version_document(version: str, metrics: list[str]) -> dict[str, Any]:
    """The OpenAPI 3.0 document of ``custom.metrics.k8s.io/<version>``."""
    base = f"/apis/{GROUP}/{version}"
    metric = {"name": "metric", "in": "path", "required": True, "schema": {"type": "string", "enum": metrics}}
    namespace = {
        "name": "namespace",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": NS_PATTERN, "maxLength": 63},
    }
    name = {
        "name": "name",
        "in": "path",
        "required": True,
        "schema": {"type": "string", "pattern": NAME_PATTERN + "|^\\*$", "maxLength": 253},
    }
    selectors = [
        {"name": key, "in": "query", "required": False, "schema": {"type": "string"}}
        for key in ("labelSelector", "metricLabelSelector")
    ]

    def op(op_id: str, params: list[dict[str, Any]], ok: str = "MetricValueList") -> dict[str, Any]:
        return {"get": {"operationId": op_id, "parameters": params, "responses": _responses(ok)}}

    paths = {
        base: op(f"getAPIResources{version}", [], "APIResourceList"),
        f"{base}/namespaces/{{namespace}}/pods/{{name}}/{{metric}}": op(
            f"listPodMetrics{version}", [namespace, name, metric, *selectors]
        ),
        f"{base}/namespaces/{{namespace}}/deployments.apps/{{name}}/{{metric}}": op(
            f"readDeploymentMetric{version}", [namespace, name, metric, selectors[1]]
        ),
        f"{base}/namespaces/{{namespace}}/metrics/{{metric}}": op(
            f"readNamespaceMetric{version}", [namespace, metric, selectors[1]]
        ),
    }
    schemas = {
        "Status": _status_schema(),
        "MetricValue": _value_schema(version),
        "MetricValueList": {
            "type": "object",
            "required": ["kind", "apiVersion", "items"],
            "properties": {
                "kind": {"type": "string", "enum": ["MetricValueList"]},
                "apiVersion": {"type": "string"},
                "metadata": {"type": "object"},
                "items": {"type": "array", "items": {"$ref": "#/components/schemas/MetricValue"}},
            },
        },
        "APIResourceList": {
            "type": "object",
            "required": ["kind", "groupVersion", "resources"],
            "properties": {
                "kind": {"type": "string"},
                "apiVersion": {"type": "string"},
                "groupVersion": {"type": "string"},
                "resources": {"type": "array", "items": {"type": "object"}},
            },
        },
    }
    return {
        "openapi": "3.0.0",
        "info": {"title": "llm-hpa-adapter", "version": f"{GROUP}/{version}"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def discovery_document(metrics: list[str]) -> dict[str, Any]:
    """``/openapi/v3``: where each group-version's document is, with a content hash for caching."""
    paths = {}
    for version in VERSIONS:
        digest = hashlib.sha512(
            json.dumps(group_version_document(version, metrics), sort_keys=True).encode()
        ).hexdigest()[:128]
        paths[f"apis/{GROUP}/{version}"] = {"serverRelativeURL": f"/openapi/v3/apis/{GROUP}/{version}?hash={digest}"}
    return {"paths": paths}
