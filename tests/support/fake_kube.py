"""A small fake of the few kube-apiserver endpoints the adapter calls, for tests.

No kube-apiserver (nor kwok, k3s, a controller-manager) can run on this machine, so the tests talk to this
instead, through the real ``kubernetes`` Python client. It serves, on 127.0.0.1 and a free port:

* ``GET /api/v1/pods`` and ``GET /api/v1/namespaces/{ns}/pods``: a ``PodList``, or with ``watch=1|true`` a
  watch stream;
* ``GET /apis/apps/v1/deployments`` and ``GET /apis/apps/v1/namespaces/{ns}/deployments``: the same for
  Deployments;
* any resource a test adds (``add_resource``: Services, a CRD's plural), listed the same way, and API discovery
  (``GET /apis``, ``GET /apis/{group}/{version}``, ``fake_kube_discovery.py``) of every group it serves;
* ``labelSelector`` on lists (``fake_kube_discovery.selector_matches``).

What it imitates, and where the behaviour comes from:

* one cluster-wide resourceVersion counter (etcd's revision), a string on the wire;
* a list answers the current state with ``metadata.resourceVersion``; its items carry no ``kind`` /
  ``apiVersion`` (the apiserver leaves them out of list items), watch event objects do;
* a watch streams newline-delimited ``{"type", "object"}`` JSON over chunked transfer encoding (HTTP/1.1),
  starting after ``resourceVersion``; with no resourceVersion (or ``"0"``) it first sends a synthetic
  ``ADDED`` per existing object; ``timeoutSeconds`` ends the stream cleanly;
* a watch from a resourceVersion older than the retained history gets one ``ERROR`` event whose object is a
  ``Status`` with ``code: 410, reason: Expired`` and message ``too old resource version: N (M)``, the
  watch cache's answer (kubernetes/apiserver ``pkg/storage/cacher/watch_cache.go``,
  ``errors.NewResourceExpired``), and the stream ends.

Not imitated: field selectors, label selectors on watches, ``limit``/``continue`` paging (a server may ignore
``limit``), bookmarks, authentication. Routes live in one table (``add_route``); a new endpoint is a method
plus one line.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import select
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

from tests.support.fake_kube_discovery import group_list, resource_list, selector_matches

JSON = dict[str, Any]

# Wakes blocked watch streams now and then, so they notice a shutdown even if a notify is missed.
_WATCH_POLL_SECONDS = 0.5


@dataclass
class FakeRequest:
    """One request as a route sees it: path parameters from the route pattern, query, lower-cased headers."""

    method: str
    path: str
    params: dict[str, str]
    query: dict[str, str]
    headers: Mapping[str, str]
    body: bytes


@dataclass(frozen=True)
class _Event:
    rv: int
    type: str
    resource: str
    namespace: str
    obj: JSON


@dataclass(eq=False)  # identity: kept in a set
class _Watch:
    """An open watch stream, so tests can drop it or expire it."""

    sock: socket.socket
    dropped: bool = False


Route = Callable[[FakeRequest, "FakeHandler"], None]


@dataclass
class _Kind:
    """What the fake knows about one resource type."""

    kind: str
    api_version: str
    objects: dict[tuple[str, str], JSON] = field(default_factory=dict)
    singular: str = ""


class FakeKube:
    """The fake apiserver. Use as a context manager, or call ``start()`` / ``close()``.

    Test helpers (``put_pod``, ``delete_pod``, ``put_deployment``, ``delete_deployment``) change the state and
    push the events to open watches; ``expire_history()`` forces 410 on every watch; ``drop_watches()``
    cuts the watch connections mid-stream; ``paused()`` holds events back from watches while it is entered.
    ``requests`` logs every request served (as ``FakeRequest``, headers included).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._rv = itertools.count(1)
        self._current_rv = 0
        self._kinds: dict[str, _Kind] = {
            "pods": _Kind("Pod", "v1"),
            "deployments": _Kind("Deployment", "apps/v1"),
        }
        self._history: list[_Event] = []
        # Events at or below this revision are compacted away; a watch from before it gets 410.
        self._compacted_rv = 0
        # Bumped by expire_history(): a watch opened under an older epoch ends with 410.
        self._epoch = 0
        self._paused = False
        self._closing = False
        self._watches: set[_Watch] = set()
        self._routes: list[tuple[str, re.Pattern[str], Route]] = []
        self.requests: list[FakeRequest] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._install_routes()

    # ---------------------------------------------------------------- routes

    def add_route(self, method: str, pattern: str, route: Route) -> None:
        """Serve ``method`` on paths fully matching regex ``pattern``; named groups become ``params``."""
        self._routes.append((method, re.compile(pattern), route))

    def _install_routes(self) -> None:
        ns = r"(?:/namespaces/(?P<namespace>[a-z0-9-]+))?"
        self.add_route("GET", rf"/api/v1{ns}/pods", self._collection("pods"))
        self.add_route("GET", rf"/apis/apps/v1{ns}/deployments", self._collection("deployments"))
        self.add_route("GET", r"/apis", self._groups)
        self.add_route("GET", r"/apis/(?P<group>[a-z0-9.-]+)/(?P<version>[a-z0-9]+)", self._resources)

    def add_resource(self, plural: str, kind: str, api_version: str, *, singular: str = "") -> None:
        """Serve another namespaced resource (``services``, ``v1``; ``inferenceservices``,
        ``serving.kserve.io/v1beta1``): its lists, and its group in discovery."""
        self._kinds[plural] = _Kind(kind, api_version, singular=singular or kind.lower())
        root = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
        ns = r"(?:/namespaces/(?P<namespace>[a-z0-9-]+))?"
        self.add_route("GET", rf"{re.escape(root)}{ns}/{plural}", self._collection(plural))

    def forbid(self, pattern: str) -> None:
        """Answer GETs of paths fully matching ``pattern`` with 403 Forbidden, as RBAC does (checked first)."""

        def route(req: FakeRequest, out: FakeHandler) -> None:
            out.send_json(403, _status(403, "Forbidden", f"cannot list resource at {req.path}"))

        self._routes.insert(0, ("GET", re.compile(pattern), route))

    def put_object(self, plural: str, namespace: str, name: str, labels: Mapping[str, str] | None = None) -> JSON:
        """Create or replace an object of a resource ``add_resource`` added."""
        return self._put(plural, namespace, name, {"metadata": {"name": name, "namespace": namespace,
                                                                 "labels": dict(labels or {})}})  # fmt: skip

    def _groups(self, req: FakeRequest, out: FakeHandler) -> None:
        out.send_json(200, group_list(k.api_version for k in self._kinds.values()))

    def _resources(self, req: FakeRequest, out: FakeHandler) -> None:
        gv = f"{req.params['group']}/{req.params['version']}"
        served = [
            (p, k.singular or k.kind.lower(), k.kind, True) for p, k in self._kinds.items() if k.api_version == gv
        ]
        if not served:
            out.send_json(404, _status(404, "NotFound", "the server could not find the requested resource"))
            return
        out.send_json(200, resource_list(gv, served))

    def _collection(self, resource: str) -> Route:
        def route(req: FakeRequest, out: FakeHandler) -> None:
            if _is_watch(req.query):
                self._serve_watch(resource, req, out)
            else:
                self._serve_list(resource, req, out)

        return route

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> Self:
        """Bind 127.0.0.1 on a free port and serve in a background thread."""
        handler = type("Handler", (FakeHandler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-kube", daemon=True
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """End every watch, stop serving and release the port."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self.drop_watches()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        assert self._server is not None, "start() first"
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def api_client(self) -> Any:
        """A real ``kubernetes.client.ApiClient`` pointed at this fake (no auth)."""
        import kubernetes.client

        configuration = kubernetes.client.Configuration()
        configuration.host = self.url
        return kubernetes.client.ApiClient(configuration)

    def write_kubeconfig(self, path: Path, namespace: str = "default") -> Path:
        """Write a kubeconfig whose current context points at this fake; returns ``path``."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake", "namespace": namespace}}],
            "current-context": "fake",
        }
        # JSON is valid YAML, and kubeconfig loaders read YAML.
        path.write_text(json.dumps(config))
        return path

    # ---------------------------------------------------------------- state helpers

    def put_pod(
        self,
        namespace: str,
        name: str,
        labels: Mapping[str, str] | None = None,
        *,
        phase: str = "Running",
        terminating: bool = False,
    ) -> JSON:
        """Create or replace a v1 Pod (ADDED or MODIFIED); ``terminating`` sets ``deletionTimestamp``."""
        metadata: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
        if terminating:
            metadata["deletionTimestamp"] = _now()
            metadata["deletionGracePeriodSeconds"] = 30
        obj: JSON = {
            "metadata": metadata,
            "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:latest"}]},
            "status": {"phase": phase},
        }
        return self._put("pods", namespace, name, obj)

    def delete_pod(self, namespace: str, name: str) -> None:
        """Delete a Pod (DELETED carries its last state)."""
        self._delete("pods", namespace, name)

    def put_deployment(
        self,
        namespace: str,
        name: str,
        match_labels: Mapping[str, str] | None = None,
        match_expressions: Sequence[Mapping[str, Any]] = (),
        *,
        replicas: int = 1,
    ) -> JSON:
        """Create or replace an apps/v1 Deployment with ``spec.selector`` built from the arguments."""
        selector: JSON = {}
        if match_labels:
            selector["matchLabels"] = dict(match_labels)
        if match_expressions:
            selector["matchExpressions"] = [dict(e) for e in match_expressions]
        template_labels = dict(match_labels or {})
        obj: JSON = {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "replicas": replicas,
                "selector": selector,
                "template": {
                    "metadata": {"labels": template_labels},
                    "spec": {"containers": [{"name": "main", "image": "vllm/vllm-openai:latest"}]},
                },
            },
            "status": {},
        }
        return self._put("deployments", namespace, name, obj)

    def delete_deployment(self, namespace: str, name: str) -> None:
        """Delete a Deployment."""
        self._delete("deployments", namespace, name)

    def expire_history(self) -> None:
        """Compact all history: every open watch gets an ERROR 410 event and ends, and any later watch from a
        resourceVersion older than now gets the same; lists and fresh watches keep working."""
        with self._cond:
            self._compacted_rv = self._current_rv
            self._history.clear()
            self._epoch += 1
            self._cond.notify_all()

    def drop_watches(self) -> None:
        """Cut every open watch connection mid-stream (no terminating chunk), like a network failure."""
        with self._cond:
            watches = list(self._watches)
            for w in watches:
                w.dropped = True
            self._cond.notify_all()
        for w in watches:
            with contextlib.suppress(OSError):
                w.sock.shutdown(socket.SHUT_RDWR)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """While entered, open watches send nothing (a lagging watch); what happens meanwhile is held back."""
        with self._cond:
            self._paused = True
        try:
            yield
        finally:
            with self._cond:
                self._paused = False
                self._cond.notify_all()

    def open_watches(self) -> int:
        """How many watch streams are open right now."""
        with self._cond:
            return len(self._watches)

    def count_requests(self, path: str, *, watch: bool) -> int:
        """How many list (``watch=False``) or watch requests were made to exactly ``path``."""
        return sum(r.path == path and _is_watch(r.query) == watch for r in list(self.requests))

    def _put(self, resource: str, namespace: str, name: str, obj: JSON) -> JSON:
        kind = self._kinds[resource]
        with self._cond:
            old = kind.objects.get((namespace, name))
            rv = next(self._rv)
            self._current_rv = rv
            meta = obj["metadata"]
            meta["resourceVersion"] = str(rv)
            meta["uid"] = old["metadata"]["uid"] if old else f"uid-{resource}-{namespace}-{name}-{rv}"
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"] if old else _now()
            kind.objects[(namespace, name)] = obj
            self._record(rv, "MODIFIED" if old else "ADDED", resource, namespace, obj)
            return obj

    def _delete(self, resource: str, namespace: str, name: str) -> None:
        kind = self._kinds[resource]
        with self._cond:
            obj = kind.objects.pop((namespace, name))
            rv = next(self._rv)
            self._current_rv = rv
            obj = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(rv)}}
            self._record(rv, "DELETED", resource, namespace, obj)

    def _record(self, rv: int, type_: str, resource: str, namespace: str, obj: JSON) -> None:
        # Snapshot through JSON so later edits by a test cannot change what was already "written".
        snapshot = json.loads(json.dumps(obj))
        self._history.append(_Event(rv, type_, resource, namespace, snapshot))
        self._cond.notify_all()

    # ---------------------------------------------------------------- serving

    def _serve_list(self, resource: str, req: FakeRequest, out: FakeHandler) -> None:
        kind = self._kinds[resource]
        namespace = req.params.get("namespace")
        selector = req.query.get("labelSelector", "")
        with self._cond:
            items = [
                json.loads(json.dumps(obj))
                for (ns, _), obj in sorted(kind.objects.items())
                if (namespace is None or ns == namespace)
                and selector_matches(selector, obj["metadata"].get("labels") or {})
            ]
            rv = self._current_rv
        out.send_json(
            200,
            {
                "kind": f"{kind.kind}List",
                "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(rv)},
                "items": items,
            },
        )

    def _serve_watch(self, resource: str, req: FakeRequest, out: FakeHandler) -> None:
        kind = self._kinds[resource]
        namespace = req.params.get("namespace")
        raw_rv = req.query.get("resourceVersion", "")
        timeout = float(req.query["timeoutSeconds"]) if "timeoutSeconds" in req.query else None
        deadline = None if timeout is None else time.monotonic() + timeout

        def wire(type_: str, obj: JSON) -> bytes:
            full = {"kind": kind.kind, "apiVersion": kind.api_version, **obj}
            return json.dumps({"type": type_, "object": full}).encode() + b"\n"

        out.start_stream()
        watch = _Watch(out.connection)
        with self._cond:
            epoch = self._epoch
            initial: list[bytes] = []
            if raw_rv in ("", "0"):
                sent_rv = self._current_rv
                initial = [
                    wire("ADDED", obj)
                    for (ns, _), obj in sorted(kind.objects.items())
                    if namespace is None or ns == namespace
                ]
            else:
                sent_rv = int(raw_rv)
            too_old = sent_rv < self._compacted_rv
            compacted = self._compacted_rv
            if not too_old:
                self._watches.add(watch)
        if too_old:
            out.write_chunk(_expired(sent_rv, compacted))
            out.end_stream()
            return
        try:
            for chunk in initial:
                out.write_chunk(chunk)
            while True:
                # Decide under the lock, write outside it: a slow reader must not stall the test's helpers.
                pending: list[_Event] = []
                ending: bytes | None = None  # set when the stream ends cleanly: b"" or an ERROR event
                with self._cond:
                    while True:
                        if self._closing or watch.dropped or _peer_closed(watch.sock):
                            return  # no terminating chunk: the client sees a broken stream
                        if not self._paused and epoch != self._epoch:
                            ending = _expired(sent_rv, self._compacted_rv)
                            break
                        if not self._paused:
                            pending = [
                                e
                                for e in self._history
                                if e.rv > sent_rv
                                and e.resource == resource
                                and (namespace is None or e.namespace == namespace)
                            ]
                            if pending:
                                break
                        wait = _WATCH_POLL_SECONDS
                        if deadline is not None:
                            left = deadline - time.monotonic()
                            if left <= 0:
                                ending = b""
                                break
                            wait = min(wait, left)
                        self._cond.wait(wait)
                for e in pending:
                    out.write_chunk(wire(e.type, e.obj))
                    sent_rv = e.rv
                if ending is not None:
                    if ending:
                        out.write_chunk(ending)
                    out.end_stream()
                    return
        except OSError:
            return  # the client went away
        finally:
            with self._cond:
                self._watches.discard(watch)


