"""The rules served: the startup error of a bad file, store mode vs direct mode, and re-listing.

Against a real backend: a stored rule costs one backend query per (namespace, metric, metricLabelSelector)
whatever the number of objects asked for; a direct one (a query that is not one aggregation by the resource's
label, or the store off) one per request, as prometheus-adapter. A failed re-list keeps the last discovery.
"""

from __future__ import annotations

import asyncio
import logging
import time
from pathlib import Path

import pytest

from adapter.__main__ import main
from adapter.errors import NotFound
from adapter.labels import EVERYTHING
from adapter.observability import Observability
from adapter.promadapter.config import parse_config
from adapter.promadapter.metrics_query import groups_by_resource
from adapter.promadapter.resources import GroupResource
from adapter.provider.base import MetricInfo, ObjectRef
from adapter.provider.promadapter import RulesProvider, RulesSetup, served_value
from adapter.query.client import open_backend
from adapter.settings import Settings
from adapter.store import StoreConfig
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import Series, TestBackend

DATA = Path(__file__).parent / "data"
PODS = GroupResource("", "pods")
RULES = """
rules:
- seriesQuery: 'app_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^(.*)_total$", as: "${1}_per_second"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: 'app_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^(.*)_total$", as: "${1}_share"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>) / ignoring(<<.GroupBy>>) group_left sum(rate(<<.Series>>{namespace!=""}[2m]))'
"""  # noqa: E501


