"""The Dockerfile, checked as far as a machine without a Docker engine can.

Checked: the instructions parse; both stages use a base pinned to a full Python 3.11 patch version; the final
stage installs only the builder's wheels and runs as a numeric non-root user (the Deployment's runAsUser);
every COPY source exists and gets through .dockerignore; the build context .dockerignore lets through is
enough for the builder's ``pip wheel`` (run here, without network); the console script named in ENTRYPOINT is
declared in pyproject.toml and runs, with the CMD's arguments too.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.support.manifests import MANIFESTS, REPO

BUILD_TOOLS = ("gcc", "g++", "make", "build-essential", "cmake", "clang", "python3-dev", "libc6-dev")


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


def parse_dockerfile(text: str) -> list[Instruction]:
    """Instructions with continuation lines joined (runs of whitespace made one space) and comments
    dropped (Dockerfile reference syntax)."""
    out: list[Instruction] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if pending and stripped.startswith("#"):
            continue  # comment lines inside a continued instruction are removed
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        full = " ".join((pending + stripped).split())  # whitespace is insignificant for these checks
        pending = ""
        keyword, _, args = full.partition(" ")
        out.append(Instruction(keyword.upper(), args.strip()))
    assert not pending, "the Dockerfile ends inside a continued line"
    return out


def stages(instructions: list[Instruction]) -> list[list[Instruction]]:
    """Split at FROM: each stage starts with its FROM."""
    result: list[list[Instruction]] = []
    for ins in instructions:
        if ins.keyword == "FROM":
            result.append([])
        assert result, "the first instruction must be FROM"
        result[-1].append(ins)
    return result


def dockerignore_excludes(patterns: list[str], path: str) -> bool:
    """Docker's rule: the last pattern matching the path (or one of its parent directories) decides;
    ``!`` re-includes. ``**/`` matches any number of directories, including none."""
    parts = path.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw[1:] if negate else raw
        pattern = pattern.strip("/")
        variants = {pattern, pattern.removeprefix("**/")}
        if any(fnmatch.fnmatchcase(c, v) for c in candidates for v in variants):
            excluded = not negate
    return excluded


def _dockerignore() -> list[str]:
    lines = (REPO / ".dockerignore").read_text().splitlines()
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith("#")]


@pytest.fixture(scope="module")
def docker_stages() -> list[list[Instruction]]:
    return stages(parse_dockerfile((REPO / "Dockerfile").read_text()))


def _copy_sources(stage: list[Instruction]) -> list[str]:
    sources: list[str] = []
    for ins in stage:
        if ins.keyword == "COPY" and "--from=" not in ins.args:
            words = [w for w in ins.args.split() if not w.startswith("--")]
            sources.extend(words[:-1])
    return sources


def test_parser_handles_continuations() -> None:
    parsed = parse_dockerfile("FROM a AS b\n# c\nRUN x \\\n  # note\n  && y\nUSER 1\n")
    assert parsed == [Instruction("FROM", "a AS b"), Instruction("RUN", "x && y"), Instruction("USER", "1")]


def test_dockerignore_semantics() -> None:
    patterns = ["*", "!adapter/", "**/__pycache__"]
    assert dockerignore_excludes(patterns, ".venv/bin/python")
    assert not dockerignore_excludes(patterns, "adapter/app.py")
    assert dockerignore_excludes(patterns, "adapter/__pycache__/app.cpython-311.pyc")
    assert dockerignore_excludes(patterns, "__pycache__")


def test_multi_stage_with_pinned_bases(docker_stages: list[list[Instruction]]) -> None:
    assert len(docker_stages) == 2
    builder, final = (s[0].args.split() for s in docker_stages)
    assert builder[1:] == ["AS", "builder"]
    assert len(final) == 1, "the final stage is unnamed, so `docker build` without --target builds it"
    for image in (builder[0], final[0]):
        name, _, tag = image.partition(":")
        assert name == "python"
        version, _, variant = tag.partition("-")
        major, minor, patch = version.split(".")
        assert (major, minor) == ("3", "11") and patch.isdigit(), f"{image}: pin the full patch version"
        assert variant.startswith("slim"), f"{image}: the slim variant (no compilers)"
    assert builder[0] == final[0], "both stages on the same base: wheels built for the Python that runs them"


def test_final_stage_installs_only_built_wheels(docker_stages: list[list[Instruction]]) -> None:
    final = docker_stages[-1]
    assert _copy_sources(final) == [], "the final stage copies nothing from the build context"
    runs = [ins.args for ins in final if ins.keyword == "RUN"]
    installs = [r for r in runs if "pip install" in r]
    assert len(installs) == 1
    assert "--no-index" in installs[0] and "from=builder" in installs[0]
    for run in runs:
        for tool in BUILD_TOOLS:
            assert f" {tool} " not in f" {run} ", f"build tool {tool} in the final stage: {run}"
        assert "apt-get install" not in run


def test_copy_sources_exist_and_pass_dockerignore(docker_stages: list[list[Instruction]]) -> None:
    sources = [s for stage in docker_stages for s in _copy_sources(stage)]
    assert sources, "the builder copies the project in"
    patterns = _dockerignore()
    for source in sources:
        path = REPO / source
        assert path.exists(), f"COPY {source}: not in the repository"
        files = (
            [path] if path.is_file() else [p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
        )
        for file in files:
            rel = file.relative_to(REPO).as_posix()
            assert not dockerignore_excludes(patterns, rel), f"{rel} is copied but .dockerignore drops it"


def test_dockerignore_keeps_secrets_and_bulk_out() -> None:
    patterns = _dockerignore()
    for path in (
        ".venv/bin/python",
        "certs/ca.key",
        "deploy/certs/tls.key",
        ".git/config",
        "tests/conftest.py",
        "adapter/__pycache__/app.cpython-311.pyc",
        "benchmarks/latency.py",
    ):
        assert dockerignore_excludes(patterns, path), path


def test_user_is_numeric_non_root_and_matches_the_deployment(docker_stages: list[list[Instruction]]) -> None:
    users = [ins.args for ins in docker_stages[-1] if ins.keyword == "USER"]
    assert users, "the final stage sets USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) > 0, "numeric, so the kubelet can check runAsNonRoot"
    assert gid.isdigit() and int(gid) > 0
    deployment = yaml.safe_load((MANIFESTS / "deployment.yaml").read_text())
    pod_security = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (pod_security["runAsUser"], pod_security["runAsGroup"]) == (int(uid), int(gid))


def test_entrypoint_and_cmd(docker_stages: list[list[Instruction]]) -> None:
    final = {ins.keyword: ins.args for ins in docker_stages[-1]}
    assert json.loads(final["ENTRYPOINT"]) == ["llm-hpa-adapter"]
    assert json.loads(final["CMD"]) == ["serve", "--help"]
    assert final["EXPOSE"] == "6443"


def test_console_script_is_declared_and_runs() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert project["scripts"]["llm-hpa-adapter"] == "adapter.__main__:main"
    script = Path(sys.executable).parent / "llm-hpa-adapter"
    assert script.exists(), "installed by `pip install -e .` (make venv)"
    for argv in ([], ["serve"]):  # ENTRYPOINT alone, and with the image's CMD
        proc = subprocess.run([str(script), *argv, "--help"], check=False, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        assert "usage: llm-hpa-adapter" in proc.stdout
    assert "--tls-cert-file" in proc.stdout or "--prometheus-url" in proc.stdout


def _build_context(dest: Path) -> None:
    """What `docker build .` would send: the repository's files that .dockerignore lets through."""
    patterns = _dockerignore()
    for root, dirs, files in os.walk(REPO):
        rel_root = Path(root).relative_to(REPO)
        dirs[:] = [d for d in dirs if d not in {".git", ".venv"}]  # large, and excluded anyway (checked above)
        for name in files:
            rel = (rel_root / name).as_posix()
            if not dockerignore_excludes(patterns, rel):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / rel, dest / rel)


