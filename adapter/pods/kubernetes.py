"""Pods behind a selector or a Deployment, from a watch-fed in-memory cache of the Kubernetes API.

The official ``kubernetes`` client is synchronous, so each watched collection (pods and apps/v1 Deployments,
cluster-wide or per configured namespace) runs a reflector in a daemon thread: list, then watch from the list's
resourceVersion; a clean end of the watch (``timeoutSeconds``) re-watches from the last resourceVersion seen;
a 410 Gone / ``Expired`` answer relists at once; any other error (broken stream, refused connection, bad
JSON, 5xx) is counted, logged, and followed by a jittered exponential back-off and a relist. Requests are
answered from memory and never wait on the network.

A Deployment's pods are the pods in its namespace that match its ``spec.selector`` (matchLabels and
matchExpressions), which is what the scale subresource's ``status.selector`` gives the HPA; ownerReferences
through ReplicaSets are deliberately not followed, so during a rollout the pods of both ReplicaSets count,
exactly as the HPA counts them.

Why not ``kubernetes.watch.Watch`` or ``kubernetes.informer.SharedInformer``: both turn every object into a
full ``V1Pod`` model (CPU and memory we do not need; we keep five fields per pod), and in client 37
``Watch.stream(deserialize=False)`` fails with ``KeyError: 'raw_object'`` on ERROR events (``watch/watch.py``
reads a key only the deserializing path sets). The API calls, configuration and authentication are the
official client's; only the newline splitting of the stream is ours.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import socket
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import kubernetes.client
import kubernetes.config
from kubernetes.client.exceptions import ApiException

from adapter.errors import NotFound, UpstreamError
from adapter.kubeconfig import api_client
from adapter.labels import EVERYTHING, Operator, Requirement, Selector

log = logging.getLogger(__name__)

_JSON = dict[str, Any]


class _Keyed(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...


_T = TypeVar("_T", bound=_Keyed)


@dataclass(frozen=True, slots=True)
class PodRecord:
    """The little we keep per pod."""

    namespace: str
    name: str
    labels: Mapping[str, str]
    phase: str
    terminating: bool  # metadata.deletionTimestamp is set

    @property
    def live(self) -> bool:
        """Not terminating and not finished (phase Succeeded or Failed)."""
        return not self.terminating and self.phase not in ("Succeeded", "Failed")


@dataclass(frozen=True, slots=True)
class DeploymentRecord:
    """A Deployment's pod selector; ``selector is None`` selects nothing (missing or invalid spec.selector)."""

    namespace: str
    name: str
    selector: Selector | None


_EXPRESSION_OPERATORS: dict[str, Operator] = {
    "In": "in",
    "NotIn": "notin",
    "Exists": "exists",
    "DoesNotExist": "!",
}


def selector_from_label_selector(spec: Mapping[str, Any] | None) -> Selector | None:
    """The ``Selector`` of a metav1.LabelSelector (``{"matchLabels": ..., "matchExpressions": ...}``).

    Follows ``LabelSelectorAsSelector`` (kubernetes/apimachinery ``pkg/apis/meta/v1/helpers.go``): a missing
    selector selects nothing (``None``), an empty one selects everything; ``In``/``NotIn`` need values,
    ``Exists``/``DoesNotExist`` take none. Raises ``ValueError`` for an unknown operator or an invalid
    key/value (the checks of ``Requirement``).
    """
    if spec is None:
        return None
    requirements = [Requirement(k, "=", (v,)) for k, v in (spec.get("matchLabels") or {}).items()]
    for expr in spec.get("matchExpressions") or []:
        key, op = expr.get("key") or "", expr.get("operator")
        if op not in _EXPRESSION_OPERATORS:
            raise ValueError(f"{op!r} is not a valid label selector operator")
        requirements.append(Requirement(key, _EXPRESSION_OPERATORS[op], tuple(expr.get("values") or ())))
    return Selector(tuple(requirements)) if requirements else EVERYTHING


def _pod_record(obj: _JSON) -> PodRecord:
    meta = obj["metadata"]
    return PodRecord(
        namespace=meta["namespace"],
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        phase=(obj.get("status") or {}).get("phase") or "",
        terminating=meta.get("deletionTimestamp") is not None,
    )


