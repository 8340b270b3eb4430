"""The value store (adapter/store.py) against real backends: what it serves equals a direct computation,
nothing older than max_staleness is ever served, idle keys go, keys are capped, and a burst for a new key costs
the backend one query (counted by the backend itself)."""

from __future__ import annotations

import asyncio
import calendar
import concurrent.futures
import dataclasses
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib import resources
from typing import Any

import httpx
import pytest
import yaml

from adapter.aggregate import PodValue, combine, fuse
from adapter.catalog import load_catalog, parse_catalog
from adapter.errors import ConfigError, NotFound, TooManyRequests
from adapter.labels import EVERYTHING, parse_selector
from adapter.pods.prometheus import PrometheusPodSource
from adapter.provider.base import MetricInfo, ObjectRef, pod_ref
from adapter.provider.prometheus import PrometheusProvider
from adapter.quantity import parse_quantity
from adapter.query.client import PromClient
from adapter.query.promql import Scope
from adapter.settings import Settings
from adapter.store import Store, StoreConfig
from tests.support.adapter_server import running_adapter
from tests.support.backends import KINDS, TestBackend, start_backend
from tests.support.fleet_data import PodSpec, build, expected

APP = parse_selector("app=web")


def fleet(namespace: str, n: int = 6) -> list[PodSpec]:
    layouts = ("honor", "exported", "old")
    return [
        PodSpec(f"web-6f7d8c9b5-p{i}", gpus=2 + i % 3, layout=layouts[i % 3], labels={"app": "web"}, deployment="web")
        for i in range(n)
    ]


@asynccontextmanager
async def provider_for(backend: TestBackend, config: StoreConfig) -> AsyncIterator[PrometheusProvider]:
    catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=0.0, store=config)
    async with httpx.AsyncClient() as http:
        client = PromClient(backend.url, http=http, backend=backend.kind)  # type: ignore[arg-type]
        pods = PrometheusPodSource(client, catalog, ttl_s=config.refresh_s)
        provider = PrometheusProvider(catalog, client, pods, store=config)
        await pods.start()
        await provider.start()
        try:
            yield provider
        finally:
            await provider.close()
            await pods.close()


def by_pod(samples: list[Any]) -> dict[str, float]:
    return {s.obj.name: s.value for s in samples}


@pytest.mark.parametrize("metric", ["gpu_utilization_p90", "inference_queue_depth", "llm_composite_load"])
def test_served_values_equal_a_direct_computation_at_the_same_time(
    backend: TestBackend, unique_ns: str, metric: str
) -> None:
    pods = fleet(unique_ns)
    backend.load(build(unique_ns, pods, float(int(time.time()) - 30)))

    async def main() -> None:
        async with provider_for(backend, StoreConfig(refresh_s=60, max_staleness_s=120)) as provider:
            assert provider.values.store is not None
            info = MetricInfo("pods", metric, True)
            served = by_pod(await provider.get_metric_by_selector(unique_ns, APP, info, EVERYTHING))
            names = provider.served[metric].names
            scope = Scope(unique_ns, tuple(sorted(served)))
            # The direct path: a query over just these pods, evaluated when the store's own query for that
            # catalog metric was (a rate over a window depends on the evaluation time).
            direct: dict[str, dict[str, float]] = {}
            for n in names:
                fresh = provider.values.store.peek((unique_ns, n, EVERYTHING))
                assert fresh is not None
                direct[n] = {p: pv.value for p, pv in (await provider.read(n, scope, at=fresh.at)).values.items()}
            if metric in provider.catalog.composites:
                per_term = {n: {p: PodValue(v, 0.0, 1) for p, v in vals.items()} for n, vals in direct.items()}
                want = {p: cv.value for p, cv in fuse(provider.catalog.composites[metric].terms, per_term).items()}
            else:
                want = direct[metric]
            assert served and served == want
            if metric != "llm_composite_load":  # and against the fleet's own numbers, independently
                for p in pods:
                    want = expected(p, metric)
                    assert (p.name in served) == (want is not None)
                    if want is not None:
                        assert math.isclose(served[p.name], want, rel_tol=1e-9, abs_tol=1e-9)
            # The Deployment's value is the catalog's combination of the same per-pod values.
            obj = await provider.get_metric_by_name(
                ObjectRef("Deployment", "apps/v1", "web", unique_ns),
                MetricInfo("deployments.apps", metric, True),
                EVERYTHING,
            )
            rule = provider.served[metric].combine
            assert math.isclose(obj.value, combine(list(served.values()), rule), rel_tol=1e-12)

    asyncio.run(main())


