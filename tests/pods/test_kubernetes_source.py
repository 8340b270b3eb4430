"""KubernetesPodSource against the fake apiserver, through the real ``kubernetes`` client.

Waits are bounded polls (``settle``) for state the watch delivers asynchronously; nothing asserts on time.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar, cast

import kubernetes.client
import kubernetes.watch
import pytest
from kubernetes.client.exceptions import ApiException

from adapter.errors import NotFound, UpstreamError
from adapter.labels import EVERYTHING, parse_selector
from adapter.pods.kubernetes import KubernetesPodSource, selector_from_label_selector
from tests.support.fake_kube import FakeKube

T = TypeVar("T")
_WAIT_SECONDS = 15.0
NONE: list[str] = []
# The client's watch helper and ApiClient.close carry no annotations.
Watch: Any = kubernetes.watch.Watch


def run(coro: Coroutine[Any, Any, None]) -> None:
    asyncio.run(coro)


async def settle(fn: Callable[[], Awaitable[T]], expected: T) -> T:
    """Poll ``fn`` until it returns ``expected`` or the bound runs out; returns the last value."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + _WAIT_SECONDS
    value = await fn()
    while value != expected and loop.time() < deadline:
        await asyncio.sleep(0.02)
        value = await fn()
    return value


async def value_of(fn: Callable[[], T]) -> T:
    return fn()


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    with FakeKube() as server:
        yield server


@pytest.fixture
def api_client(fake: FakeKube) -> Iterator[kubernetes.client.ApiClient]:
    client = fake.api_client()
    yield client
    cast(Any, client).close()


def make_source(api_client: kubernetes.client.ApiClient, **kwargs: Any) -> KubernetesPodSource:
    # Short back-off so recovery after an injected failure happens within the wait bound.
    return KubernetesPodSource(api_client=api_client, backoff_initial=0.02, backoff_max=0.2, **kwargs)


async def started(source: KubernetesPodSource) -> KubernetesPodSource:
    await source.start()
    assert await settle(lambda: value_of(source.ready), True) is True
    return source


def reflector_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("pod-source-")]


# ------------------------------------------------------------------------------------------------ listing


