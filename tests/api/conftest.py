"""Fixtures of the in-process API tests (``test_inprocess_*.py``): the real app over a provider double.

No binary, no socket, no thread: ``create_app(provider=...)`` with ``ProviderDouble`` (tests/support), driven
through ``httpx.ASGITransport``, serving the table in ``tests/support/api_table.py``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from adapter.app import create_app
from adapter.catalog import load_catalog
from adapter.settings import Settings
from tests.support.api_table import DEPLOYMENTS, METRICS, PODS, TS, WINDOWS
from tests.support.provider_double import ProviderDouble, in_process


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # what uvicorn runs the adapter on


@pytest.fixture
def provider() -> ProviderDouble:
    return ProviderDouble(metrics=METRICS, pods=PODS, ts=TS, windows=WINDOWS, deployments=DEPLOYMENTS)


@pytest.fixture(scope="session")
def settings() -> Settings:
    # The URL is never dialled: with a provider given, create_app opens no backend client.
    return Settings(prometheus_url="http://prometheus.invalid", catalog=load_catalog(None))


@pytest.fixture
async def client(provider: ProviderDouble, settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with in_process(create_app(settings, provider=provider)) as c:
        yield c