def test_a_composite_fused_off_the_request_path_equals_a_direct_computation(
    prometheus: TestBackend, unique_ns: str
) -> None:
    """Once its terms have refreshed, the next poll has the composite fused for the whole namespace off the request
    path; what a poll then gets equals fusing the pods' own term values queried directly at the store's evaluation
    times."""
    pods = fleet(unique_ns)
    backend = prometheus
    backend.load(build(unique_ns, pods, float(int(time.time()) - 30)))
    metric = "llm_composite_load"

    async def main() -> None:
        async with provider_for(backend, StoreConfig(refresh_s=15, max_staleness_s=30)) as provider:
            assert provider.values.store is not None
            now = [1000.0]
            provider.values.store.monotonic = lambda: now[0]  # refreshes happen when the test says
            info = MetricInfo("pods", metric, True)
            first = by_pod(await provider.get_metric_by_selector(unique_ns, APP, info, EVERYTHING))
            assert first
            names = provider.served[metric].names
            keys = [(unique_ns, n, EVERYTHING) for n in names]
            before = [provider.values.store.peek(k) for k in keys]
            now[0] += 15 * 1.5  # every term is due: they refresh together
            await next_tick(provider.values.store)
            now_values = [provider.values.store.peek(k) for k in keys]
            assert all(
                a is not None and b is not None and a.value is not b.value
                for a, b in zip(before, now_values, strict=True)
            ), "every term refreshed once since the first poll"
            # The next poll fuses its own pods and starts the namespace's fusion of the new term values.
            assert by_pod(await provider.get_metric_by_selector(unique_ns, APP, info, EVERYTHING))
            for task in list(provider.values._fusing.values()):
                await task
            fused = provider.values._fused.get((unique_ns, metric, EVERYTHING))
            assert fused is not None, "no read fused the composite"
            samples = await provider.get_metric_by_selector(unique_ns, APP, info, EVERYTHING)
            fresh = [provider.values.store.peek(k) for k in keys]
            assert all(f is not None and f.value is s for f, s in zip(fresh, fused.sources, strict=True)), (
                "a term refreshed in between: the poll could not use the fused values"
            )
            scope = Scope(unique_ns, tuple(sorted(first)))
            per_term = {}
            for n, f in zip(names, fresh, strict=True):
                assert f is not None
                per_term[n] = {
                    p: PodValue(pv.value, 0.0, 1) for p, pv in (await provider.read(n, scope, at=f.at)).values.items()
                }
            want = {p: cv.value for p, cv in fuse(provider.catalog.composites[metric].terms, per_term).items()}
            assert by_pod(samples) == want and set(want) == set(first)
            # and the Quantity the wire shows is the value's
            assert all(s.quantity == fused.quantities[s.obj.name] for s in samples)

    asyncio.run(main())