def test_initial_list_is_served_from_memory(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    fake.put_pod("llm", "vllm-b", {"app": "vllm"})
    fake.put_pod("llm", "vllm-a", {"app": "vllm"})
    fake.put_pod("llm", "redis-0", {"app": "redis"})
    fake.put_pod("other", "vllm-x", {"app": "vllm"})

    async def body() -> None:
        source = await started(make_source(api_client))
        try:
            assert await source.pods_for_selector("llm", parse_selector("app=vllm")) == ["vllm-a", "vllm-b"]
            assert await source.pods_for_selector("llm", EVERYTHING) == ["redis-0", "vllm-a", "vllm-b"]
            assert await source.pods_for_selector("empty", EVERYTHING) == []
            lists = fake.count_requests("/api/v1/pods", watch=False)
            # Answers come from the cache: asking again makes no request.
            await source.pods_for_selector("llm", EVERYTHING)
            assert fake.count_requests("/api/v1/pods", watch=False) == lists
        finally:
            await source.close()

    run(body())


def test_not_ready_before_the_first_list(api_client: kubernetes.client.ApiClient) -> None:
    async def body() -> None:
        source = make_source(api_client)
        assert source.ready() is False
        with pytest.raises(UpstreamError, match="pod cache not synced yet"):
            await source.pods_for_selector("llm", EVERYTHING)
        with pytest.raises(UpstreamError, match="pod cache not synced yet"):
            await source.pods_for_deployment("llm", "vllm")

    run(body())


def test_unreachable_apiserver_stays_not_ready_and_counts_failures() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The port is closed again: connections are refused.
    configuration = kubernetes.client.Configuration()
    configuration.host = f"http://127.0.0.1:{port}"
    client = kubernetes.client.ApiClient(configuration)

    async def body() -> None:
        source = make_source(client)
        await source.start()
        try:
            assert await settle(lambda: value_of(lambda: source.failures >= 3), True) is True
            assert source.ready() is False
            with pytest.raises(UpstreamError, match="not synced"):
                await source.pods_for_selector("llm", EVERYTHING)
        finally:
            await source.close()
            cast(Any, client).close()

    run(body())


# ------------------------------------------------------------------------------------------------ watching


def test_watch_delivers_adds_updates_and_deletes(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"})
    sel = parse_selector("app=vllm")

    async def body() -> None:
        source = await started(make_source(api_client))
        try:

            async def names() -> list[str]:
                return await source.pods_for_selector("llm", sel)

            assert await names() == ["a"]
            fake.put_pod("llm", "b", {"app": "vllm"})
            assert await settle(names, ["a", "b"]) == ["a", "b"]
            fake.put_pod("llm", "a", {"app": "other"})  # relabelled: no longer selected
            assert await settle(names, ["b"]) == ["b"]
            fake.put_pod("llm", "a", {"app": "vllm"})
            assert await settle(names, ["a", "b"]) == ["a", "b"]
            fake.delete_pod("llm", "b")
            assert await settle(names, ["a"]) == ["a"]
            assert source.failures == 0
            # All of it came through one watch, after one list.
            assert fake.count_requests("/api/v1/pods", watch=False) == 1
        finally:
            await source.close()

    run(body())


def test_set_based_selectors(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    fake.put_pod("llm", "p-a", {"app": "vllm", "tier": "a", "gpu": "h100"})
    fake.put_pod("llm", "p-b", {"app": "vllm", "tier": "b"})
    fake.put_pod("llm", "p-c", {"app": "vllm", "tier": "c", "canary": "true"})
    fake.put_pod("llm", "p-none", {"app": "vllm"})

    async def body() -> None:
        source = await started(make_source(api_client))
        try:

            async def pick(text: str) -> list[str]:
                return await source.pods_for_selector("llm", parse_selector(text))

            assert await pick("tier in (a,b)") == ["p-a", "p-b"]
            assert await pick("tier notin (a,b)") == ["p-c", "p-none"]  # notin matches a missing key
            assert await pick("gpu") == ["p-a"]
            assert await pick("!canary") == ["p-a", "p-b", "p-none"]
            assert await pick("app=vllm,tier!=c") == ["p-a", "p-b", "p-none"]
            assert await pick("app=vllm,tier in (c),canary=true") == ["p-c"]
            assert await pick("app=redis") == []
        finally:
            await source.close()

    run(body())


def test_terminating_and_finished_pods_are_left_out(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    labels = {"app": "vllm"}
    fake.put_pod("llm", "running", labels)
    fake.put_pod("llm", "pending", labels, phase="Pending")
    fake.put_pod("llm", "succeeded", labels, phase="Succeeded")
    fake.put_pod("llm", "failed", labels, phase="Failed")
    fake.put_pod("llm", "terminating", labels, terminating=True)
    fake.put_deployment("llm", "vllm", labels)

    async def body() -> None:
        source = await started(make_source(api_client))
        try:

            async def names() -> list[str]:
                return await source.pods_for_selector("llm", parse_selector("app=vllm"))

            assert await names() == ["pending", "running"]
            assert await source.pods_for_deployment("llm", "vllm") == ["pending", "running"]
            # Graceful deletion arrives as a MODIFIED event setting deletionTimestamp.
            fake.put_pod("llm", "running", labels, terminating=True)
            assert await settle(names, ["pending"]) == ["pending"]
            fake.put_pod("llm", "pending", labels, phase="Failed")
            assert await settle(names, NONE) == []
        finally:
            await source.close()

    run(body())


# ------------------------------------------------------------------------------------------------ deployments


def test_deployment_pods_follow_its_selector(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    fake.put_deployment(
        "llm",
        "vllm",
        {"app": "vllm"},
        [
            {"key": "tier", "operator": "In", "values": ["gpu", "gpu-spot"]},
            {"key": "track", "operator": "NotIn", "values": ["canary"]},
            {"key": "model", "operator": "Exists"},
            {"key": "debug", "operator": "DoesNotExist"},
        ],
    )
    fake.put_pod("llm", "ok-1", {"app": "vllm", "tier": "gpu", "model": "llama"})
    fake.put_pod("llm", "ok-2", {"app": "vllm", "tier": "gpu-spot", "model": "llama", "track": "stable"})
    fake.put_pod("llm", "canary", {"app": "vllm", "tier": "gpu", "model": "llama", "track": "canary"})
    fake.put_pod("llm", "cpu", {"app": "vllm", "tier": "cpu", "model": "llama"})
    fake.put_pod("llm", "no-model", {"app": "vllm", "tier": "gpu"})
    fake.put_pod("llm", "debug", {"app": "vllm", "tier": "gpu", "model": "llama", "debug": "1"})
    fake.put_pod("other", "elsewhere", {"app": "vllm", "tier": "gpu", "model": "llama"})

    async def body() -> None:
        source = await started(make_source(api_client))
        try:

            async def names() -> list[str]:
                return await source.pods_for_deployment("llm", "vllm")

            assert await names() == ["ok-1", "ok-2"]
            # A new matching pod (e.g. a scale-up) is picked up through the pod watch.
            fake.put_pod("llm", "ok-3", {"app": "vllm", "tier": "gpu", "model": "qwen"})
            assert await settle(names, ["ok-1", "ok-2", "ok-3"]) == ["ok-1", "ok-2", "ok-3"]
            # A changed spec.selector is picked up through the Deployment watch.
            fake.put_deployment("llm", "vllm", {"app": "vllm", "tier": "gpu-spot"})
            assert await settle(names, ["ok-2"]) == ["ok-2"]
        finally:
            await source.close()

    run(body())


def test_unknown_deployment_is_not_found(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    fake.put_deployment("llm", "vllm", {"app": "vllm"})

    async def body() -> None:
        source = await started(make_source(api_client))
        try:
            with pytest.raises(NotFound) as err:
                await source.pods_for_deployment("llm", "missing")
            assert err.value.message == 'deployments.apps "missing" not found'
            # Same name, other namespace: not found either.
            with pytest.raises(NotFound):
                await source.pods_for_deployment("other", "vllm")
            fake.delete_deployment("llm", "vllm")

            async def still_there() -> bool:
                try:
                    await source.pods_for_deployment("llm", "vllm")
                except NotFound:
                    return False
                return True

            assert await settle(still_there, False) is False
        finally:
            await source.close()

    run(body())


def test_deployment_with_unusable_selector_selects_nothing(
    fake: FakeKube, api_client: kubernetes.client.ApiClient
) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"})
    fake.put_deployment("llm", "broken", {"app": "vllm"}, [{"key": "tier", "operator": "Near", "values": ["x"]}])

    async def body() -> None:
        source = await started(make_source(api_client))
        try:
            assert await source.pods_for_deployment("llm", "broken") == []
            assert source.failures == 0  # one bad object does not break the watch
        finally:
            await source.close()

    run(body())


def test_selector_from_label_selector() -> None:
    assert selector_from_label_selector(None) is None
    assert selector_from_label_selector({}) == EVERYTHING
    sel = selector_from_label_selector(
        {
            "matchLabels": {"app": "vllm"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}],
        }
    )
    assert sel is not None
    assert sel.matches({"app": "vllm", "tier": "a"})
    assert not sel.matches({"app": "vllm", "tier": "b"})
    assert sel == parse_selector("app=vllm,tier in (a)")
    with pytest.raises(ValueError):
        selector_from_label_selector({"matchExpressions": [{"key": "a", "operator": "Near", "values": ["x"]}]})
    with pytest.raises(ValueError):
        selector_from_label_selector({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    with pytest.raises(ValueError):
        selector_from_label_selector({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]})


# ------------------------------------------------------------------------------------------------ recovery


def test_expired_watch_relists_and_drops_what_it_missed(
    fake: FakeKube, api_client: kubernetes.client.ApiClient
) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"})
    fake.put_pod("llm", "b", {"app": "vllm"})

    async def body() -> None:
        source = await started(make_source(api_client))
        try:

            async def names() -> list[str]:
                return await source.pods_for_selector("llm", EVERYTHING)

            assert await names() == ["a", "b"]
            lists_before = fake.count_requests("/api/v1/pods", watch=False)
            # The watch lags; meanwhile "a" goes and "c" comes, then history is compacted: those events are
            # never delivered, the watch gets 410 Expired, and only a relist can bring the cache up to date.
            with fake.paused():
                fake.delete_pod("llm", "a")
                fake.put_pod("llm", "c", {"app": "vllm"})
                fake.expire_history()
            assert await settle(names, ["b", "c"]) == ["b", "c"]
            assert fake.count_requests("/api/v1/pods", watch=False) > lists_before
            assert source.failures == 0  # 410 is routine, not a failure
            # And the new watch works.
            fake.put_pod("llm", "d", {"app": "vllm"})
            assert await settle(names, ["b", "c", "d"]) == ["b", "c", "d"]
        finally:
            await source.close()

    run(body())


def test_dropped_connection_recovers(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"})
    fake.put_deployment("llm", "vllm", {"app": "vllm"})

    async def body() -> None:
        source = await started(make_source(api_client))
        try:

            async def names() -> list[str]:
                return await source.pods_for_deployment("llm", "vllm")

            assert await settle(lambda: value_of(fake.open_watches), 2) == 2
            with fake.paused():
                fake.delete_pod("llm", "a")  # happens while the connection is being cut
                fake.drop_watches()
            fake.put_pod("llm", "b", {"app": "vllm"})
            assert await settle(names, ["b"]) == ["b"]
            assert source.failures >= 1  # a broken stream is a failure, counted
            assert source.ready() is True
        finally:
            await source.close()

    run(body())


def test_clean_watch_end_resumes_from_last_resource_version(
    fake: FakeKube, api_client: kubernetes.client.ApiClient
) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"})

    async def body() -> None:
        # timeoutSeconds of 1: the server ends each watch cleanly after a second.
        source = await started(make_source(api_client, watch_timeout_seconds=1))
        try:
            assert await settle(lambda: value_of(lambda: fake.count_requests("/api/v1/pods", watch=True) >= 3), True)
            fake.put_pod("llm", "b", {"app": "vllm"})
            assert await settle(lambda: source.pods_for_selector("llm", EVERYTHING), ["a", "b"]) == ["a", "b"]
            assert fake.count_requests("/api/v1/pods", watch=False) == 1  # re-watched, never relisted
            assert source.failures == 0
            watches = [r for r in fake.requests if r.path == "/api/v1/pods" and r.query.get("watch")]
            assert all(r.query["resourceVersion"] != "0" for r in watches)
        finally:
            await source.close()

    run(body())


def test_close_stops_the_threads(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    async def body() -> None:
        source = await started(make_source(api_client))
        assert len(reflector_threads()) == 2
        assert await settle(lambda: value_of(fake.open_watches), 2) == 2
        await source.close()
        assert reflector_threads() == []
        assert await settle(lambda: value_of(fake.open_watches), 0) == 0
        assert source.ready() is False
        # And it can start again.
        await started(source)
        assert len(reflector_threads()) == 2
        await source.close()
        assert reflector_threads() == []

    run(body())


# ------------------------------------------------------------------------------------------------ configuration


def test_namespaced_watches(fake: FakeKube, api_client: kubernetes.client.ApiClient) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"})
    fake.put_pod("other", "x", {"app": "vllm"})
    fake.put_deployment("llm", "vllm", {"app": "vllm"})

    async def body() -> None:
        source = await started(make_source(api_client, namespaces=["llm"]))
        try:
            assert await source.pods_for_deployment("llm", "vllm") == ["a"]
            fake.put_pod("llm", "b", {"app": "vllm"})
            fake.put_pod("other", "y", {"app": "vllm"})
            assert await settle(lambda: source.pods_for_selector("llm", EVERYTHING), ["a", "b"]) == ["a", "b"]
            with pytest.raises(UpstreamError, match="not watched"):
                await source.pods_for_selector("other", EVERYTHING)
            assert fake.count_requests("/api/v1/namespaces/llm/pods", watch=False) == 1
            assert fake.count_requests("/apis/apps/v1/namespaces/llm/deployments", watch=False) == 1
            assert fake.count_requests("/api/v1/pods", watch=False) == 0
        finally:
            await source.close()

    run(body())


def test_kubeconfig_configuration(fake: FakeKube, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    kubeconfig = fake.write_kubeconfig(tmp_path / "config")
    fake.put_pod("llm", "a", {"app": "vllm"})

    async def body() -> None:
        source = await started(KubernetesPodSource(kubeconfig=str(kubeconfig), backoff_initial=0.02))
        try:
            assert await source.pods_for_selector("llm", EVERYTHING) == ["a"]
            assert fake.requests[0].headers.get("authorization") == "Bearer fake-token"
        finally:
            await source.close()

    run(body())


# ------------------------------------------------------------------------------------------------ the fake itself


def test_fake_answers_a_too_old_watch_with_410_as_the_official_client_expects(
    fake: FakeKube, api_client: kubernetes.client.ApiClient
) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"})
    fake.put_pod("llm", "b", {"app": "vllm"})
    fake.expire_history()
    core = kubernetes.client.CoreV1Api(api_client)
    watch = Watch()
    # timeout_seconds disables the client's own single retry, so the 410 surfaces.
    with pytest.raises(ApiException) as err:
        for _ in watch.stream(core.list_pod_for_all_namespaces, resource_version="1", timeout_seconds=5):
            pass
    assert err.value.status == 410
    assert "too old resource version" in str(err.value.reason)
    # A list still works and says where to watch from; a watch from there is accepted.
    listing = core.list_pod_for_all_namespaces()
    assert sorted(p.metadata.name for p in listing.items if p.metadata and p.metadata.name) == ["a", "b"]
    assert listing.metadata is not None
    events = list(
        watch.stream(
            core.list_pod_for_all_namespaces,
            resource_version=listing.metadata.resource_version,
            timeout_seconds=1,
        )
    )
    assert events == []


def test_fake_watch_without_resource_version_starts_with_the_current_state(
    fake: FakeKube, api_client: kubernetes.client.ApiClient
) -> None:
    fake.put_pod("llm", "a", {"app": "vllm"}, phase="Pending")
    core = kubernetes.client.CoreV1Api(api_client)
    events = list(Watch().stream(core.list_pod_for_all_namespaces, timeout_seconds=1))
    assert [(e["type"], e["object"].metadata.name, e["object"].status.phase) for e in events] == [
        ("ADDED", "a", "Pending")
    ]
    assert events[0]["raw_object"]["kind"] == "Pod"