def test_a_bad_file_is_a_startup_error_naming_rule_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "config.yaml"
    bad.write_text("rules:\n- seriesQuery: 'up'\n  name: {matches: '^(a)_(b)$'}\n  metricsQuery: 'x'\n")
    argv = ["serve", "--insecure-plain-http", "--prometheus-url", "http://127.0.0.1:9", "--pod-source", "prometheus"]
    assert main([*argv, "--prometheus-adapter-config", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "--prometheus-adapter-config" in err and "rules[0] (seriesQuery 'up'): name.as: must be given" in err
    assert "Traceback" not in err
    assert main([*argv, "--prometheus-adapter-config", str(tmp_path / "missing.yaml")]) == 2
    assert "missing.yaml" in capsys.readouterr().err
    assert main([*argv, "--prometheus-adapter-config", str(bad), "--metrics-relist-interval", "soon"]) == 2
    assert "--metrics-relist-interval" in capsys.readouterr().err


def test_which_queries_the_store_may_answer() -> None:
    """One aggregation by the resource's label over series-wise functions: stored. A binary operation across
    objects (the share of a namespace's total) is not the same query per namespace: direct."""
    config = parse_config(RULES)
    assert groups_by_resource(config.rules[0], PODS)
    assert not groups_by_resource(config.rules[1], PODS)
    defaults = parse_config((DATA / "helm-chart-default-config.yaml").read_text())
    assert all(groups_by_resource(r, PODS) for r in defaults.rules)


@pytest.mark.parametrize(
    ("value", "served"), [(0.1239, 0.123), (-0.1239, -0.123), (2.0, 2.0), (float("nan"), None), (1e300, None)]
)
def test_values_are_upstreams_truncated_milli_units(value: float, served: float | None) -> None:
    assert served_value(value) == served


def series(namespace: str, now: float, pods: int) -> list[Series]:
    ts = [now - 300 + 15 * i for i in range(21)]
    return [
        Series(
            {"__name__": "app_requests_total", "namespace": namespace, "pod": f"p{i}"},
            [(t, 10.0 + (i + 1) * (t - ts[0])) for t in ts],
        )
        for i in range(pods)
    ]


async def _asked(backend: TestBackend, namespace: str, now: float, metric: str, store: bool) -> tuple[int, list[float]]:
    """Backend queries and values for asking each of 12 pods, twice, for ``metric``."""
    counts: dict[str, int] = {}

    def observe(kind: str, endpoint: str, seconds: float, outcome: str) -> None:
        counts[endpoint] = counts.get(endpoint, 0) + 1

    settings = Settings(prometheus_url=backend.url, backend=backend.kind)  # type: ignore[arg-type]
    async with open_backend(settings, observer=observe) as client:
        obs = Observability(clock=lambda: now)
        rules = RulesProvider(
            parse_config(RULES),
            client,
            None,
            lambda: now,
            store=StoreConfig() if store else None,
            on_modes=obs.rule_modes,
        )
        await rules.relist_once()
        exposed = obs.exposition().decode()
        for rule, mode in zip(rules.config.rules, ["stored", "direct"] if store else ["direct"] * 2, strict=True):
            for resource in ["namespaces", "pods"]:
                labels = f'mode="{mode}",resource="{resource}",rule="{rule.where.split()[0]}"'
                assert f"llm_hpa_adapter_promadapter_rule_mode{{{labels}}} 1.0" in exposed
        if store:
            modes = zip(rules.config.rules, ["stored", "direct"], strict=True)
            assert rules.modes() == [f"{r.where}: namespaces {m}, pods {m}" for r, m in modes]
        before = sum(counts.values())
        info = MetricInfo("pods", metric, True)
        values = []
        for _ in range(2):
            for i in range(12):
                obj = ObjectRef("Pod", "/v1", f"p{i}", namespace)
                values.append((await rules.get_metric_by_name(obj, info, EVERYTHING)).value)
        with pytest.raises(NotFound):
            await rules.get_metric_by_name(ObjectRef("Pod", "/v1", "nope", namespace), info, EVERYTHING)
        await rules.close()
        return sum(counts.values()) - before, values


def test_stored_rules_query_once_per_key_direct_ones_per_request(backend: TestBackend, unique_ns: str) -> None:
    now = float(int(time.time()) - 30)
    backend.load(series(unique_ns, now, 12))
    stored_queries, stored = asyncio.run(_asked(backend, unique_ns, now, "app_requests_per_second", store=True))
    direct_queries, direct = asyncio.run(_asked(backend, unique_ns, now, "app_requests_per_second", store=False))
    assert stored == direct  # the same answers
    assert stored[:12] == pytest.approx([i + 1.0 for i in range(12)], rel=0.02)
    # Stored: one namespace-wide load (plus the store's single-flight of the unknown pod's refresh, at most one).
    assert stored_queries <= 2
    # Direct: one query per distinct request (the client's short answer cache shares the repeated ones).
    assert direct_queries == 13  # 12 pods and the unknown one
    share_queries, _ = asyncio.run(_asked(backend, unique_ns, now, "app_requests_share", store=True))
    assert share_queries == 13  # not one aggregation by pod: direct even with the store on


async def _relist(backend: TestBackend, namespace: str, now: float) -> tuple[list[str], list[str], str, float]:
    settings = Settings(prometheus_url=backend.url, backend=backend.kind, query_timeout_s=2)  # type: ignore[arg-type]
    async with open_backend(settings) as client:
        rules = RulesProvider(parse_config(RULES), client, None, lambda: now)
        await rules.relist_once()
        first = [m.metric for m in rules.list_all_metrics()]
        backend.close()
        await rules.relist_once()
        retry = rules._loop.interval_s  # the next listing's delay
        return first, [m.metric for m in rules.list_all_metrics()], rules.listing_error, retry


def test_a_failed_relist_keeps_the_last_discovery(own_backend: TestBackend) -> None:
    now = float(int(time.time()) - 30)
    own_backend.load(series("ns", now, 2))
    first, after, error, retry = asyncio.run(_relist(own_backend, "ns", now))
    assert sorted(set(first)) == ["app_requests_per_second", "app_requests_share"]
    assert after == first
    assert error
    assert retry == 30.0  # retried well before the 10-minute interval


def test_a_label_selector_on_other_resources_is_refused_before_any_query() -> None:
    """Only the Kubernetes API knows a Service's labels: ``services/*?labelSelector=...`` is a 400, never a query
    (the client here is None: reaching it would fail the test)."""
    from adapter.errors import BadRequest
    from adapter.labels import parse_selector
    from adapter.promadapter.registry import discover

    config = parse_config((DATA / "helm-chart-default-config.yaml").read_text())
    listed = [{"__name__": "queue_length", "namespace": "ns", "service": "web"}]
    rules = RulesProvider(config, None, None)  # type: ignore[arg-type]
    rules.registry = discover(config, {r.series_query: listed for r in config.rules})
    info = MetricInfo("services", "queue_length", True)
    assert rules.serves(info)
    with pytest.raises(BadRequest, match="needs the objects' labels"):
        asyncio.run(rules.get_metric_by_selector("ns", parse_selector("app=web"), info, EVERYTHING))


CLASHING = """
rules:
- seriesQuery: '{__name__=~"app_queue|llm_composite_load",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: '{__name__=~"app_queue|llm_composite_load",namespace!="",pod!=""}'
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>})'
"""


def test_a_relist_that_brings_a_clash_with_the_catalog_warns_once(
    own_backend: TestBackend, caplog: pytest.LogCaptureFixture
) -> None:
    """A name served by the catalog and by a rule is the catalog's; the server says so when a re-list first
    finds it, not only at start-up, and once per name however many re-lists find it again."""
    now = float(int(time.time()) - 30)
    ts = [now - 120 + 15 * i for i in range(9)]
    own_backend.load([Series({"__name__": "app_queue", "namespace": "ns", "pod": "p0"}, [(t, 1.0) for t in ts])])
    setup = RulesSetup(parse_config(CLASHING))
    settings = Settings(prometheus_url=own_backend.url, backend=own_backend.kind, pod_source="prometheus")  # type: ignore[arg-type]

    def clash_warnings() -> list[str]:
        return sorted(r.getMessage() for r in caplog.records if "is the catalog's too" in r.getMessage())

    with (
        caplog.at_level(logging.WARNING, logger="adapter.app"),
        running_adapter(settings, clock=lambda: now, prometheus_adapter=setup) as url,
    ):
        assert clash_warnings() == []  # app_queue is no catalog metric
        state = APPS[url].state
        # A pod starts exposing a series named like a catalog metric; the next re-list discovers it.
        own_backend.load(
            [Series({"__name__": "llm_composite_load", "namespace": "ns", "pod": "p0"}, [(t, 9.0) for t in ts])]
        )
        for _ in range(2):
            asyncio.run_coroutine_threadsafe(state.rules_provider.relist_once(), state.loop).result(10)
        assert state.rules_provider.listings == 3
        prefix = "prometheus-adapter rules: "
        assert clash_warnings() == [
            f"{prefix}{name}llm_composite_load is the catalog's too; the catalog answers it"
            for name in ("external metric ", "namespaces/", "pods/")
        ]
