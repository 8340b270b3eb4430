"""Who a request is from, and the attributes an authorizer decides on (kubernetes/apiserver semantics)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs

from adapter.api.groups import GROUP, PREFIX

AUTHENTICATED = "system:authenticated"
MASTERS = "system:masters"


@dataclass(frozen=True)
class UserInfo:
    """An authenticated user (apiserver ``user.Info``), and whether the front proxy vouched for it.

    ``front_proxied``: the identity came in ``X-Remote-*`` headers from a valid front-proxy certificate
    (kube-aggregator, which has authenticated the user and applied kube-apiserver's own authorization and
    API Priority and Fairness first). Its reviews take their own lane (``kubeapi.py``); it is not part of
    the user's identity, so it is never sent in a review nor compared."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    front_proxied: bool = field(default=False, compare=False)

    def with_authenticated_group(self) -> UserInfo:
        """Every authenticated user gets ``system:authenticated`` (apiserver authenticated_group_adder.go)."""
        if AUTHENTICATED in self.groups:
            return self
        return dataclasses.replace(self, groups=(*self.groups, AUTHENTICATED))


@dataclass(frozen=True)
class Attributes:
    """What is being asked, as RequestInfoFactory.NewRequestInfo derives it (apiserver requestinfo.go)."""

    user: UserInfo
    verb: str
    path: str
    resource_request: bool
    namespace: str = ""
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def request_attributes(user: UserInfo, method: str, path: str, query_string: bytes) -> Attributes:
    """Resource attributes for ``/apis/<group>/<version>/<resource...>`` paths, non-resource otherwise.

    GET with a name is ``get`` (``*`` is a name), without one ``list`` (``watch`` with ``watch=true``); a
    ``namespaces/{ns}`` prefix sets the namespace; the rest is ``resource/name/subresource``.
    """
    verb = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(
        method, method.lower()
    )
    parts = [p for p in path.strip("/").split("/") if p != ""]
    if len(parts) < 4 or parts[0] != "apis":
        return Attributes(user, verb, path, False)
    group, version, rest = parts[1], parts[2], parts[3:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):  # upstream namespaceSubresources
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method in ("GET", "HEAD") and not name:
        watch = parse_qs(query_string.decode("latin-1")).get("watch", [""])[0]
        verb = "watch" if watch in ("1", "true") else "list"
    return Attributes(user, verb, path, True, namespace, group, version, resource, subresource, name)


EXPLAIN_PATH = "/explain"


def explain_attributes(user: UserInfo, query_string: bytes) -> Attributes | None:
    """What ``/explain?namespace=NS&metric=M`` reads, as the custom-metrics request that reads the same:
    ``get pods/M`` named ``*`` in ``NS`` (``GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/NS/pods/*/M``).

    ``/explain`` shows per-pod values of one namespace, so being allowed the non-resource path is not enough:
    the caller must also be allowed to read that namespace's metric. None when namespace or metric is absent
    (the route answers 400 without reading anything).
    """
    query = parse_qs(query_string.decode("latin-1"))
    namespace = query.get("namespace", [""])[-1]
    metric = query.get("metric", [""])[-1]
    if not namespace or not metric:
        return None
    return metric_read_attributes(user, namespace, metric)


def metric_read_attributes(user: UserInfo, namespace: str, metric: str) -> Attributes:
    """Reading ``metric`` for the pods of ``namespace``: ``get pods/METRIC`` named ``*`` in ``NAMESPACE``, as
    ``GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/NAMESPACE/pods/*/METRIC`` asks it (``/explain`` asks it
    for the metric it explains, and for each other metric of the HPA manifest it reads)."""
    return Attributes(
        user,
        "get",
        f"{PREFIX}/v1beta2/namespaces/{namespace}/pods/*/{metric}",
        True,
        namespace,
        GROUP,
        "v1beta2",
        "pods",
        metric,
        "*",
    )