def _deployment_record(obj: _JSON) -> DeploymentRecord:
    meta = obj["metadata"]
    spec = (obj.get("spec") or {}).get("selector")
    try:
        selector = selector_from_label_selector(spec)
    except (ValueError, TypeError, AttributeError) as exc:  # malformed: this Deployment selects nothing
        log.warning("deployment %s/%s: unusable spec.selector %r: %s", meta["namespace"], meta["name"], spec, exc)
        selector = None
    return DeploymentRecord(namespace=meta["namespace"], name=meta["name"], selector=selector)


class _Store(Generic[_T]):
    """Records by namespace, then name; shared by a reflector thread (writer) and the event loop (reader)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_ns: dict[str, dict[str, _T]] = {}

    def replace(self, namespace: str | None, records: Iterator[_T]) -> None:
        """Swap in a full list: everything (``namespace is None``) or that one namespace."""
        fresh: dict[str, dict[str, _T]] = {}
        for rec in records:
            fresh.setdefault(rec.namespace, {})[rec.name] = rec
        with self._lock:
            if namespace is None:
                self._by_ns = fresh
            else:
                self._by_ns[namespace] = fresh.get(namespace, {})

    def put(self, record: _T) -> None:
        with self._lock:
            self._by_ns.setdefault(record.namespace, {})[record.name] = record

    def delete(self, namespace: str, name: str) -> None:
        with self._lock:
            self._by_ns.get(namespace, {}).pop(name, None)

    def get(self, namespace: str, name: str) -> _T | None:
        with self._lock:
            return self._by_ns.get(namespace, {}).get(name)

    def in_namespace(self, namespace: str) -> list[_T]:
        with self._lock:
            return list(self._by_ns.get(namespace, {}).values())


class _Expired(Exception):
    """The watch's resourceVersion is gone from the server's history: relist."""


class _Reflector(Generic[_T]):
    """List + watch one collection into a ``_Store`` until ``stop()``; runs in its own thread."""

    def __init__(
        self,
        *,
        resource: str,
        list_call: Callable[..., Any],
        namespace: str | None,
        convert: Callable[[_JSON], _T],
        store: _Store[_T],
        stopping: threading.Event,
        watch_timeout: int,
        request_timeout: float,
        backoff_initial: float,
        backoff_max: float,
    ) -> None:
        self.resource = resource
        self._list_call = list_call
        self._namespace = namespace
        self._convert = convert
        self._store = store
        self._stopping = stopping
        self._watch_timeout = watch_timeout
        self._request_timeout = request_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._synced = threading.Event()
        self._resp_lock = threading.Lock()
        self._resp: Any = None
        self._progressed = False  # the current watch delivered an event: the connection was healthy
        self.failures = 0
        self.thread = threading.Thread(
            target=self._run, name=f"pod-source-{resource}-{namespace or 'all'}", daemon=True
        )

    @property
    def synced(self) -> bool:
        """True after the first successful list."""
        return self._synced.is_set()

    def stop(self) -> None:
        """Unblock a watch that is waiting for the next event (the thread then sees ``stopping``)."""
        with self._resp_lock:
            resp = self._resp
        if resp is None:
            return
        try:
            resp.shutdown()  # urllib3 >= 2.3: made for unblocking a read from another thread
            return
        except (AttributeError, ValueError, RuntimeError, OSError):
            pass
        sock = getattr(getattr(resp, "connection", None), "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _kwargs(self) -> dict[str, Any]:
        return {} if self._namespace is None else {"namespace": self._namespace}

    def _run(self) -> None:
        delay = self._backoff_initial
        while not self._stopping.is_set():
            try:
                rv = self._list()
                while not self._stopping.is_set():
                    rv = self._watch(rv)
                    delay = self._backoff_initial  # a watch that ran its course: the server is fine
            except _Expired as exc:
                if self._stopping.is_set():
                    break
                log.info("%s watch expired (%s); relisting", self.resource, exc)
                # Not a failure, but never a tight loop either: wait the shortest back-off.
                self._stopping.wait(self._backoff_initial)
            except Exception as exc:  # noqa: BLE001 - a guarded background loop: log, count, back off, retry
                if self._stopping.is_set():
                    break
                if self._progressed:
                    # A watch that worked for a while and then broke starts the back-off afresh.
                    delay = self._backoff_initial
                self.failures += 1
                log.warning("%s list/watch failed (%d so far): %s", self.resource, self.failures, _describe(exc))
                self._stopping.wait(delay * random.uniform(0.8, 1.2))
                delay = min(delay * 2, self._backoff_max)

    def _list(self) -> str:
        resp = self._list_call(**self._kwargs(), _preload_content=False, _request_timeout=self._request_timeout)
        try:
            body = json.loads(resp.data)
        finally:
            resp.release_conn()
        self._store.replace(self._namespace, (self._convert(item) for item in body.get("items") or []))
        self._synced.set()
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, rv: str) -> str:
        """One watch request until the server ends it cleanly; returns the last resourceVersion seen.

        Raises ``_Expired`` on 410, anything else (``ApiException``, urllib3 errors, bad JSON) on failure.
        """
        # Jitter spreads the re-watches of many adapters; the read timeout catches a silently dead peer.
        timeout = int(self._watch_timeout * random.uniform(1.0, 2.0))
        try:
            resp = self._list_call(
                **self._kwargs(),
                watch=True,
                resource_version=rv,
                allow_watch_bookmarks=True,
                timeout_seconds=timeout,
                _preload_content=False,
                _request_timeout=(self._request_timeout, timeout + self._request_timeout),
            )
        except ApiException as exc:
            if exc.status == 410:
                raise _Expired(exc.reason) from exc
            raise
        with self._resp_lock:
            self._resp = resp
        self._progressed = False
        try:
            if self._stopping.is_set():
                return rv
            for line in _lines(resp):
                event = json.loads(line)
                kind, obj = event["type"], event["object"]
                if kind == "ERROR":
                    if obj.get("code") == 410:
                        raise _Expired(obj.get("message"))
                    raise ApiException(status=obj.get("code"), reason=f"{obj.get('reason')}: {obj.get('message')}")
                meta = obj["metadata"]
                if kind in ("ADDED", "MODIFIED"):
                    self._store.put(self._convert(obj))
                elif kind == "DELETED":
                    self._store.delete(meta["namespace"], meta["name"])
                elif kind != "BOOKMARK":
                    raise ValueError(f"unknown watch event type {kind!r}")
                rv = str(meta["resourceVersion"])
                self._progressed = True
            return rv  # the server ended the watch (timeoutSeconds): watch again from here
        finally:
            with self._resp_lock:
                self._resp = None
            # Close before releasing: a connection left mid-stream must not go back to the pool for reuse.
            resp.close()
            resp.release_conn()


def _lines(resp: Any) -> Iterator[bytes]:
    """Split a chunked watch body into its JSON lines as the chunks arrive."""
    buffer = b""
    for chunk in resp.stream(amt=None, decode_content=True):
        buffer += chunk
        *complete, buffer = buffer.split(b"\n")
        yield from (line for line in complete if line.strip())
    if buffer.strip():
        yield buffer


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status}: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


class KubernetesPodSource:
    """``PodSource`` over the Kubernetes API: a watch-fed cache of pods and Deployments, answered from memory.

    Configuration, in order: the ``api_client`` given (the caller keeps ownership); in-cluster service-account
    config when ``KUBERNETES_SERVICE_HOST`` is set; else the kubeconfig at ``kubeconfig`` (or the default
    ``$KUBECONFIG`` / ``~/.kube/config``), optionally a named ``context``. ``namespaces`` limits the watches
    (and the answers) to those namespaces; empty means cluster-wide. ``failures`` counts list/watch errors.
    """

    name = "kubernetes"

    def __init__(
        self,
        *,
        api_client: kubernetes.client.ApiClient | None = None,
        kubeconfig: str | None = None,
        context: str | None = None,
        namespaces: Sequence[str] = (),
        watch_timeout_seconds: int = 300,
        request_timeout: float = 30.0,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
    ) -> None:
        self._given_client = api_client
        self._kubeconfig = kubeconfig
        self._context = context
        self._namespaces = tuple(dict.fromkeys(namespaces))
        self._watch_timeout = watch_timeout_seconds
        self._request_timeout = request_timeout
        self._backoff = (backoff_initial, backoff_max)
        self._client: kubernetes.client.ApiClient | None = None
        self._stopping = threading.Event()
        self._reflectors: list[_Reflector[Any]] = []
        self._pods: _Store[PodRecord] = _Store()
        self._deployments: _Store[DeploymentRecord] = _Store()
        self._start_lock = asyncio.Lock()

    @property
    def failures(self) -> int:
        """List/watch failures since start (a 410 Expired is routine and not counted)."""
        return sum(r.failures for r in self._reflectors)

    async def start(self) -> None:
        """Load the configuration (off the event loop: exec credential plugins can be slow) and start one
        reflector thread per watched collection. Idempotent; returns before the first list completes."""
        async with self._start_lock:
            if self._reflectors:
                return
            self._stopping.clear()
            self._client = self._given_client or await asyncio.to_thread(self._load_client)
            core = kubernetes.client.CoreV1Api(self._client)
            apps = kubernetes.client.AppsV1Api(self._client)
            scopes: Sequence[str | None] = self._namespaces or (None,)
            for ns in scopes:
                pods = core.list_pod_for_all_namespaces if ns is None else core.list_namespaced_pod
                deps = apps.list_deployment_for_all_namespaces if ns is None else apps.list_namespaced_deployment
                self._reflectors.append(self._reflector("pods", pods, ns, _pod_record, self._pods))
                self._reflectors.append(self._reflector("deployments", deps, ns, _deployment_record, self._deployments))
            for r in self._reflectors:
                r.thread.start()

    def _reflector(
        self,
        resource: str,
        list_call: Callable[..., Any],
        namespace: str | None,
        convert: Callable[[_JSON], _T],
        store: _Store[_T],
    ) -> _Reflector[_T]:
        return _Reflector(
            resource=resource,
            list_call=list_call,
            namespace=namespace,
            convert=convert,
            store=store,
            stopping=self._stopping,
            watch_timeout=self._watch_timeout,
            request_timeout=self._request_timeout,
            backoff_initial=self._backoff[0],
            backoff_max=self._backoff[1],
        )

    def _load_client(self) -> kubernetes.client.ApiClient:
        return api_client(self._kubeconfig, self._context)  # the one rule: adapter/kubeconfig.py

    async def close(self) -> None:
        """Stop the reflectors, wait for their threads (bounded by the request timeout) and close the client
        if this source created it. The source can be started again afterwards."""
        self._stopping.set()
        for r in self._reflectors:
            r.stop()
        threads = [r.thread for r in self._reflectors]
        deadline = self._request_timeout + 5

        def join() -> None:
            for t in threads:
                t.join(deadline)
                if t.is_alive():
                    log.warning("%s did not stop within %.0fs; left as a daemon thread", t.name, deadline)

        await asyncio.to_thread(join)
        self._reflectors = []
        if self._client is not None and self._client is not self._given_client:
            await asyncio.to_thread(self._client.close)
        self._client = None

    def ready(self) -> bool:
        """True once every watched collection has been listed (stays true while the watches reconnect)."""
        return bool(self._reflectors) and all(r.synced for r in self._reflectors)

    def _check(self, namespace: str) -> None:
        if not self.ready():
            raise UpstreamError("pod cache not synced yet")
        if self._namespaces and namespace not in self._namespaces:
            raise UpstreamError(
                f"namespace {namespace!r} is not watched by this adapter (watching: {', '.join(self._namespaces)})"
            )

    async def pods_for_selector(self, namespace: str, selector: Selector) -> list[str]:
        """Sorted names of the live pods in ``namespace`` matching ``selector``; ``UpstreamError`` before the
        first list or for a namespace outside ``namespaces``."""
        self._check(namespace)
        return _live_matching(self._pods.in_namespace(namespace), selector)

    async def pods_for_deployment(self, namespace: str, name: str) -> list[str]:
        """Sorted names of the live pods in ``namespace`` matching Deployment ``name``'s ``spec.selector``;
        ``NotFound`` (``deployments.apps "NAME" not found``) if there is no such Deployment."""
        self._check(namespace)
        deployment = self._deployments.get(namespace, name)
        if deployment is None:
            raise NotFound(f'deployments.apps "{name}" not found')
        if deployment.selector is None:
            return []
        return _live_matching(self._pods.in_namespace(namespace), deployment.selector)


def _live_matching(pods: Sequence[PodRecord], selector: Selector) -> list[str]:
    everything = selector.is_everything()
    return sorted(p.name for p in pods if p.live and (everything or selector.matches(p.labels)))
