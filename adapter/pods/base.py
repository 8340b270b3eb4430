"""The pod-source seam: which pods stand behind a label selector or a Deployment.

Two implementations: ``kubernetes.py`` (the official client, a watch-fed in-memory cache) and
``prometheus.py`` (kube-state-metrics series, for clusters where the adapter may not read the API).
``ObjectSource`` is the same seam for any other resource (``objects.py``: API discovery and lists).
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Protocol

from adapter.labels import Selector


class PodSource(Protocol):
    """Answers from a cache or one cheap query; never returns pods that do not match."""

    name: str

    async def start(self) -> None:
        """Open clients and start background watches (idempotent)."""

    async def close(self) -> None:
        """Stop background work and close clients."""

    def ready(self) -> bool:
        """True once the source can answer (e.g. the first list of a watch has arrived)."""

    async def pods_for_selector(self, namespace: str, selector: Selector) -> list[str]:
        """Sorted names of the live pods in ``namespace`` whose labels match ``selector``.

        Pods that are terminating or have finished (phase Succeeded/Failed) are left out.
        Raises ``UpstreamError`` when the source cannot answer.
        """

    async def pods_for_deployment(self, namespace: str, name: str) -> list[str]:
        """Sorted names of the live pods owned by Deployment ``namespace/name``.

        Raises ``NotFound`` if the Deployment is unknown, ``UpstreamError`` when the source cannot answer.
        """


@dataclass(frozen=True, slots=True)
class ServedResource:
    """One resource of API discovery's ``APIResourceList`` at its group's preferred version."""

    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool


class ObjectSource(Protocol):
    """Any resource's objects, as the Kubernetes API serves them (``objects.py``)."""

    async def served_resources(self, skip_groups: Collection[str] = ()) -> list[ServedResource]:
        """Every resource of each API group's preferred version but ``skip_groups``; ``UpstreamError``."""

    async def names(self, group: str, version: str, plural: str, namespace: str, selector: Selector) -> list[str]:
        """Sorted names of the objects of a resource in ``namespace`` matching ``selector``; ``UpstreamError``."""

    async def close(self) -> None:
        """Close the client if this source made it."""
