"""Helpers for the deployment tests: render kustomizations with the real kubectl, look objects up."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "apiservice-manifests"
EXAMPLES = MANIFESTS / "examples"

Obj = dict[str, Any]


def kubectl() -> str:
    """Path of kubectl; skips the calling test where it is not installed (test-infrastructure.md)."""
    path = shutil.which("kubectl")
    if path is None:
        pytest.skip("kubectl is not installed")
    return path


def render(directory: Path, env: Mapping[str, str] | None = None) -> list[Obj]:
    """``kubectl kustomize DIRECTORY``, parsed; fails the test with kubectl's stderr if it refuses."""
    proc = subprocess.run([kubectl(), "kustomize", str(directory)], check=False, capture_output=True, text=True,
                          timeout=120, env=None if env is None else dict(env))
    assert proc.returncode == 0, f"kubectl kustomize {directory} failed:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def find(objs: Iterable[Obj], kind: str, name: str, namespace: str | None = None) -> Obj:
    """The one object of ``kind`` named ``name`` (in ``namespace`` if given); fails if absent or ambiguous."""
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name
            and (namespace is None or o["metadata"].get("namespace") == namespace)]
    assert len(hits) == 1, f"expected one {kind} {namespace}/{name}, found {len(hits)}"
    return hits[0]


def of_kind(objs: Iterable[Obj], kind: str) -> list[Obj]:
    """All objects of ``kind``."""
    return [o for o in objs if o["kind"] == kind]


def selector_matches(match_labels: Mapping[str, str], labels: Mapping[str, str]) -> bool:
    """Whether a ``matchLabels`` selector selects an object with ``labels``."""
    return all(labels.get(k) == v for k, v in match_labels.items())


def rules_allow(rules: Iterable[Mapping[str, Any]], group: str, resource: str, verb: str) -> bool:
    """RBAC PolicyRule matching for a resource request (kubernetes/kubernetes
    ``pkg/apis/rbac/v1/evaluation_helpers.go``: ``*`` matches any group, verb or resource, and
    ``resource/subresource`` is matched as one string)."""
    for rule in rules:
        if (group in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", [])) \
                and (resource in rule.get("resources", []) or "*" in rule.get("resources", [])) \
                and (verb in rule.get("verbs", []) or "*" in rule.get("verbs", [])):
            return True
    return False