def test_idle_keys_are_dropped_and_keys_are_capped(prometheus: TestBackend, unique_ns: str) -> None:
    namespaces = [f"{unique_ns}-{i}" for i in range(3)]
    now = float(int(time.time()) - 30)
    for ns in namespaces:
        prometheus.load(build(ns, fleet(ns, 3), now))
    info = MetricInfo("pods", "gpu_utilization_p90", True)

    async def main() -> None:
        config = StoreConfig(refresh_s=0.2, max_staleness_s=0.4, max_keys=2, idle_s=1.0)
        async with provider_for(prometheus, config) as provider:
            store = provider.values.store
            assert store is not None
            now = [1000.0]
            store.monotonic = lambda: now[0]  # idleness, staleness and refreshes happen when the test says
            answers = [by_pod(await provider.get_metric_by_selector(ns, APP, info, EVERYTHING)) for ns in namespaces]
            assert [bool(a) for a in answers] == [True, True, True]  # the third answered, directly
            assert len(store) == 2 and store.counters.overflow == 1
            assert {k.key[0] for k in store.keys()} == set(namespaces[:2])
            again = by_pod(await provider.get_metric_by_selector(namespaces[2], APP, info, EVERYTHING))
            assert again == answers[2] and store.counters.overflow == 2 and len(store) == 2
            # Keep asking for the first namespace only, 2 s of the store's clock in steps of 0.05 s with a pass of
            # its refresh loop after each: the second goes idle and is dropped, the first stays (and stays fresh).
            for _ in range(40):
                now[0] += 0.05
                assert by_pod(await provider.get_metric_by_selector(namespaces[0], APP, info, EVERYTHING)) == answers[0]
                await next_tick(store)
            assert {k.key[0] for k in store.keys()} == {namespaces[0]}
            assert store.counters.dropped == 1 and store.counters.refreshes > 0
            # Below the cap again: the third namespace is now kept.
            await provider.get_metric_by_selector(namespaces[2], APP, info, EVERYTHING)
            assert {k.key[0] for k in store.keys()} == {namespaces[0], namespaces[2]}

    asyncio.run(main())


def query_count(backend: TestBackend) -> float:
    """Instant queries the backend answered, from its own /metrics."""
    text = httpx.get(f"{backend.url}/metrics", timeout=10).text
    total = 0.0
    for line in text.splitlines():
        if (
            backend.kind == "prometheus"
            and line.startswith("prometheus_http_requests_total{")
            and 'handler="/api/v1/query"' in line
        ):
            total += float(line.split()[-1])
        if (
            backend.kind == "victoriametrics"
            and line.startswith("vm_http_requests_total{")
            and 'path="/api/v1/query"' in line
        ):
            total += float(line.split()[-1])
    return total


@pytest.fixture(params=KINDS, ids=KINDS)
def own_backend(request: pytest.FixtureRequest) -> Any:
    """A backend of our own: its query counter sees only this test, and these tests stop it."""
    backend = start_backend(request.param)
    yield backend
    backend.close()


def settings_for(backend: TestBackend, config: StoreConfig, pod_ttl: float) -> Settings:
    catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=0.0, store=config)
    return Settings(
        prometheus_url=backend.url,
        backend=backend.kind,  # type: ignore[arg-type]
        pod_source="prometheus",
        catalog=catalog,
        pod_cache_ttl_s=pod_ttl,
        query_timeout_s=2.0,
    )


def path(ns: str, metric: str) -> str:
    return f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/{metric}?labelSelector=app%3Dweb"


def test_a_burst_for_a_new_key_sends_one_backend_query(own_backend: TestBackend) -> None:
    ns = "burst"
    pods = fleet(ns, 8)
    own_backend.load(build(ns, pods, float(int(time.time()) - 30)))
    # Long intervals: no background refresh may run during the test and blur the count.
    with running_adapter(settings_for(own_backend, StoreConfig(refresh_s=600, max_staleness_s=1200), 600)) as url:
        assert httpx.get(url + path(ns, "gpu_utilization_p90"), timeout=30).status_code == 200  # pods known
        before = query_count(own_backend)
        with concurrent.futures.ThreadPoolExecutor(40) as pool:
            answers = list(
                pool.map(lambda _: httpx.get(url + path(ns, "inference_queue_depth"), timeout=30), range(120))
            )
        assert all(r.status_code == 200 for r in answers)
        assert len({r.content for r in answers}) == 1 and len(answers[0].json()["items"]) == len(pods)
        assert query_count(own_backend) - before == 1
        # Answered from memory from now on: more requests, no more queries.
        for _ in range(20):
            assert httpx.get(url + path(ns, "inference_queue_depth"), timeout=30).status_code == 200
        assert query_count(own_backend) - before == 1
        # /metrics shows each key's data age and refresh duration; explain says how old the served values are.
        text = httpx.get(url + "/metrics", timeout=30).text
        key = f'namespace="{ns}",metric="inference_queue_depth",selector=""'
        ages = [
            float(line.split()[-1])
            for line in text.splitlines()
            if line.startswith(f"llm_hpa_adapter_store_data_age_seconds{{{key}}}")
        ]
        assert len(ages) == 1 and 0 <= ages[0] < 1200
        assert f"llm_hpa_adapter_store_refresh_duration_seconds{{{key}}}" in text
        assert 'llm_hpa_adapter_store_events_total{event="hit"}' in text
        ex = httpx.get(
            url + "/explain",
            params={"namespace": ns, "metric": "inference_queue_depth", "selector": "app=web"},
            timeout=30,
        )
        assert ex.status_code == 200, ex.text
        assert 0 <= ex.json()["data_age_s"] < 1200


