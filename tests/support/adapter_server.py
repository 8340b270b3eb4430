"""Run the real adapter app under uvicorn on a free loopback port, in a thread of the test process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from adapter.app import create_app
from adapter.devservers import free_port
from adapter.settings import Settings


@contextmanager
def running_adapter(settings: Settings, *, clock: Callable[[], float] = time.time,
                    **app_kwargs: Any) -> Iterator[str]:
    """Yield the base URL of a running adapter; shut it down (lifespan included) on exit."""
    port = free_port()
    app = create_app(settings, clock=clock, **app_kwargs)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                            lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("adapter did not start")
        time.sleep(0.02)
    try:
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def get(url: str, **kwargs: Any) -> httpx.Response:
    return httpx.get(url, timeout=10, **kwargs)
