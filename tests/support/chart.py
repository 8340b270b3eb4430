"""Helpers for the Helm chart's tests: run the real ``helm`` (tests/support/tools.py installs v4 and v3)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from tests.support.manifests import REPO, Obj

CHART = REPO / "charts" / "llm-hpa-adapter"
RELEASE = "llm-hpa-adapter"
NAMESPACE = "llm-hpa-adapter"
# Both majors users run: helm 4 (`helm`) and helm 3 (`helm3`).
HELMS = ("helm", "helm3")


def _quiet(stderr: str) -> str:
    # helm logs every symbolic link it follows (files/ links to the one source of each artifact).
    return "\n".join(line for line in stderr.splitlines() if "symbolic link" not in line)


def helm_run(
    helm: str, args: Sequence[str], values: Mapping[str, Any] | None, tmp: Path
) -> subprocess.CompletedProcess[str]:
    """``helm ARGS [-f values.yaml]`` with HOME and helm's caches inside ``tmp``; stderr without link notes."""
    argv = [helm, *args]
    if values is not None:
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(dict(values)))
        argv += ["-f", str(path)]
    env = {"HOME": str(tmp), "PATH": "/usr/bin:/bin", "HELM_CACHE_HOME": str(tmp / "cache")}
    env |= {"HELM_CONFIG_HOME": str(tmp / "config"), "HELM_DATA_HOME": str(tmp / "data")}
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)
    return subprocess.CompletedProcess(proc.args, proc.returncode, proc.stdout, _quiet(proc.stderr))


def template(helm: str, values: Mapping[str, Any] | None, tmp: Path, *extra: str) -> list[Obj]:
    """``helm template`` of the chart as release llm-hpa-adapter in namespace llm-hpa-adapter, parsed."""
    proc = helm_run(helm, ["template", RELEASE, str(CHART), "--namespace", NAMESPACE, *extra], values, tmp)
    assert proc.returncode == 0, f"helm template failed:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]
