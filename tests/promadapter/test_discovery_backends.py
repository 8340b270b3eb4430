"""The Helm chart's default rules against a real Prometheus and a real VictoriaMetrics.

Discovery lists ``/api/v1/series`` once per distinct ``seriesQuery`` (two for the chart's six rules) through
the project's ``PromClient``, and finds exactly the metrics prometheus-adapter lists for the loaded series; the
rendered ``metricsQuery`` of a pods, namespace, Deployment, Service and external request returns the per-object
values the loaded data implies (counters rising at known rates, gauges at known levels). Each backend is a
fresh server, so discovery sees nothing but this test's series.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from adapter.labels import EVERYTHING, parse_selector
from adapter.promadapter.config import parse_config
from adapter.promadapter.discovery import RelistSettings, list_all, list_series
from adapter.promadapter.metrics_query import render_custom, render_external
from adapter.promadapter.registry import discover
from adapter.promadapter.resources import NAMESPACES, GroupResource
from adapter.query.client import PromClient
from tests.support.backends import Series, TestBackend

HELM = (Path(__file__).parent / "data" / "helm-chart-default-config.yaml").read_text()
# The Helm chart puts rules.external under externalRules; this one is docs/externalmetrics.md's first example.
EXTERNAL = """externalRules:
- seriesQuery: '{__name__="queue_consumer_lag",name!=""}'
  metricsQuery: sum(<<.Series>>{<<.LabelMatchers>>}) by (name)
  resources:
    overrides: { namespace: {resource: "namespace"} }
"""
NS = "prod"
STEP = 15


def counter(now: int, rate: float, **labels: str) -> Series:
    start = now - 600
    return Series(labels, [(t, rate * (t - start)) for t in range(start, now + 1, STEP)])


def gauge(now: int, level: float, **labels: str) -> Series:
    return Series(labels, [(t, level) for t in range(now - 600, now + 1, STEP)])


def fleet(now: int) -> list[Series]:
    cpu = "container_cpu_usage_seconds_total"
    mem = "container_memory_working_set_bytes"
    return [
        counter(now, 0.5, __name__=cpu, namespace=NS, pod="web-1", container="app"),
        counter(now, 0.25, __name__=cpu, namespace=NS, pod="web-1", container="sidecar"),
        counter(now, 1.0, __name__=cpu, namespace=NS, pod="web-2", container="app"),
        counter(now, 9.0, __name__=cpu, namespace=NS, pod="web-2", container="POD"),  # the pause container
        gauge(now, 100e6, __name__=mem, namespace=NS, pod="web-1", container="app"),
        gauge(now, 200e6, __name__=mem, namespace=NS, pod="web-2", container="app"),
        counter(now, 3.0, __name__="http_requests_total", namespace=NS, pod="web-1", service="web", job="web"),
        counter(now, 4.0, __name__="http_requests_total", namespace=NS, pod="web-2", service="web", job="web"),
        gauge(now, 12.0, __name__="queue_depth", namespace=NS, deployment="worker"),
        gauge(now, 40.0, __name__="queue_consumer_lag", namespace=NS, name="q1"),
        gauge(now, 2.0, __name__="queue_consumer_lag", namespace=NS, name="q2"),
        gauge(now, 500.0, __name__="queue_consumer_lag", namespace="other", name="q1"),
    ]


def test_helm_default_rules_discover_and_answer(own_backend: TestBackend) -> None:
    now = int(time.time())
    own_backend.load(fleet(now))
    config = parse_config(HELM + EXTERNAL)

    async def main() -> None:
        async with httpx.AsyncClient(trust_env=False) as http:
            client = PromClient(own_backend.url, http=http, backend=own_backend.kind)  # type: ignore[arg-type]
            queries = [r.series_query for r in config.rules + config.external_rules]
            answers = await list_all(client, queries, now=now, relist=RelistSettings(interval_s=60, max_age_s=900))
            assert len(answers) == 3  # six custom rules share two queries, plus the external one
            registry = discover(config, answers)

            assert sorted(m.name for m in registry.custom_metrics()) == [
                "deployments.apps/queue_depth",
                "jobs.batch/http_requests",
                "namespaces/cpu_usage",
                "namespaces/http_requests",
                "namespaces/memory_working_set_bytes",
                "namespaces/queue_consumer_lag",
                "namespaces/queue_depth",
                "pods/cpu_usage",
                "pods/http_requests",
                "pods/memory_working_set_bytes",
                "services/http_requests",
            ]
            assert sorted(registry.external) == ["queue_consumer_lag"]

            async def values(query: str, label: str) -> dict[str, float]:
                return {s.labels.get(label, ""): s.value for s in await client.query(query, now)}  # type: ignore[arg-type]

            async def custom(
                resource: GroupResource, metric: str, ns: str | None, names: list[str]
            ) -> dict[str, float]:
                found = registry.find_custom(resource, metric)
                assert found is not None
                _, source = found
                query = render_custom(source.rule, source.series, resource, ns, names, EVERYTHING)
                label = source.rule.resources.label_for(resource)
                assert label is not None
                return await values(query, label)

            pods = GroupResource("", "pods")
            assert await custom(pods, "cpu_usage", NS, ["web-1", "web-2"]) == pytest.approx(
                {"web-1": 0.75, "web-2": 1.0}
            )
            assert await custom(pods, "memory_working_set_bytes", NS, ["web-2"]) == {"web-2": 200e6}
            assert await custom(NAMESPACES, "cpu_usage", None, [NS]) == pytest.approx({NS: 1.75})
            deployments = GroupResource("apps", "deployments")
            assert await custom(deployments, "queue_depth", NS, ["worker"]) == {"worker": 12.0}
            services = GroupResource("", "services")
            assert await custom(services, "http_requests", NS, ["web"]) == pytest.approx({"web": 7.0})

            source = registry.external["queue_consumer_lag"]
            query = render_external(source.rule, source.series, NS, parse_selector("name=q1"))
            assert await values(query, "name") == {"q1": 40.0}
            everything = render_external(source.rule, source.series, NS, EVERYTHING)
            assert await values(everything, "name") == {"q1": 40.0, "q2": 2.0}

            # One listing: the label sets as the backend holds them, __name__ included.
            listed = await list_series(client, '{__name__="queue_depth"}', start=now - 900)
            assert listed == [{"__name__": "queue_depth", "namespace": NS, "deployment": "worker"}]

    asyncio.run(main())
