"""The Kubernetes side of delegated auth, through the official client: TokenReview, SubjectAccessReview,
and the ``kube-system/extension-apiserver-authentication`` ConfigMap.

The official client is synchronous: every call runs in a worker thread of its own lane (``pool.py``) so the
event loop never blocks and one kind of review cannot starve another.
Its errors become ``UpstreamError`` here (a review that cannot be made is a 503, never an allow).
"""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from adapter.auth.authn import RequestHeaderConfig, load_pem_certs
from adapter.auth.pool import ReviewPool
from adapter.auth.user import Attributes, UserInfo
from adapter.errors import UpstreamError
from adapter.kubeconfig import api_client

AUTH_CONFIGMAP = ("kube-system", "extension-apiserver-authentication")


def api_client_from(kubeconfig: str | None) -> k8s.ApiClient:
    """In-cluster when running in a pod (and no kubeconfig given), else the kubeconfig (``adapter/kubeconfig.py``)."""
    return api_client(kubeconfig)


def _or_none(value: str) -> str | None:
    return value or None  # Go omits empty attributes (omitempty); so do we


def _strings(raw: str | None, default: tuple[str, ...]) -> tuple[str, ...]:
    """ConfigMap list values are JSON arrays (requestheader_controller.go deserializeStrings)."""
    if not raw:
        return default
    value = json.loads(raw)
    return tuple(str(v) for v in value) if value else ()


class KubeAuthAPI:
    """TokenReview, SubjectAccessReview and the ConfigMap read, each in its own bounded lane of threads
    (``pool.py``): a flood of bad bearer tokens queues only behind other token reviews, never in front of the
    front-proxy traffic's access reviews. ``timeout_s`` bounds each call including its wait for a thread.

    Access reviews take one of two lanes: front-proxied users (``UserInfo.front_proxied``: the HPA controller
    through kube-aggregator) have their own, so they never queue behind callers that connect directly with a
    bearer token or a client certificate, who share the other (each within its share, ``authz.py``).

    Lane sizes: the HPA controller syncs 5 HPAs at a time (kube-controller-manager
    ``--concurrent-horizontal-pod-autoscaler-syncs``) and decisions are cached 10 s, so 8 access-review
    threads keep up with a busy cluster; direct callers are rare on this API (kubectl users), so their
    access lane and the token lane have 4 threads each.
    """

    def __init__(
        self,
        api_client: k8s.ApiClient,
        timeout_s: float = 10.0,
        *,
        token_workers: int = 4,
        access_workers: int = 8,
        direct_access_workers: int = 4,
    ) -> None:
        self.api_client = api_client
        self.timeout_s = timeout_s
        self.token_pool = ReviewPool("TokenReview", token_workers, timeout_s)
        self.access_pool = ReviewPool("SubjectAccessReview", access_workers, timeout_s)
        self.direct_access_pool = ReviewPool("SubjectAccessReview (direct callers)", direct_access_workers, timeout_s)
        self.config_pool = ReviewPool("ConfigMap", 1, timeout_s)

    async def _call(self, pool: ReviewPool, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await pool.run(fn, *args, _request_timeout=self.timeout_s, **kwargs)
        except UpstreamError:
            raise
        except ApiException as exc:
            raise UpstreamError(f"kubernetes API answered {exc.status}: {exc.reason}") from None
        except Exception as exc:  # connection errors from urllib3 and friends
            raise UpstreamError(f"kubernetes API unreachable: {type(exc).__name__}") from None

    def close(self) -> None:
        for pool in (self.token_pool, self.access_pool, self.direct_access_pool, self.config_pool):
            pool.close()

    async def review_token(self, token: str) -> UserInfo | None:
        body = k8s.V1TokenReview(
            api_version="authentication.k8s.io/v1", kind="TokenReview", spec=k8s.V1TokenReviewSpec(token=token)
        )
        result = await self._call(self.token_pool, k8s.AuthenticationV1Api(self.api_client).create_token_review, body)
        status = result.status
        if status is None or not status.authenticated or status.user is None:
            return None
        u = status.user
        extra = {k: tuple(v) for k, v in (u.extra or {}).items()}
        return UserInfo(u.username or "", u.uid or "", tuple(u.groups or ()), extra)

    async def review_access(self, attrs: Attributes) -> tuple[bool, str]:
        user = attrs.user
        spec = k8s.V1SubjectAccessReviewSpec(
            user=user.name,
            groups=list(user.groups) or None,
            uid=_or_none(user.uid),
            extra={k: list(v) for k, v in user.extra.items()} or None,
        )
        if attrs.resource_request:
            spec.resource_attributes = k8s.V1ResourceAttributes(
                namespace=_or_none(attrs.namespace),
                verb=attrs.verb,
                group=_or_none(attrs.group),
                version=_or_none(attrs.version),
                resource=_or_none(attrs.resource),
                subresource=_or_none(attrs.subresource),
                name=_or_none(attrs.name),
            )
        else:
            spec.non_resource_attributes = k8s.V1NonResourceAttributes(path=attrs.path, verb=attrs.verb)
        body = k8s.V1SubjectAccessReview(api_version="authorization.k8s.io/v1", kind="SubjectAccessReview", spec=spec)
        api = k8s.AuthorizationV1Api(self.api_client)
        lane = self.access_pool if user.front_proxied else self.direct_access_pool
        result = await self._call(lane, api.create_subject_access_review, body)
        status = result.status
        if status is None:
            return False, ""
        reason = status.reason or ""
        if status.denied:  # denied wins, also over a contradictory allowed (webhook.go)
            return False, reason
        return bool(status.allowed), reason

    async def request_header_config(self) -> tuple[RequestHeaderConfig | None, list[Any]]:
        """(front-proxy config or None, client CAs) from the cluster's authentication ConfigMap."""
        ns, name = AUTH_CONFIGMAP
        cm = await self._call(self.config_pool, k8s.CoreV1Api(self.api_client).read_namespaced_config_map, name, ns)
        try:
            return _parse_auth_configmap(cm.data or {})
        except ValueError as exc:  # bad PEM or a list value that is not JSON: keep what we have, say why
            raise UpstreamError(f"{ns}/{name} is unreadable: {exc}") from None


def _parse_auth_configmap(data: dict[str, str]) -> tuple[RequestHeaderConfig | None, list[Any]]:
    """The ConfigMap's data as kube-apiserver publishes it; ValueError for bad PEM or bad list values."""
    client_cas = load_pem_certs(data.get("client-ca-file", "").encode())
    rh_pem = data.get("requestheader-client-ca-file", "")
    if not rh_pem.strip():
        return None, client_cas
    cfg = RequestHeaderConfig(
        client_cas=load_pem_certs(rh_pem.encode()),
        allowed_names=_strings(data.get("requestheader-allowed-names"), ()),
        username_headers=_strings(data.get("requestheader-username-headers"), ("X-Remote-User",)),
        uid_headers=_strings(data.get("requestheader-uid-headers"), ("X-Remote-Uid",)),
        group_headers=_strings(data.get("requestheader-group-headers"), ("X-Remote-Group",)),
        extra_prefixes=_strings(data.get("requestheader-extra-headers-prefix"), ("X-Remote-Extra-",)),
    )
    return cfg, client_cas
