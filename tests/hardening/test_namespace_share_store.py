"""Issue 26 row 1: one namespace cannot take the value store's keys, nor the backend queries they cost.

Against a real Prometheus and the real adapter (kube-state-metrics pod source). An attacker reading only
its own namespace registers a store key per distinct ``metricLabelSelector`` (``engine notin (xN)``: it
matches every series, so each answer is real). The victim's HPA polls its own pods throughout and must get
its own, current values; its new keys must still be stored (not a direct query per poll), and once the
attacker goes silent its keys must stop costing refreshes.

The store's monotonic clock is replaced by one the test advances (``Store.monotonic``), so which key is
due, active or expired is decided by the test, never by how fast the machine is; the waits below only
wait for the store's own loop to act on a clock the test has already moved.
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from typing import Any
from urllib.parse import quote

import httpx
import yaml

from adapter.catalog import parse_catalog
from adapter.labels import EVERYTHING, parse_selector
from adapter.quantity import parse_quantity
from adapter.settings import Settings
from adapter.store import Store
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import Series, TestBackend

METRIC = "inference_queue_depth"  # sum of vllm:num_requests_waiting per pod
PODS = ("web-5d8f7b9c6-aaaa1", "web-5d8f7b9c6-aaaa2")


def load(backend: TestBackend, ns: str, waiting: float, end: float | None = None) -> dict[str, float]:
    """Two pods of app=web in ``ns`` waiting ``waiting`` and ``waiting + 1`` requests, over the last 2 minutes
    up to ``end``; returns the values the adapter must serve."""
    end = float(int(time.time())) if end is None else end
    ts = [end - 120 + 15 * i for i in range(9)]
    series = []
    want = {}
    for i, pod in enumerate(PODS):
        want[pod] = waiting + i
        series += [
            Series(
                {"__name__": "vllm:num_requests_waiting", "namespace": ns, "pod": pod}, [(t, want[pod]) for t in ts]
            ),
            Series(
                {"__name__": "kube_pod_labels", "namespace": ns, "pod": pod, "label_app": "web"}, [(t, 1.0) for t in ts]
            ),
        ]
    backend.load(series)
    return want


def catalog(**store: Any) -> Any:
    doc = yaml.safe_load(resources.files("adapter").joinpath("catalog.yaml").read_text(encoding="utf-8"))
    doc = copy.deepcopy(doc)
    doc["store"] = store
    doc["cache_ttl_seconds"] = 0  # every refresh asks the backend (the test's clock moves faster than the wall)
    return parse_catalog(doc)


def url_for(ns: str, metric_selector: str = "") -> str:
    url = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/pods/%2A/{METRIC}?labelSelector=app%3Dweb"
    return url + (f"&metricLabelSelector={quote(metric_selector)}" if metric_selector else "")


def served(r: httpx.Response) -> dict[str, float]:
    assert r.status_code == 200, r.text
    return {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}


@contextmanager
def adapter_with_clock(backend: TestBackend, cat: Any) -> Iterator[tuple[str, Store[Any, Any], list[float]]]:
    """The running adapter, its value store, and the store's monotonic clock (a one-element list to advance)."""
    settings = Settings(prometheus_url=backend.url, pod_source="prometheus", catalog=cat, query_timeout_s=5.0)
    with running_adapter(settings) as url:
        store = APPS[url].state.provider.values.store
        now = [1_000_000.0]
        store.monotonic = lambda: now[0]
        yield url, store, now


def settle(store: Store[Any, Any], timeout: float = 30.0) -> None:
    """Until the store's loop has started every refresh due at its (frozen) clock and all of them are done."""
    deadline = time.monotonic() + timeout
    while any((k.active and k.due_s <= 0) or k.loading for k in store.keys()):
        assert time.monotonic() < deadline, [k for k in store.keys() if (k.active and k.due_s <= 0) or k.loading]
        time.sleep(0.05)


def metric_lines(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"llm_hpa_adapter_{name}{{")]