def _served_at(item: dict[str, Any]) -> float:
    return float(calendar.timegm(time.strptime(item["timestamp"], "%Y-%m-%dT%H:%M:%SZ")))


def test_a_value_never_outlives_max_staleness_then_recovers(own_backend: TestBackend) -> None:
    ns = "stale"
    pods = fleet(ns, 4)
    own_backend.load(build(ns, pods, float(int(time.time()) - 30)))
    config = StoreConfig(refresh_s=0.5, max_staleness_s=1.5)
    with running_adapter(settings_for(own_backend, config, 0.5)) as url:
        first = httpx.get(url + path(ns, "gpu_utilization_p90"), timeout=30)
        assert first.status_code == 200 and len(first.json()["items"]) == len(pods)
        values = {i["describedObject"]["name"]: parse_quantity(i["value"]) for i in first.json()["items"]}
        own_backend.process.stop()
        outcomes = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = httpx.get(url + path(ns, "gpu_utilization_p90"), timeout=30)
            received = time.time()
            outcomes.append(r.status_code)
            if r.status_code == 200:
                for item in r.json()["items"]:  # the same real values, and never older than allowed
                    assert parse_quantity(item["value"]) == values[item["describedObject"]["name"]]
                    # timestamps on the wire have whole seconds: allow the truncation
                    assert received - _served_at(item) <= config.max_staleness_s + 1.0
            else:
                doc = r.json()
                assert r.status_code == 503 and doc["kind"] == "Status" and doc["reason"] == "ServiceUnavailable"
                if outcomes[-3:] == [503, 503, 503]:
                    break
            time.sleep(0.1)
        assert outcomes[-3:] == [503, 503, 503], outcomes
        own_backend.process.start()
        deadline = time.monotonic() + 30
        while (r := httpx.get(url + path(ns, "gpu_utilization_p90"), timeout=30)).status_code != 200:
            assert r.status_code == 503 and time.monotonic() < deadline, r.text
            time.sleep(0.2)
        items = r.json()["items"]
        assert {i["describedObject"]["name"]: parse_quantity(i["value"]) for i in items} == values
        assert all(time.time() - _served_at(i) <= config.max_staleness_s + 1.0 for i in items)


def _catalog_doc() -> dict[str, Any]:

    return yaml.safe_load(resources.files("adapter").joinpath("catalog.yaml").read_text())  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("section", "want"),
    [
        ({"refresh": "15s", "max_staleness": "30s", "max_keys": 5000, "idle": "1h"}, StoreConfig()),
        ({"refresh": "500ms"}, StoreConfig(refresh_s=0.5, max_staleness_s=1.0)),  # staleness: two refreshes
        ({}, StoreConfig()),
        (False, None),
    ],
)
def test_the_catalog_store_section(section: Any, want: StoreConfig | None) -> None:
    doc = _catalog_doc()
    doc["store"] = section
    assert parse_catalog(doc).store == want


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ({"refresh": "soon"}, "store.refresh"),
        ({"refresh": "30s", "max_staleness": "10s"}, "store.max_staleness"),
        ({"max_keys": 0}, "store.max_keys"),
        ({"ttl": "1s"}, "unknown keys"),
    ],
)
def test_bad_store_sections_name_the_key(section: Any, words: str) -> None:
    doc = _catalog_doc()
    doc["store"] = section
    with pytest.raises(ConfigError, match=words):
        parse_catalog(doc)


