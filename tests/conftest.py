"""Shared fixtures: one real Prometheus and one real VictoriaMetrics per test session.

Tests that share the servers keep apart by namespace label (``unique_ns``). A test that stops, kills
or pauses a server must start its own (``tests.support.backends.start_backend``), never these.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from adapter.devservers import BinaryNotFound
from tests.support.backends import KINDS, TestBackend, start_backend


def _session_backend(kind: str) -> Iterator[TestBackend]:
    try:
        backend = start_backend(kind)
    except BinaryNotFound as exc:
        pytest.skip(str(exc))
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


@pytest.fixture
def unique_ns() -> str:
    """A namespace name no other test uses (``t-<8 hex>``), to keep data on the shared servers apart."""
    return f"t-{uuid.uuid4().hex[:8]}"
