"""Parse the HPA manifest ``POST /explain`` carries, off the event loop and bounded in time and memory.

``yaml.safe_load`` is pure Python: a 2.8 MB body (under the 3 MiB body bound) took 66-69 s on the event loop,
and every HPA request and ``/livez`` waited that long. Even libyaml builds Python objects at a few hundred
KB/s for some shapes (a flat list of 1.4 million items: 7 s), and a thread could not be stopped once started.
So the body is parsed in a child process (``parse_worker.py``) that is killed at ``PARSE_TIMEOUT_S``; one
parse runs at a time (``MAX_PARSERS``), at a lower CPU priority, within ``MAX_PARSER_MEMORY`` of address space,
and its answer is at most ``MAX_PARSED_BYTES`` of JSON, so what the adapter itself does with it (``json.loads``
and ``load_hpa``) is small. An HPA manifest is a few KiB and parses in milliseconds; the cost is the child's
start (tens of milliseconds) on a debugging endpoint.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from adapter.errors import AdapterError, BadRequest

WORKER = Path(__file__).with_name("parse_worker.py")
# Time for one parse, waiting for the parser included: a real manifest needs milliseconds; the child's
# start on a loaded node a fraction of a second.
PARSE_TIMEOUT_S = 5.0
MAX_PARSERS = 1  # one core at most, of the two the Deployment asks for
MAX_PARSED_BYTES = 256 * 1024  # a large HPA (tens of metrics, behaviour policies) is under 10 KiB of JSON
MAX_PARSER_MEMORY = 256 * 1024 * 1024  # address space: the interpreter and yaml take ~40 MB of it

_EXIT_TOO_BIG = 4
_EXIT_MEMORY = 5


class ParserBusy(AdapterError):
    """Another manifest is being parsed past this request's deadline (503, retry)."""

    code = 503
    reason = "ServiceUnavailable"


class ManifestParser:
    """``await parser.parse(body)``: the document, or ``BadRequest`` saying why it is not one in time."""

    def __init__(self, timeout_s: float = PARSE_TIMEOUT_S, max_parsers: int = MAX_PARSERS) -> None:
        self.timeout_s = timeout_s
        self._slots = asyncio.Semaphore(max_parsers)
        self.timeouts = 0

    async def parse(self, body: bytes) -> Any:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        try:
            await asyncio.wait_for(self._slots.acquire(), self.timeout_s)
        except TimeoutError:
            raise ParserBusy("another manifest is being parsed; retry") from None
        try:
            return await self._run(body, deadline - loop.time())
        finally:
            self._slots.release()

    async def _run(self, body: bytes, budget_s: float) -> Any:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            str(WORKER),
            str(MAX_PARSED_BYTES),
            str(MAX_PARSER_MEMORY),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(proc.communicate(body), max(budget_s, 0.0))
        except TimeoutError:
            self.timeouts += 1
            raise BadRequest(
                f"the request body did not parse as a YAML/JSON HPA manifest within {self.timeout_s:g}s"
            ) from None
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        why = err.decode("utf-8", "replace").strip()
        if proc.returncode == _EXIT_TOO_BIG or proc.returncode == _EXIT_MEMORY:
            raise BadRequest(f"the request body is not one HorizontalPodAutoscaler manifest: {why}")
        if proc.returncode != 0:
            raise BadRequest(f"the request body is not a YAML/JSON HPA manifest: {why or 'unreadable'}")
        return json.loads(out)  # at most MAX_PARSED_BYTES