def test_keys_asked_for_together_refresh_spread_over_the_interval() -> None:
    """The refresh phase of a key comes from its hash, not from the moment it was first asked for."""
    now = [1000.0]

    async def main() -> None:
        async def value_of(key: str, at: float) -> str:
            return key

        store: Store[str, str] = Store(
            "t", value_of, StoreConfig(refresh_s=15, max_staleness_s=30), monotonic=lambda: now[0]
        )
        for i in range(200):
            assert (await store.get(f"ns-{i}")).value == f"ns-{i}"
        dues = sorted(e.due - now[0] for e in store._entries.values())
        assert dues[0] >= 7.5 and dues[-1] <= 22.5  # within [0.5, 1.5] intervals, before expiry at 30 s
        assert sum(d < 15 for d in dues) in range(60, 141)  # about half in each half of the span
        await store.close()

    asyncio.run(main())


async def next_tick(store: Store[Any, Any]) -> None:
    """One pass of the refresh loop, now (whatever the machine's speed), and the refreshes it started, done."""
    await store._tick()
    await asyncio.gather(*store._running)


def test_a_new_pod_shows_up_at_the_next_tick_and_a_pod_without_data_asks_once(
    prometheus: TestBackend, unique_ns: str
) -> None:
    now = float(int(time.time()) - 30)
    prometheus.load(build(unique_ns, fleet(unique_ns, 2), now))
    info = MetricInfo("pods", "gpu_utilization_p90", True)

    def pod(name: str) -> ObjectRef:
        return pod_ref(name, unique_ns)

    async def main() -> None:
        # No regular refresh during the test: whatever refreshes is the early one.
        async with provider_for(prometheus, StoreConfig(refresh_s=600, max_staleness_s=1200)) as provider:
            store = provider.values.store
            assert store is not None
            first = await provider.get_metric_by_name(pod("web-6f7d8c9b5-p0"), info, EVERYTHING)
            new = PodSpec("web-6f7d8c9b5-new", gpus=2, layout="honor", labels={"app": "web"})
            prometheus.load(build(unique_ns, [new], now))
            with pytest.raises(NotFound):  # not in the namespace's values yet: asks for an early refresh
                await provider.get_metric_by_name(pod(new.name), info, EVERYTHING)
            await next_tick(store)
            got = await provider.get_metric_by_name(pod(new.name), info, EVERYTHING)
            assert got.value == expected(new, "gpu_utilization_p90") and store.counters.refreshes == 1
            # A pod that never has data costs one early refresh, not one per request.
            for _ in range(3):
                with pytest.raises(NotFound):
                    await provider.get_metric_by_name(pod("web-6f7d8c9b5-nodata"), info, EVERYTHING)
                await next_tick(store)
            assert store.counters.refreshes == 2
            again = await provider.get_metric_by_name(pod("web-6f7d8c9b5-p0"), info, EVERYTHING)
            assert again.value == first.value

    asyncio.run(main())


