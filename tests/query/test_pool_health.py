"""The backend client's pool health check: a pool that has lost its connections for good is replaced.

A real loopback HTTP server (asyncio streams) trickles a body that never ends, or answers at once. The test
first leaks every connection of the client's pool the way httpcore loses them (encode/httpcore #1093, #830):
a body read cancelled from outside, here with ``asyncio.timeout`` around the client's own ``httpx`` client,
as the adapter's queries once were. The pool is then wedged (a plain request on it gets ``PoolTimeout``
against a server that answers at once). ``PromClient`` must notice at its next query (a 503, counted as
``pool_wedged``), replace its HTTP client, and answer the query after it. Its own queries under the same
trickle must leak nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import httpx
import pytest

from adapter.errors import UpstreamError
from adapter.query.client import PromClient, pool_limits

EMPTY = b'{"status":"success","data":{"resultType":"vector","result":[]}}'


class LoopbackBackend:
    """``trickle``: a head, then one byte every 20 ms of a body that never ends; ``answer``: an empty vector."""

    def __init__(self) -> None:
        self.mode = "trickle"
        self.answered = 0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                await reader.readexactly(length)
                if self.mode == "trickle":
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n{")
                    while self.mode == "trickle":
                        await asyncio.sleep(0.02)
                        writer.write(b" ")
                        await writer.drain()
                    writer.close()
                    return
                self.answered += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(EMPTY), EMPTY))
                await writer.drain()


@contextlib.asynccontextmanager
async def backend() -> AsyncIterator[tuple[LoopbackBackend, str]]:
    state = LoopbackBackend()
    server = await asyncio.start_server(state.serve, "127.0.0.1", 0)
    try:
        yield state, f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    finally:
        state.mode = "stop"
        server.close()


def outcomes() -> tuple[list[str], object]:
    seen: list[str] = []
    return seen, lambda backend, endpoint, seconds, outcome: seen.append(outcome)


async def wedge(http: httpx.AsyncClient, url: str, state: LoopbackBackend) -> None:
    """Leak every connection of ``http``'s pool: rounds of 40 requests contending for its 4 connections, each
    cut by ``asyncio.timeout`` (each round leaks some; a leak is permanent), until a request to a server that
    answers at once gets ``PoolTimeout``."""

    async def cut() -> None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(0.2):
                async with http.stream("POST", url + "/api/v1/query", content=b"query=up") as r:
                    async for _ in r.aiter_bytes():
                        pass

    for _ in range(30):
        state.mode = "trickle"
        await asyncio.gather(*(cut() for _ in range(40)))
        state.mode = "answer"
        try:
            await http.post(url + "/api/v1/query", content=b"query=up", timeout=0.3)
        except httpx.PoolTimeout:
            return
    raise AssertionError("30 rounds of cancelled requests under contention did not wedge the pool")


def test_a_wedged_pool_is_detected_and_replaced() -> None:
    async def scenario() -> None:
        async with backend() as (state, url):
            seen, observer = outcomes()

            def factory() -> httpx.AsyncClient:
                return httpx.AsyncClient(limits=pool_limits(2), trust_env=False)

            client = PromClient(
                url, http=factory(), http_factory=factory, timeout_s=2.0, max_concurrency=2, observer=observer
            )  # type: ignore[arg-type]
            wedged = client._http
            await wedge(wedged, url, state)  # pool_limits(2): 4 connections, all lost
            answered = state.answered

            with pytest.raises(UpstreamError, match="did not answer"):
                await client.query("up", 0.0)  # meets the wedge: a 503, and the pool is replaced
            assert client.pool_replacements == 1 and client._http is not wedged and seen[-1] == "pool_wedged"
            assert await client.query("up", 0.0) == []  # served again, by a fresh pool
            assert state.answered == answered + 1 and seen[-1] == "ok"
            await client.aclose()

    asyncio.run(scenario())


def test_queries_cut_at_their_deadline_leak_nothing() -> None:
    async def scenario() -> None:
        async with backend() as (state, url):
            seen, observer = outcomes()
            client = PromClient(
                url,
                http=httpx.AsyncClient(limits=pool_limits(2), trust_env=False),
                timeout_s=0.3,
                max_concurrency=2,
                observer=observer,
            )  # type: ignore[arg-type]
            results = await asyncio.gather(*(client.query(f"up{i}", 0.0) for i in range(12)), return_exceptions=True)
            assert all(isinstance(r, UpstreamError) for r in results), results
            state.mode = "answer"
            for _ in range(50):  # the exchanges past their callers' deadlines end by themselves
                if not client._tasks:
                    break
                await asyncio.sleep(0.1)
            assert not client._tasks
            assert await client.query("up", 0.0) == []
            assert client.pool_replacements == 0 and "pool_wedged" not in seen
            await client.aclose()

    asyncio.run(scenario())