def _peer_closed(sock: socket.socket) -> bool:
    """True when the client has closed its end (readable with nothing to read): a watch nobody reads."""
    try:
        readable, _, _ = select.select([sock], [], [], 0)
        return bool(readable) and sock.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def _is_watch(query: Mapping[str, str]) -> bool:
    return query.get("watch", "").lower() in ("1", "true")


def _expired(requested: int, oldest: int) -> bytes:
    status = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"too old resource version: {requested} ({oldest})",
        "reason": "Expired",
        "code": 410,
    }
    return json.dumps({"type": "ERROR", "object": status}).encode() + b"\n"


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class FakeHandler(BaseHTTPRequestHandler):
    """Dispatches to the fake's route table; speaks HTTP/1.1 so watches can use chunked encoding."""

    protocol_version = "HTTP/1.1"
    fake: FakeKube

    def do_GET(self) -> None:  # the name http.server dispatches to
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        parsed = urllib.parse.urlsplit(self.path)
        query = {k: v[-1] for k, v in urllib.parse.parse_qs(parsed.query, keep_blank_values=True).items()}
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = FakeRequest(self.command, parsed.path, {}, query, headers, body)
        self.fake.requests.append(req)
        for method, pattern, route in self.fake._routes:
            m = pattern.fullmatch(parsed.path)
            if m and method == self.command:
                req.params = {k: v for k, v in m.groupdict().items() if v is not None}
                route(req, self)
                return
        self.send_json(404, _status(404, "NotFound", "the server could not find the requested resource"))

    def send_json(self, code: int, body: JSON) -> None:
        """A complete JSON response with Content-Length."""
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self) -> None:
        """Headers of a chunked JSON stream."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def write_chunk(self, data: bytes) -> None:
        """One chunk, flushed at once so the client sees the event now."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def end_stream(self) -> None:
        """The terminating zero-length chunk: a clean end of the stream."""
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:  # signature fixed by http.server
        """Quiet: the request log is ``FakeKube.requests``."""


def _status(code: int, reason: str, message: str) -> JSON:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