class _Loads:
    """A loader that records each load (key, evaluation time) and answers the key's text."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def __call__(self, key: tuple[str, str], at: float) -> str:
        self.calls.append("/".join(key))
        return "/".join(key)


async def _settle(store: Store[Any, Any]) -> None:
    """Let the refreshes the last tick started finish (they run on this loop)."""
    for _ in range(5):
        await asyncio.sleep(0)


def test_a_key_nobody_asks_for_stops_costing_refreshes() -> None:
    now = [1000.0]
    loads = _Loads()

    async def main() -> None:
        store: Store[tuple[str, str], str] = Store(
            "t", loads, StoreConfig(refresh_s=15, max_staleness_s=30), monotonic=lambda: now[0]
        )
        assert store.config.active_window_s == 60  # four refresh intervals
        await store.get(("ns", "asked"))
        await store.get(("ns", "silent"))
        for _ in range(20):  # 5 minutes; only "asked" is asked for, every 15 s
            now[0] += 15
            await store._tick()
            await _settle(store)
            assert (await store.get(("ns", "asked"))).age_s <= 15
        silent = [c for c in loads.calls if c == "ns/silent"]
        assert len(silent) <= 1 + 60 // 15  # its first load, then only while it was still active
        assert len([c for c in loads.calls if c == "ns/asked"]) >= 20
        state = {k.key: k for k in store.keys()}
        assert not state[("ns", "silent")].active and state[("ns", "asked")].active
        # Asked for again once expired: loaded for that request (a direct load, counted), then active again.
        before = len(loads.calls)
        fresh = await store.get(("ns", "silent"))
        assert fresh.age_s == 0 and len(loads.calls) == before + 1 and store.counters.reloads == 1
        assert {k.key: k for k in store.keys()}[("ns", "silent")].active
        await store.close()

    asyncio.run(main())


def test_each_namespace_has_its_share_of_keys_and_loads() -> None:
    now = [1000.0]
    loads = _Loads()
    config = StoreConfig(refresh_s=15, max_staleness_s=30, max_keys_per_namespace=3, loads_per_namespace=5)

    async def main() -> None:
        store: Store[tuple[str, str], str] = Store("t", loads, config, monotonic=lambda: now[0])
        for i in range(5):  # three keys, then two answered by a direct load, not kept
            assert (await store.get(("a", f"k{i}"))).value == f"a/k{i}"
        assert store.namespace_keys() == {"a": 3} and store.counters.overflow == 2
        with pytest.raises(TooManyRequests) as refused:  # its five loads of this interval are spent
            await store.get(("a", "k9"))
        assert refused.value.code == 429 and refused.value.details == {"retryAfterSeconds": 15}
        assert "store.loads_per_namespace" in refused.value.message
        assert (await store.get(("a", "k0"))).value == "a/k0"  # its stored keys still serve from memory
        assert (await store.get(("b", "k0"))).value == "b/k0"  # and another namespace is not affected
        assert store.shares.get("store_keys", "a") == 2 and store.shares.get("store_loads", "a") == 1
        assert store.shares.get("store_loads", "b") == 0
        now[0] += 61  # the next interval, and "a"'s keys are inactive: a new key takes the place of one
        assert (await store.get(("a", "new"))).value == "a/new"
        assert store.has(("a", "new")) and store.namespace_keys()["a"] == 3 and store.counters.evicted == 1
        await store.close()

    asyncio.run(main())


def test_at_the_global_cap_the_biggest_namespace_gives_way() -> None:
    now = [1000.0]
    config = StoreConfig(refresh_s=15, max_staleness_s=30, max_keys=10, max_keys_per_namespace=10)

    async def main() -> None:
        store: Store[tuple[str, str], str] = Store("t", _Loads(), config, monotonic=lambda: now[0])
        for i in range(10):
            await store.get(("big", f"k{i}"))
        for i in range(4):  # every key active: "big" gives way until it holds no more than one more
            await store.get(("small", f"k{i}"))
            assert store.has(("small", f"k{i}"))
        assert store.namespace_keys() == {"big": 6, "small": 4} and not store.has(("big", "k0"))
        await store.get(("small", "k4"))
        await store.get(("small", "k5"))  # 5 against 5: no more room to take
        assert store.namespace_keys() == {"big": 5, "small": 5} and not store.has(("small", "k5"))
        await store.close()

    asyncio.run(main())


def test_the_catalog_store_shares() -> None:
    doc = _catalog_doc()
    doc["store"] = {"max_keys_per_namespace": 40, "loads_per_namespace": 10, "active": "2m"}
    store = parse_catalog(doc).store
    assert store is not None
    assert (store.max_keys_per_namespace, store.loads_per_namespace, store.active_window_s) == (40, 10, 120.0)
    for bad, words in (
        ({"max_keys_per_namespace": 0}, "store.max_keys_per_namespace"),
        ({"loads_per_namespace": True}, "store.loads_per_namespace"),
        ({"active": "5s"}, "store.active"),
    ):
        doc["store"] = bad
        with pytest.raises(ConfigError, match=words):
            parse_catalog(doc)
