"""The step-level reference model of one vLLM engine: continuous batching, chunked prefill, a paged KV cache.

``run_engine`` replays requests (arrival time, prompt and output tokens) through one engine, one step at a time,
as vLLM V1's scheduler does (vllm/v1/core/sched/scheduler.py):

* each step first gives every running sequence that has finished its prefill one decode token, then continues
  running prefills and admits waiting requests (first come, first served) with prefill chunks, until the step
  holds ``max_num_batched_tokens`` tokens or ``max_num_seqs`` sequences run;
* the KV cache holds ``kv_cache_blocks`` blocks of 16 tokens; a sequence gets a new block when its context
  crosses a block boundary. When a decoding sequence cannot get one, the most recently admitted running sequence
  is preempted: its blocks are freed and it goes back to the head of the queue to be recomputed (prompt plus
  what it generated), and ``preemptions`` counts it;
* a step takes ``profile.step_s(tokens, context)`` (``adapter.sim.profiles``), where ``context`` is the KV the
  decoding sequences read;
* a request's first token comes at the end of the step that completes its prefill (TTFT = queue + prefill);
  every later step gives it one more token (ITL = that step's time); it leaves after ``output`` tokens.

It is the yardstick the fast model (``adapter.sim.steady``) is tested against, and what the profiles' fidelity
tests run: pure Python over numpy arrays, about 20 k steps a second.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from adapter.sim.profiles import BLOCK_TOKENS, EngineProfile

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class EngineRun:
    """What one engine did with the requests it was given.

    Per request (input order; NaN for requests not finished by the end): ``ttft``, ``e2e``, ``queue`` (arrival
    to first scheduled), ``tpot`` (``(e2e - ttft) / (output - 1)``, as ``vllm bench serve`` reports it).
    ``itl_s`` / ``itl_weight``: every inter-token gap, as (value, count) pairs. Per step: start time, duration,
    running and waiting sequences, KV usage (0..1), tokens.
    """

    arrival: _F64
    prompt: _I64
    output: _I64
    ttft: _F64
    e2e: _F64
    queue: _F64
    itl_s: _F64
    itl_weight: _F64
    step_t: _F64
    step_dt: _F64
    step_running: _I64
    step_waiting: _I64
    step_kv: _F64
    step_tokens: _I64
    preemptions: int
    end_s: float

    @property
    def done(self) -> npt.NDArray[np.bool_]:
        """True for requests that finished."""
        out: npt.NDArray[np.bool_] = np.isfinite(self.e2e)
        return out

    @property
    def tpot(self) -> _F64:
        """Time per output token after the first, per finished request with more than one output token."""
        ok = self.done & (self.output > 1)
        out: _F64 = (self.e2e[ok] - self.ttft[ok]) / (self.output[ok] - 1)
        return out

    def itl_quantile(self, q: float) -> float:
        """The ``q`` quantile of all inter-token gaps (NaN without any)."""
        return weighted_quantile(self.itl_s, self.itl_weight, q)

    def throughput_rps(self) -> float:
        """Finished requests per second from the first arrival to the last completion."""
        done = self.done
        if not np.any(done):
            return 0.0
        span = float(np.nanmax(self.arrival[done] + self.e2e[done]) - self.arrival.min())
        return float(done.sum()) / span if span > 0 else math.inf


def weighted_quantile(values: _F64, weights: _F64, q: float) -> float:
    """The ``q`` quantile of ``values`` each counted ``weights`` times (NaN when the weights sum to 0)."""
    if values.size == 0 or not weights.sum() > 0:
        return math.nan
    order = np.argsort(values, kind="stable")
    cum = np.cumsum(weights[order])
    k = int(np.searchsorted(cum, q * cum[-1], side="left"))
    return float(values[order][min(k, values.size - 1)])


def run_engine(
    profile: EngineProfile,
    arrival: _F64,
    prompt: _I64,
    output: _I64,
    *,
    until_s: float | None = None,
) -> EngineRun:
    """Replay requests (sorted by ``arrival``) through one engine of ``profile`` (module docstring) until every
    request finished or the clock passes ``until_s``."""
    n = arrival.size
    if prompt.shape != (n,) or output.shape != (n,):
        raise ValueError("arrival, prompt and output must be 1-D arrays of the same length")
    if n and (np.any(np.diff(arrival) < 0) or np.any(prompt < 1) or np.any(output < 1)):
        raise ValueError("arrivals must be sorted and every request must have >= 1 prompt and output token")
    budget_max = profile.max_num_batched_tokens
    total_blocks = profile.kv_cache_blocks
    computed = np.zeros(n, dtype=np.int64)  # tokens whose KV is in the cache
    target = prompt.astype(np.int64).copy()  # tokens to compute before the next output token
    generated = np.zeros(n, dtype=np.int64)
    blocks = np.zeros(n, dtype=np.int64)
    last_token = np.full(n, np.nan)
    ttft, e2e, queue = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    waiting: deque[int] = deque()
    running: list[int] = []
    free = total_blocks
    preemptions = 0
    itl_s: list[float] = []
    itl_w: list[float] = []
    steps: list[tuple[float, float, int, int, float, int]] = []
    nxt = 0
    t = float(arrival[0]) if n else 0.0
    while True:
        while nxt < n and arrival[nxt] <= t + 1e-12:
            waiting.append(nxt)
            nxt += 1
        if until_s is not None and t >= until_s:
            break
        if not running and not waiting:
            if nxt >= n:
                break
            t = float(arrival[nxt])
            continue
        # 1. Decode tokens for every running sequence past its prefill; preempt the newest until they fit.
        while True:
            run = np.asarray(running, dtype=np.int64)
            decoding = run[computed[run] >= target[run]] if run.size else run
            need = int(np.count_nonzero(computed[decoding] >= blocks[decoding] * BLOCK_TOKENS))
            if need <= free or not running:
                break
            victim = running.pop()
            free += int(blocks[victim])
            blocks[victim] = 0
            computed[victim] = 0
            target[victim] = int(prompt[victim]) + int(generated[victim])
            waiting.appendleft(victim)
            preemptions += 1
        grow = decoding[computed[decoding] >= blocks[decoding] * BLOCK_TOKENS]
        blocks[grow] += 1
        free -= int(grow.size)
        budget = budget_max - int(decoding.size)
        chunks: dict[int, int] = {}
        # 2. Running prefills continue, then waiting requests join, while the budget and the KV cache allow.
        free = total_blocks - int(blocks.sum())
        for i in running:
            if budget <= 0:
                break
            if computed[i] < target[i]:
                granted = _grant(i, budget, free, computed, target, blocks, chunks)
                budget -= granted[0]
                free -= granted[1]
        while waiting and budget > 0 and len(running) < profile.max_num_seqs:
            i = waiting[0]
            chunk = min(int(target[i] - computed[i]), budget)
            extra = math.ceil((int(computed[i]) + chunk) / BLOCK_TOKENS) - int(blocks[i])
            if extra > free:
                break
            waiting.popleft()
            running.append(i)
            if math.isnan(queue[i]):
                queue[i] = t - float(arrival[i])
            blocks[i] += extra
            free -= extra
            chunks[i] = chunk
            budget -= chunk
        prefill_tokens = sum(chunks.values())
        tokens = int(decoding.size) + prefill_tokens
        if tokens == 0:  # nothing fits (a prompt larger than the free KV): wait for the next arrival or stop
            if nxt >= n:
                break
            t = max(t, float(arrival[nxt]))
            continue
        context = float(computed[decoding].sum())
        dt = profile.step_s(tokens, context)
        steps.append((t, dt, len(running), len(waiting), 1.0 - free / total_blocks, tokens))
        t += dt
        # 3. The step's outputs: one token per decoding sequence, a first (or resumed) token per finished prefill.
        if decoding.size:
            computed[decoding] += 1
            generated[decoding] += 1
            last_token[decoding] = t
            itl_s.append(dt)
            itl_w.append(float(decoding.size))
        for i, chunk in chunks.items():
            computed[i] += chunk
            if computed[i] >= target[i]:
                if generated[i] == 0:
                    ttft[i] = t - float(arrival[i])
                else:  # resumed after a preemption: this gap includes the wait and the recompute
                    itl_s.append(t - float(last_token[i]))
                    itl_w.append(1.0)
                generated[i] += 1
                last_token[i] = t
        finished = [i for i in running if generated[i] >= output[i]]
        for i in finished:
            e2e[i] = t - float(arrival[i])
            free += int(blocks[i])
            blocks[i] = 0
            running.remove(i)
        free = total_blocks - int(blocks.sum())
    table = np.asarray(steps, dtype=np.float64).reshape(-1, 6)
    return EngineRun(
        arrival=arrival.astype(np.float64),
        prompt=prompt.astype(np.int64),
        output=output.astype(np.int64),
        ttft=ttft,
        e2e=e2e,
        queue=queue,
        itl_s=np.asarray(itl_s, dtype=np.float64),
        itl_weight=np.asarray(itl_w, dtype=np.float64),
        step_t=table[:, 0],
        step_dt=table[:, 1],
        step_running=table[:, 2].astype(np.int64),
        step_waiting=table[:, 3].astype(np.int64),
        step_kv=table[:, 4],
        step_tokens=table[:, 5].astype(np.int64),
        preemptions=preemptions,
        end_s=t,
    )


def _grant(
    i: int, budget: int, free: int, computed: _I64, target: _I64, blocks: _I64, chunks: dict[int, int]
) -> tuple[int, int]:
    """Give running prefill ``i`` a chunk of at most ``budget`` tokens that its blocks plus ``free`` ones hold;
    (tokens granted, blocks taken). A prefill that gets no block waits for the next step."""
    room = (int(blocks[i]) + free) * BLOCK_TOKENS - int(computed[i])
    chunk = max(0, min(int(target[i] - computed[i]), budget, room))
    if chunk == 0:
        return 0, 0
    extra = max(0, math.ceil((int(computed[i]) + chunk) / BLOCK_TOKENS) - int(blocks[i]))
    blocks[i] += extra
    chunks[i] = chunk
    return chunk, extra


def poisson_arrivals(rate: float, duration_s: float, rng: np.random.Generator) -> _F64:
    """Arrival times of a Poisson process of ``rate`` per second over ``[0, duration_s)``."""
    if not rate > 0:
        return np.zeros(0)
    gaps = rng.exponential(1.0 / rate, size=int(rate * duration_s * 1.2) + 16)
    times = np.cumsum(gaps)
    out: _F64 = times[times < duration_s]
    return out
