"""The watch machinery of the Kubernetes pod source (``pods/kubernetes.py``): list + watch one collection into
an in-memory store, in a daemon thread.

``Reflector`` lists, then watches from the list's resourceVersion; a clean end of the watch (``timeoutSeconds``)
re-watches from the last resourceVersion seen; a 410 Gone / ``Expired`` answer relists at once; any other error
(broken stream, refused connection, bad JSON, 5xx) is counted, logged, and followed by a jittered exponential
back-off and a relist. ``RecordStore`` holds the records by namespace and name, written by the reflector's
thread and read by the event loop. Only the newline splitting of the watch stream is ours (``_lines``); the API
calls are the official client's.
"""

from __future__ import annotations

import json
import logging
import random
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any, Generic, Protocol, TypeVar

from kubernetes.client.exceptions import ApiException

log = logging.getLogger(__name__)

JSON = dict[str, Any]


class Keyed(Protocol):
    @property
    def namespace(self) -> str: ...

    @property
    def name(self) -> str: ...


T = TypeVar("T", bound=Keyed)


class RecordStore(Generic[T]):
    """Records by namespace, then name; shared by a reflector thread (writer) and the event loop (reader)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_ns: dict[str, dict[str, T]] = {}

    def replace(self, namespace: str | None, records: Iterator[T]) -> None:
        """Swap in a full list: everything (``namespace is None``) or that one namespace."""
        fresh: dict[str, dict[str, T]] = {}
        for rec in records:
            fresh.setdefault(rec.namespace, {})[rec.name] = rec
        with self._lock:
            if namespace is None:
                self._by_ns = fresh
            else:
                self._by_ns[namespace] = fresh.get(namespace, {})

    def put(self, record: T) -> None:
        with self._lock:
            self._by_ns.setdefault(record.namespace, {})[record.name] = record

    def delete(self, namespace: str, name: str) -> None:
        with self._lock:
            self._by_ns.get(namespace, {}).pop(name, None)

    def get(self, namespace: str, name: str) -> T | None:
        with self._lock:
            return self._by_ns.get(namespace, {}).get(name)

    def in_namespace(self, namespace: str) -> list[T]:
        with self._lock:
            return list(self._by_ns.get(namespace, {}).values())


class Expired(Exception):
    """The watch's resourceVersion is gone from the server's history: relist."""


class Reflector(Generic[T]):
    """List + watch one collection into a ``RecordStore`` until ``stop()``; runs in its own thread."""

    def __init__(
        self,
        *,
        resource: str,
        list_call: Callable[..., Any],
        namespace: str | None,
        convert: Callable[[JSON], T],
        store: RecordStore[T],
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
            except Expired as exc:
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

        Raises ``Expired`` on 410, anything else (``ApiException``, urllib3 errors, bad JSON) on failure.
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
                raise Expired(exc.reason) from exc
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
                        raise Expired(obj.get("message"))
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
