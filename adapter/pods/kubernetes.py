"""Pods behind a selector or a Deployment, from a watch-fed in-memory cache of the Kubernetes API.

The official ``kubernetes`` client is synchronous, so each watched collection (pods and apps/v1 Deployments,
cluster-wide or per configured namespace) runs a reflector in a daemon thread (``pods/reflector.py``: list, then
watch, relist on 410, back off on errors). Requests are answered from memory and never wait on the network.

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
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import kubernetes.client
import kubernetes.config

from adapter.errors import NotFound, UpstreamError
from adapter.kubeconfig import api_client
from adapter.labels import EVERYTHING, Operator, Requirement, Selector
from adapter.pods.reflector import JSON, Keyed, RecordStore, Reflector

log = logging.getLogger(__name__)

_T = TypeVar("_T", bound=Keyed)


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


def _pod_record(obj: JSON) -> PodRecord:
    meta = obj["metadata"]
    return PodRecord(
        namespace=meta["namespace"],
        name=meta["name"],
        labels=dict(meta.get("labels") or {}),
        phase=(obj.get("status") or {}).get("phase") or "",
        terminating=meta.get("deletionTimestamp") is not None,
    )


def _deployment_record(obj: JSON) -> DeploymentRecord:
    meta = obj["metadata"]
    spec = (obj.get("spec") or {}).get("selector")
    try:
        selector = selector_from_label_selector(spec)
    except (ValueError, TypeError, AttributeError) as exc:  # malformed: this Deployment selects nothing
        log.warning("deployment %s/%s: unusable spec.selector %r: %s", meta["namespace"], meta["name"], spec, exc)
        selector = None
    return DeploymentRecord(namespace=meta["namespace"], name=meta["name"], selector=selector)


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
        self._reflectors: list[Reflector[Any]] = []
        self._pods: RecordStore[PodRecord] = RecordStore()
        self._deployments: RecordStore[DeploymentRecord] = RecordStore()
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
        convert: Callable[[JSON], _T],
        store: RecordStore[_T],
    ) -> Reflector[_T]:
        return Reflector(
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
