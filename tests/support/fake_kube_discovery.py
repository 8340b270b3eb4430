"""The fake kube-apiserver's API discovery and label selectors (``fake_kube.py``), written from the API's docs.

* ``GET /apis``: an ``APIGroupList``, one group per group of the fake's resources, each with one version, its
  ``preferredVersion`` (kubernetes.io/docs/reference/using-api/api-concepts, "Discovery API");
* ``GET /apis/{group}/{version}``: its ``APIResourceList`` (``name`` the plural, ``singularName``, ``namespaced``,
  ``kind``, ``verbs``), plus the ``/status`` subresource a real server lists too, which clients must skip;
* ``labelSelector`` on lists: the grammar of kubernetes.io/docs/concepts/overview/working-with-objects/labels
  (``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, ``k``, ``!k``, comma-separated, all must
  hold). Written here, independent of the adapter's own parser, so a bug there is not mirrored.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

JSON = dict[str, Any]

_SET = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")
_EQ = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_EXISTS = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


def _terms(text: str) -> list[str]:
    """The comma-separated requirements; commas inside ``(...)`` belong to a set."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    out.append(text[start:])
    return [t for t in out if t.strip()]


def selector_matches(text: str, labels: Mapping[str, str]) -> bool:
    """Whether ``labels`` satisfy every requirement of the selector ``text``; ``ValueError`` when unparsable."""
    for term in _terms(text):
        if m := _SET.match(term):
            key, op, values = m.group(1), m.group(2), {v.strip() for v in m.group(3).split(",")}
            ok = labels.get(key) in values if op == "in" else labels.get(key) not in values
        elif m := _EQ.match(term):
            key, op, value = m.groups()
            ok = labels.get(key) == value if op in ("=", "==") else labels.get(key) != value
        elif m := _EXISTS.match(term):
            ok = (m.group(2) in labels) != bool(m.group(1))
        else:
            raise ValueError(f"unable to parse requirement: {term!r}")
        if not ok:
            return False
    return True


def group_list(api_versions: Iterable[str]) -> JSON:
    """The ``APIGroupList`` of ``GET /apis`` for the named group versions (``apps/v1``); core is not a group."""
    groups: dict[str, str] = {}
    for gv in api_versions:
        if "/" in gv:
            group, version = gv.split("/", 1)
            groups.setdefault(group, version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": g,
                "versions": [{"groupVersion": f"{g}/{v}", "version": v}],
                "preferredVersion": {"groupVersion": f"{g}/{v}", "version": v},
            }
            for g, v in sorted(groups.items())
        ],
    }


def resource_list(group_version: str, resources: Iterable[tuple[str, str, str, bool]]) -> JSON:
    """The ``APIResourceList`` of ``GET /apis/{group}/{version}``: (plural, singular, kind, namespaced)."""
    entries: list[JSON] = []
    for plural, singular, kind, namespaced in resources:
        entries.append(
            {
                "name": plural,
                "singularName": singular,
                "namespaced": namespaced,
                "kind": kind,
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            }
        )
        entries.append({"name": f"{plural}/status", "singularName": "", "namespaced": namespaced, "kind": kind,
                        "verbs": ["get", "patch", "update"]})  # fmt: skip
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": entries}
