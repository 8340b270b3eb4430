"""Any resource's objects, from the Kubernetes API: what API discovery serves, and names behind a label selector.

What prometheus-adapter asks its cluster for beyond pods (``pkg/custom-provider/helpers.go``
``ListObjectNames``; its RESTMapper is client-go's deferred discovery):

- ``served_resources``: the resources of every API group's preferred version (``GET /apis``, then
  ``GET /apis/{group}/{version}`` for each group not in ``skip_groups``), with kind, singular and scope, so a
  CRD's plural (``inferenceservices.serving.kserve.io``) resolves as the RESTMapper resolves it;
- ``names``: the names of a namespace's objects of one resource matching a label selector, one list request
  (``GET /apis/{group}/{version}/namespaces/{ns}/{plural}?labelSelector=...``), as prometheus-adapter lists them
  for ``*`` on every request.

The official client is synchronous: each call runs in a worker thread. Subresources (``deployments/scale``) are
not resources and are left out of discovery. Errors are the adapter's: 403 names the RBAC rule missing, any other
failure is an ``UpstreamError``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Collection, Sequence
from typing import Any

import kubernetes.client

from adapter.errors import UpstreamError
from adapter.kubeconfig import api_client
from adapter.labels import Selector
from adapter.pods.base import ServedResource

log = logging.getLogger(__name__)


def _collection_path(group: str, version: str, plural: str, namespace: str) -> str:
    root = f"/api/{version}" if not group else f"/apis/{group}/{version}"
    return f"{root}/namespaces/{namespace}/{plural}"


class KubeObjects:
    """``ObjectSource``: the two reads above over one ``ApiClient`` (given, or built by
    ``adapter/kubeconfig.py``'s rule on first use, off the event loop)."""

    def __init__(
        self,
        *,
        api_client: kubernetes.client.ApiClient | None = None,
        kubeconfig: str | None = None,
        request_timeout: float = 10.0,
    ) -> None:
        self._client = api_client
        self._owned = api_client is None
        self._kubeconfig = kubeconfig
        self._timeout = request_timeout
        self._lock = asyncio.Lock()

    async def _api(self) -> kubernetes.client.ApiClient:
        async with self._lock:
            if self._client is None:
                self._client = await asyncio.to_thread(api_client, self._kubeconfig)
            return self._client

    def _get(self, client: kubernetes.client.ApiClient, path: str, query: Sequence[tuple[str, str]] = ()) -> Any:
        method, url, headers, _, _ = client.param_serialize(
            "GET",
            path,
            query_params=list(query),
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            resp = client.call_api(method, url, header_params=headers, _request_timeout=self._timeout)
            body = resp.response.data  # urllib3 reads the whole body
        except Exception as exc:  # urllib3 errors, refused connection, timeouts
            raise UpstreamError(f"Kubernetes API GET {path}: {type(exc).__name__}: {exc}") from None
        if resp.status == 403:
            raise UpstreamError(
                f"Kubernetes API GET {path}: forbidden; grant the adapter's ServiceAccount list on it "
                "(docs/prometheus-adapter.md, RBAC)"
            )
        if resp.status != 200:
            raise UpstreamError(f"Kubernetes API GET {path}: HTTP {resp.status}")
        try:
            return json.loads(body)
        except ValueError:
            raise UpstreamError(f"Kubernetes API GET {path}: the answer is not JSON") from None

    async def served_resources(self, skip_groups: Collection[str] = ()) -> list[ServedResource]:
        """Every resource of the preferred version of each API group but ``skip_groups`` (the built-ins)."""
        client = await self._api()
        return await asyncio.to_thread(self._served, client, frozenset(skip_groups))

    def _served(self, client: kubernetes.client.ApiClient, skip: frozenset[str]) -> list[ServedResource]:
        out: list[ServedResource] = []
        for group in self._get(client, "/apis").get("groups") or []:
            name = group.get("name") or ""
            version = (group.get("preferredVersion") or {}).get("version") or ""
            if not name or not version or name in skip:
                continue
            listing = self._get(client, f"/apis/{name}/{version}")
            for r in listing.get("resources") or []:
                plural = r.get("name") or ""
                if not plural or "/" in plural or not r.get("kind"):
                    continue
                singular = r.get("singularName") or r["kind"].lower()
                out.append(ServedResource(name, version, plural, singular, r["kind"], bool(r.get("namespaced"))))
        return out

    async def names(self, group: str, version: str, plural: str, namespace: str, selector: Selector) -> list[str]:
        """Sorted names of the objects of ``plural`` in ``namespace`` matching ``selector``."""
        client = await self._api()
        path = _collection_path(group, version, plural, namespace)
        query = [] if selector.is_everything() else [("labelSelector", str(selector))]
        body = await asyncio.to_thread(self._get, client, path, query)
        return sorted(name for item in body.get("items") or [] if (name := (item.get("metadata") or {}).get("name")))

    async def close(self) -> None:
        if self._client is not None and self._owned:
            await asyncio.to_thread(self._client.close)
        self._client = None
