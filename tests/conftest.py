"""Shared fixtures, and the one place that decides which tests are ``integration`` tests.

A test is an integration test when it needs an external binary: it uses one of ``BINARY_FIXTURES`` (directly
or through another fixture) or carries ``@pytest.mark.binary("name", ...)``. ``pytest -m "not integration"``
runs the rest, which need nothing but Python. A missing binary skips the test on a developer's machine and
fails it in CI (``CI=true``; ``tests/support/binaries.py``).

One real Prometheus and one real VictoriaMetrics serve the whole session; tests that share them keep apart by
namespace label (``unique_ns``). A test that stops, kills or pauses a server uses ``own_backend``, never these.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from adapter.demo.servers import BinaryNotFound
from tests.support.backends import KINDS, TestBackend, start_backend
from tests.support.binaries import missing, refusing_binaries, require_binary

# Fixtures that start or run an external binary, and the binaries behind each.
BINARY_FIXTURES = {
    "prometheus": ("prometheus",),
    "victoriametrics": ("victoria-metrics",),
    "backend": ("prometheus", "victoria-metrics"),
    "own_backend": ("prometheus", "victoria-metrics"),
    "kubectl_path": ("kubectl",),
    "helm": ("helm", "helm3"),
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        uses = set(getattr(item, "fixturenames", ())) & set(BINARY_FIXTURES)
        if uses or item.get_closest_marker("binary") is not None:
            item.add_marker(pytest.mark.integration)


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("binary"):
        for name in mark.args:
            require_binary(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test that is not an integration test may not start a binary, in its fixtures (module-scoped ones
    included) or its body: ``-m "not integration"`` starts none."""
    if item.get_closest_marker("integration") is not None:
        return (yield)
    with refusing_binaries(item.nodeid):
        return (yield)


def _started(kind: str) -> TestBackend:
    try:
        return start_backend(kind)
    except BinaryNotFound as exc:
        missing(str(exc))


def _session_backend(kind: str) -> Iterator[TestBackend]:
    backend = _started(kind)
    try:
        yield backend
    finally:
        backend.close()


@pytest.fixture(scope="session")
def prometheus() -> Iterator[TestBackend]:
    """A real Prometheus (remote-write receiver, admin API, 30 d out-of-order window) for the session."""
    yield from _session_backend("prometheus")


@pytest.fixture(scope="session")
def victoriametrics() -> Iterator[TestBackend]:
    """A real VictoriaMetrics (no latency offset, no cache) for the session."""
    yield from _session_backend("victoriametrics")


@pytest.fixture(params=KINDS, ids=KINDS)
def backend(request: pytest.FixtureRequest) -> TestBackend:
    """Each test using it runs once against Prometheus and once against VictoriaMetrics."""
    shared: TestBackend = request.getfixturevalue(request.param)
    return shared


@pytest.fixture(params=KINDS, ids=KINDS)
def own_backend(request: pytest.FixtureRequest) -> Iterator[TestBackend]:
    """A fresh server of each kind for one test, which may stop, kill or pause it."""
    yield from _session_backend(request.param)


@pytest.fixture(scope="session")
def kubectl_path() -> str:
    """The real kubectl: ``.tools/bin``'s (v1.34, ``make tools``) when installed, else PATH's."""
    return require_binary("kubectl")


@pytest.fixture
def unique_ns() -> str:
    """A namespace name no other test uses (``t-<8 hex>``), to keep data on the shared servers apart."""
    return f"t-{uuid.uuid4().hex[:8]}"