def test_build_context_is_enough_to_build_the_package(tmp_path: Path) -> None:
    context = tmp_path / "context"
    context.mkdir()
    _build_context(context)
    # The builder's `pip wheel .` fetches the build backend and the dependencies from PyPI; offline, the same
    # backend (setuptools, already in this venv) builds the source distribution from the same context: the
    # same metadata, package list and package data a wheel is made of.
    code = "import sys; from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "dist")],
        cwd=context,
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    sdist = tmp_path / "dist" / proc.stdout.strip().splitlines()[-1]
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        entry_points = next(
            tar.extractfile(m).read().decode()  # type: ignore[union-attr]
            for m in tar.getmembers()
            if m.name.endswith(".egg-info/entry_points.txt")
        )
    package_files = {
        p.relative_to(REPO).as_posix()
        for p in (REPO / "adapter").rglob("*")
        if p.suffix in {".py", ".yaml"} and "__pycache__" not in p.parts
    }
    assert package_files <= names, sorted(package_files - names)
    assert "llm-hpa-adapter = adapter.__main__:main" in entry_points
    assert not any(n.startswith("tests/") for n in names)


@pytest.mark.binary("make")
def test_make_image_builds_the_versioned_tag() -> None:
    # -n: print the commands without running them (no Docker engine here).
    # Under `make test` (CI) the parent make's MAKEFLAGS/MAKELEVEL would make this one print
    # "Entering directory" lines: run it as a top-level make.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    proc = subprocess.run(
        ["make", "--no-print-directory", "-n", "image"],
        cwd=REPO,
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert proc.stdout.strip() == f"docker build -t llm-hpa-adapter:{version} ."
