"""Helpers for the deployment tests: render kustomizations with the real kubectl, validate objects against the
Kubernetes schemas (``kubernetes-validate``, offline), look objects up."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from tests.support.binaries import require_binary

REPO = Path(__file__).resolve().parents[2]
MANIFESTS = REPO / "apiservice-manifests"
EXAMPLES = MANIFESTS / "examples"

Obj = dict[str, Any]
# The oldest Kubernetes minor we claim (HPA autoscaling/v2 and policy/v1 PDB are GA well before it) and the
# newest the schema package knows.
SCHEMA_VERSIONS = ("1.28", kubernetes_validate.latest_version())
# The first minor with an HPA's behavior.scale{Up,Down}.tolerance (HPAConfigurableTolerance, alpha in 1.33).
TOLERANCE_SINCE = "1.33"
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def kubectl() -> str:
    """Path of kubectl; skips the calling test where it is not installed, fails it in CI (support/binaries)."""
    return require_binary("kubectl")


def render(directory: Path, env: Mapping[str, str] | None = None) -> list[Obj]:
    """``kubectl kustomize DIRECTORY``, parsed; fails the test with kubectl's stderr if it refuses."""
    proc = subprocess.run(
        [kubectl(), "kustomize", str(directory)],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=None if env is None else dict(env),
    )
    assert proc.returncode == 0, f"kubectl kustomize {directory} failed:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


def find(objs: Iterable[Obj], kind: str, name: str, namespace: str | None = None) -> Obj:
    """The one object of ``kind`` named ``name`` (in ``namespace`` if given); fails if absent or ambiguous."""
    hits = [
        o
        for o in objs
        if o["kind"] == kind
        and o["metadata"]["name"] == name
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]
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
        if (
            (group in rule.get("apiGroups", []) or "*" in rule.get("apiGroups", []))
            and (resource in rule.get("resources", []) or "*" in rule.get("resources", []))
            and (verb in rule.get("verbs", []) or "*" in rule.get("verbs", []))
        ):
            return True
    return False


def check_object(obj: Obj) -> str:
    """Validate one object: strict schema where one exists (an HPA with a tolerance from the minor that has the
    field), else structure. Returns how it was checked."""
    versions = SCHEMA_VERSIONS
    if obj.get("kind") == "HorizontalPodAutoscaler" and any(
        "tolerance" in rules for rules in (obj.get("spec", {}).get("behavior") or {}).values()
    ):
        versions = (TOLERANCE_SINCE, SCHEMA_VERSIONS[-1])
    try:
        for version in versions:
            kubernetes_validate.validate(obj, version, strict=True)
        return "schema"
    except kubernetes_validate.SchemaNotFoundError:
        pass
    except kubernetes_validate.ValidationError as exc:
        where = ".".join(str(p) for p in exc.path)
        pytest.fail(f"{obj['kind']}/{obj['metadata'].get('name')}: {where}: {exc.message}")
    # A custom resource: what the API server itself checks before any CRD schema applies.
    group, _, version = obj["apiVersion"].rpartition("/")
    assert "." in group and re.fullmatch(r"v\d+((alpha|beta)\d+)?", version), obj["apiVersion"]
    assert re.fullmatch(r"[A-Z][A-Za-z0-9]*", obj["kind"])
    meta = obj["metadata"]
    assert set(obj) <= {"apiVersion", "kind", "metadata", "spec"}
    assert _DNS1123_SUBDOMAIN.fullmatch(meta["name"]) and len(meta["name"]) <= 253
    assert _DNS1123_SUBDOMAIN.fullmatch(meta.get("namespace", "")), "custom resources here are namespaced"
    assert isinstance(obj.get("spec"), dict) and obj["spec"]
    return "structure"


def with_components(base: Path, components: Sequence[Path], tmp: Path) -> Path:
    """An overlay directory in ``tmp`` of ``base`` with the kustomize Components ``components``."""
    overlay = tmp / "overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                "resources": [os.path.relpath(base, overlay)],
                "components": [os.path.relpath(c, overlay) for c in components],
            }
        )
    )
    return overlay