def counter(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^llm_hpa_adapter_{name}\{{{re.escape(want)}\}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def test_one_namespace_cannot_take_the_store_keys_of_another(prometheus: TestBackend, unique_ns: str) -> None:
    victim, attacker = f"{unique_ns}-victim", f"{unique_ns}-attacker"
    want = load(prometheus, victim, 3.0)
    load(prometheus, attacker, 50.0)
    # Only the global cap is set (a key today's adapter knows): 30 keys, and more selectors than that.
    with adapter_with_clock(prometheus, catalog(max_keys=30)) as (url, store, now), httpx.Client(timeout=30) as client:
        victim_polls: list[dict[str, float]] = []

        def poll_victim() -> None:
            victim_polls.append(served(client.get(url + url_for(victim))))
            assert victim_polls[-1] == want

        poll_victim()
        for i in range(45):  # one request per selector, the victim polling in between
            assert served(client.get(url + url_for(attacker, f"engine notin (x{i})"))) == {PODS[0]: 50.0, PODS[1]: 51.0}
            if i % 5 == 0:
                poll_victim()
        # The victim's HPA gains a metric selector: a new key, which must be stored like any other.
        second = "engine notin (victim-selector)"
        assert served(client.get(url + url_for(victim, second))) == want
        assert store.has((victim, METRIC, EVERYTHING)) and store.has((victim, METRIC, parse_selector(second)))
        keys = store.namespace_keys()
        assert len(store) <= 30 and keys[victim] == 2 and keys[attacker] <= 28
        poll_victim()

        # The attacker goes silent. Past the active window (4 x 15 s) its keys are never refreshed again,
        # while the victim, polling every 15 s, is refreshed and keeps getting its own values.
        refreshes_before = store.loads.get("refresh", attacker)
        for step in range(12):  # 3 minutes in 15 s polls
            now[0] += 15.0
            settle(store)
            poll_victim()
            if step == 5:  # the victim's load changes: the next refresh must bring it
                want = load(prometheus, victim, 7.0)
        assert victim_polls[-1] == {PODS[0]: 7.0, PODS[1]: 8.0}
        attacker_refreshes = store.loads.get("refresh", attacker) - refreshes_before
        assert attacker_refreshes <= 28 * 4  # at most the active window's worth (today: one per key every 15 s)
        silent = [k for k in store.keys() if k.key[0] == attacker]
        assert silent and all(not k.active and k.age_s is not None and k.age_s >= 15.0 * 12 - 60 - 15 for k in silent)
        # And the victim's own refreshes were the only ones in the last two minutes of silence.
        later_before = store.loads.get("refresh", attacker)
        for _ in range(4):
            now[0] += 15.0
            settle(store)
            poll_victim()
        assert store.loads.get("refresh", attacker) == later_before
        assert store.loads.get("refresh", victim) > 0
        text = client.get(url + "/metrics").text
        assert counter(text, "store_namespace_loads_total", namespace=attacker, kind="refresh") == later_before
        assert counter(text, "store_namespace_keys", namespace=attacker) == store.namespace_keys()[attacker]
        assert counter(text, "store_namespace_keys", namespace=victim) == 2


def test_a_namespace_past_its_share_is_served_directly_then_refused(prometheus: TestBackend, unique_ns: str) -> None:
    victim, attacker = f"{unique_ns}-victim", f"{unique_ns}-attacker"
    want = load(prometheus, victim, 4.0)
    load(prometheus, attacker, 60.0)
    cat = catalog(max_keys_per_namespace=5, loads_per_namespace=8)
    with adapter_with_clock(prometheus, cat) as (url, store, now), httpx.Client(timeout=30) as client:
        assert served(client.get(url + url_for(victim))) == want
        codes = []
        for i in range(12):
            r = client.get(url + url_for(attacker, f"engine notin (x{i})"))
            codes.append(r.status_code)
            assert served(client.get(url + url_for(victim))) == want  # the victim, from memory, throughout
        # Five keys stored, three more answered by a direct query (its loads: 8 per interval), then 429.
        assert codes == [200] * 8 + [429] * 4
        assert store.namespace_keys()[attacker] == 5 and store.counters.overflow == 3
        refused = client.get(url + url_for(attacker, "engine notin (y)"))
        status = refused.json()
        assert status["kind"] == "Status" and status["code"] == 429 and status["reason"] == "TooManyRequests"
        assert "store.loads_per_namespace" in status["message"] and status["details"]["retryAfterSeconds"] >= 1
        assert refused.headers["retry-after"] == str(status["details"]["retryAfterSeconds"])
        # Its stored keys keep serving from memory, and the victim can still add keys of its own.
        assert client.get(url + url_for(attacker, "engine notin (x0)")).status_code == 200
        assert served(client.get(url + url_for(victim, "engine notin (v1)"))) == want
        text = client.get(url + "/metrics").text
        assert counter(text, "namespace_share_exceeded_total", budget="store_keys", namespace=attacker) >= 3
        assert counter(text, "namespace_share_exceeded_total", budget="store_loads", namespace=attacker) == 5
        assert counter(text, "namespace_share_exceeded_total", budget="store_loads", namespace=victim) == 0
        assert counter(text, "store_events_total", event="refused") == 5
        # The next interval gives it loads again; once its keys are inactive a new one takes the place of one.
        now[0] += 61.0
        settle(store)
        assert served(client.get(url + url_for(victim))) == want
        assert client.get(url + url_for(attacker, "engine notin (z)")).status_code == 200
        assert store.has((attacker, METRIC, parse_selector("engine notin (z)")))
        assert store.namespace_keys()[attacker] == 5 and store.counters.evicted >= 1
