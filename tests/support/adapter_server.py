"""Run the real adapter app under uvicorn on a free loopback port, in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx

from adapter.auth.setup import Security
from adapter.demo.servers import free_port
from adapter.server import make_server
from adapter.settings import Settings

# url -> the ASGI app serving it (tests inspect app.state, e.g. the event loop's tasks)
APPS: dict[str, Any] = {}


@contextmanager
def running_adapter(
    settings: Settings, *, clock: Callable[[], float] = time.time, security: Security | None = None, **app_kwargs: Any
) -> Iterator[str]:
    """Yield the base URL of a running adapter (https with ``security``); shut it down on exit."""
    port = free_port()
    server = make_server(
        settings, host="127.0.0.1", port=port, security=security, clock=clock, log_level="warning", **app_kwargs
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"{'https' if security else 'http'}://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("adapter did not start")
        time.sleep(0.02)
    APPS[url] = server.config.app
    try:
        yield url
    finally:
        APPS.pop(url, None)
        server.should_exit = True
        thread.join(timeout=10)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, timeout=10, **kwargs)
