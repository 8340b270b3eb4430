"""The fast model of one vLLM engine: its steady state at an arrival rate, for a request mix.

``adapter.sim.engine`` steps through every engine iteration; a 14-day fleet replay needs the answer per pod
and per minute instead. ``SteadyState(profile, mix).at(rate)`` gives it from the same step-cost model:

* **Step time.** With ``lam`` requests/s arriving, the engine processes ``lam (P + O)`` tokens/s and its
  decoding sequences read ``lam E[sum of their contexts]`` KV tokens/s, so the mean step ``t`` solves
  ``t = overhead + t lam w / u``: ``w`` is the per-request work (``token_s (P + O) + kv_read_s (P O + (O^2 -
  O) / 2)``) and ``u`` the share of time the engine is busy (``1 - exp(-running)``, ``running = lam (O + 1) t``
  by Little's law).
* **Capacity.** The engine saturates when the running sequences reach ``max_num_seqs`` or fill the KV cache
  (each holds ``P + E[O^2] / (2 E[O])`` tokens on average): ``lam_sat = N_max / (O overhead + N_max (w + r))``,
  ``r`` the recompute of the preemptions a full batch makes (below).
* **ITL.** A step carries the decode tokens of the running sequences plus the prompts that arrived during the
  previous step (a compound Poisson sum over the mix's prompts, capped at ``max_num_batched_tokens``), or a
  full budget of queued prompt tokens when the prefill backlog outlasted the previous step too (probability
  ``rho^2 P(W > one full step)``, the M/G/1 backlog of the TTFT below); the ITL distribution is that of the step
  time.
* **TTFT.** Time to the end of the current step, the prefill step(s) of the request's own prompt (chunked
  when it does not fit the step's budget), and, near saturation, the wait for a free sequence slot: the
  M/G/c wait with ``c = N_max`` (``adapter.sim.latency.erlang_c`` with the Allen-Cunneen correction for the
  output lengths' spread).
* **e2e** = TTFT + (output - 1) x the mean step; ``prefill_s`` and ``decode_s`` split it as vLLM's histograms do.
* **Preemptions.** The batch is full (every slot the cache allows taken) with the Erlang C probability of the
  running sequences, and always within 1 % of saturation. While it is full, a KV-bound engine evicts
  ``preempted_full`` sequences per served request (a fit to the step-level model, ``_PREEMPT_*``); one capped by
  ``max_num_seqs`` only when the contexts of a full batch overflow the cache (a normal tail). Each victim is
  recomputed, mostly its prompt: that work (``recompute_s`` per request) lowers the saturation throughput and
  lengthens the step in proportion to the full share.

The distributions are Monte Carlo over a fixed seed (``_SAMPLES`` draws), so answers are deterministic and cached
per rate. ``tests/sim/test_steady.py`` checks them against the step-level model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from adapter.sim.latency import erlang_c
from adapter.sim.mix import TokenMix
from adapter.sim.profiles import EngineProfile

_F64 = npt.NDArray[np.float64]
_SAMPLES = 4096
_CACHED_POINTS = 256  # operating points kept per model: 6 x 4096 samples each, 48 MiB in all
_KV_HEADROOM = 0.97  # the KV usage at which preemptions start in a steady batch (blocks are partly filled)
# Evictions per served request while the batch is full: 0.24 (O / 1000)^1.2 (P / 1000)^0.4 for mean output O and
# prompt P tokens, a least-squares fit to the step-level model (adapter.sim.engine) at 1.2 x saturation over both
# profiles and prompts of 1,500-6,000 x outputs of 150-800 tokens (22 points, most within 30 %).
_PREEMPT_SCALE = 0.24
_PREEMPT_OUTPUT_EXP = 1.2
_PREEMPT_PROMPT_EXP = 0.4


@dataclass(frozen=True)
class OperatingPoint:
    """One engine's steady state at ``rate`` requests/s (``served`` = completions/s, below ``rate`` when
    saturated; ``preempted`` = preemptions per served request). Sorted sample arrays, per request (``ttft_s``,
    ``e2e_s``, ``queue_s``: the time waiting before the first prefill chunk; ``prefill_s`` = TTFT - queue, from the
    step the request arrives in to its first token; ``decode_s`` = e2e - TTFT, first token to last) and per decode
    step (``itl_s``)."""

    rate: float
    served: float
    preempted: float
    saturated: bool
    step_s: float
    running: float
    kv_usage: float
    busy: float
    ttft_s: _F64
    itl_s: _F64
    e2e_s: _F64
    queue_s: _F64
    prefill_s: _F64
    decode_s: _F64

    def ttft_quantile(self, q: float) -> float:
        """The ``q`` quantile of TTFT (seconds)."""
        return float(np.quantile(self.ttft_s, q))

    def itl_quantile(self, q: float) -> float:
        """The ``q`` quantile of the inter-token latency (seconds)."""
        return float(np.quantile(self.itl_s, q))

    @staticmethod
    def over(samples: _F64, bound_s: float, extra_s: _F64) -> _F64:
        """Per entry of ``extra_s``: the share of ``samples`` (sorted) shifted by it that is above ``bound_s``."""
        below = np.searchsorted(samples, bound_s - extra_s, side="right")
        out: _F64 = 1.0 - below / samples.size
        return out


class SteadyState:
    """The fast model (module docstring) of an engine of ``profile`` serving ``mix``."""

    def __init__(self, profile: EngineProfile, mix: TokenMix) -> None:
        self.profile = profile
        self.mix = mix
        m = mix.moments()
        self._p, self._o, self._o2 = m["prompt"], m["output"], m["output2"]
        pr = profile
        self.work_s = pr.token_s * (self._p + self._o) + pr.kv_read_s * (self._p * self._o + (self._o2 - self._o) / 2.0)
        self.context_per_seq = self._p + self._o2 / (2.0 * self._o)
        kv_limit = _KV_HEADROOM * pr.kv_cache_tokens / self.context_per_seq
        self.max_running = float(min(pr.max_num_seqs, kv_limit))
        self.preempted_full, self.recompute_s = self._preemption(kv_limit < pr.max_num_seqs)
        self._cache: dict[float, OperatingPoint] = {}

    def _preemption(self, kv_bound: bool) -> tuple[float, float]:
        """(evictions per served request, recompute seconds per served request) while the batch is full."""
        pr = self.profile
        if kv_bound:
            overflow = 1.0  # a full batch is a full cache
        else:  # a full batch of max_num_seqs overflows the cache only when its contexts are long ones
            o = self.mix.output_grid
            p_var = float(self.mix.prompt_grid.var())
            age2 = float((o**3).mean()) / (3.0 * self._o)
            age_var = age2 - (self._o2 / (2.0 * self._o)) ** 2
            n = pr.max_num_seqs
            z = (pr.kv_cache_tokens - n * self.context_per_seq) / math.sqrt(n * (p_var + age_var))
            overflow = 0.5 * math.erfc(z / math.sqrt(2.0))
        per_request = (
            overflow
            * _PREEMPT_SCALE
            * (self._o / 1000.0) ** _PREEMPT_OUTPUT_EXP
            * (self._p / 1000.0) ** _PREEMPT_PROMPT_EXP
        )
        if per_request < 1e-6:  # not one eviction in a million requests: none (and no Erlang C per step time)
            return 0.0, 0.0
        # The victim is the newest sequence, mostly its prompt, of which a step holds at most the budget's room.
        room = max(pr.max_num_batched_tokens - self.max_running, 1.0)
        freed = float(np.minimum(self.mix.prompt_grid, room).mean())
        return per_request, per_request * freed * pr.token_s

    @cached_property
    def saturation_rps(self) -> float:
        """Requests/s one engine completes at most with this mix."""
        n = self.max_running
        return n / (self._o * self.profile.overhead_s + n * (self.work_s + self.recompute_s))

    @cached_property
    def saturation_tokens_s(self) -> float:
        """Prompt plus output tokens/s at saturation."""
        return self.saturation_rps * (self._p + self._o)

    def step_time(self, rate: float) -> tuple[float, float, float]:
        """(mean step s, running sequences, busy share) at ``rate`` < saturation."""
        t, running, u, _ = self._steady(rate)
        return t, running, u

    def _steady(self, rate: float) -> tuple[float, float, float, float]:
        """(mean step s, running sequences, busy share, probability that the batch is full) at ``rate``."""
        c0 = self.profile.overhead_s
        sat = self.saturation_rps
        lam = min(rate, sat)
        c = max(1, int(self.max_running))
        # Within 1 % of saturation (the rounding ``at`` caches by) the batch is full, the fixed point
        # ``saturation_rps`` assumes; below, the iteration starts from a full batch and settles where the Erlang C of
        # the running sequences does.
        pinned = self.preempted_full > 0 and rate >= sat * (1.0 - 1e-2)
        u, full = 1.0, (1.0 if self.preempted_full > 0 else 0.0)
        t = c0
        for _ in range(30):
            denom = 1.0 - lam * (self.work_s + full * self.recompute_s) / u
            t = c0 / denom if denom > 1e-6 else c0 / 1e-6
            running = lam * (self._o + 1.0) * t
            u_new = max(1.0 - math.exp(-running), 1e-3)
            full_new = full if pinned or full == 0.0 else erlang_c(c, min(running / c, 1.0))
            if abs(u_new - u) < 1e-9 and abs(full_new - full) < 1e-9:
                break
            u = 0.5 * (u + u_new)
            full = full_new
        running = min(lam * (self._o + 1.0) * t, self.max_running)
        return t, running, u, full

    def at(self, rate: float) -> OperatingPoint:
        """The operating point at ``rate`` requests/s (cached; rates are rounded to 3 significant digits)."""
        if not (rate >= 0 and math.isfinite(rate)):
            raise ValueError(f"rate must be finite and >= 0, got {rate}")
        key = float(f"{rate:.3g}")
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        point = self._solve(key)
        if len(self._cache) >= _CACHED_POINTS:
            self._cache.clear()
        self._cache[key] = point
        return point

    def _solve(self, rate: float) -> OperatingPoint:
        pr = self.profile
        sat = self.saturation_rps
        lam = min(rate, sat)
        t, running, busy, full = self._steady(rate)
        rng = np.random.default_rng(0)
        grid_p, grid_o = self.mix.prompt_grid, self.mix.output_grid
        budget = float(pr.max_num_batched_tokens)
        n_dec = min(running, budget - 1.0)
        context = n_dec * self.context_per_seq
        # ITL: prompts arriving during the previous step are prefilled in this one (capped at the budget).
        arrivals = rng.poisson(lam * t, _SAMPLES)  # Poisson arrivals see time averages: lam t per step
        x = _compound(arrivals, grid_p, rng)
        room = max(budget - n_dec, 1.0)
        # A step is full when the prompts queued ahead exceed its budget and did in the step before (rho^2).
        rho, mean_if_wait, per_token = self._prefill_queue(lam, room, context)
        p_full = rho * rho * math.exp(-room * per_token / mean_if_wait) if rho > 0 else 0.0
        x = np.where(rng.random(_SAMPLES) < p_full, room, np.minimum(x, room))
        itl = pr.overhead_s + pr.token_s * (n_dec + x) + pr.kv_read_s * context
        # TTFT: rest of the current step, own prefill (with the other prompts of that step), slot wait.
        own = grid_p[rng.integers(0, grid_p.size, _SAMPLES)]
        others = _compound(rng.poisson(lam * t, _SAMPLES), grid_p, rng)
        chunks = np.ceil((own + others) / room)
        prefill = chunks * (pr.overhead_s + pr.kv_read_s * context) + pr.token_s * (own + others + n_dec * chunks)
        residual = rng.random(_SAMPLES) * itl[rng.integers(0, _SAMPLES, _SAMPLES)] * (busy if lam > 0 else 0.0)
        wait = self._slot_wait(lam, t, rng) + self._prefill_wait(lam, room, context, rng)
        ttft = residual + prefill + wait
        out = grid_o[rng.integers(0, grid_o.size, _SAMPLES)]
        decode = (out - 1.0) * float(itl.mean())
        e2e = ttft + decode
        return OperatingPoint(
            rate=rate,
            served=lam,
            preempted=full * self.preempted_full,
            saturated=rate >= sat,
            step_s=float(itl.mean()),
            running=running,
            kv_usage=min(running * self.context_per_seq / pr.kv_cache_tokens, 1.0),
            busy=busy,
            ttft_s=np.sort(ttft),
            itl_s=np.sort(itl),
            e2e_s=np.sort(e2e),
            queue_s=np.sort(wait),
            prefill_s=np.sort(residual + prefill),
            decode_s=np.sort(decode),
        )

    def _prefill_queue(self, lam: float, room: float, context: float) -> tuple[float, float, float]:
        """(utilisation, mean wait of those who wait, seconds per prompt token) of the prefill budget as an
        M/G/1 server of prompt tokens (a full step serves ``room`` of them; Pollaczek-Khinchine)."""
        pr = self.profile
        per_token = (pr.overhead_s + pr.token_s * pr.max_num_batched_tokens + pr.kv_read_s * context) / room
        m = self.mix.moments()
        rho = min(lam * m["prompt"] * per_token, 1.0 - 1e-6)
        mean_if_wait = per_token * m["prompt2"] / (2.0 * m["prompt"]) / (1.0 - rho)
        return rho, mean_if_wait, per_token

    def _prefill_wait(self, lam: float, room: float, context: float, rng: np.random.Generator) -> _F64:
        """Samples of the wait behind other prompts: the prefill budget is an M/G/1 server of prompt tokens
        (a full step serves ``room`` of them), waits exponential with the Pollaczek-Khinchine mean."""
        rho, mean_if_wait, _ = self._prefill_queue(lam, room, context)
        if rho <= 0:
            return np.zeros(_SAMPLES)
        waits = rng.exponential(mean_if_wait, _SAMPLES)
        out: _F64 = np.where(rng.random(_SAMPLES) < rho, waits, 0.0)
        return out

    def _slot_wait(self, lam: float, t: float, rng: np.random.Generator) -> _F64:
        """Samples of the wait for a sequence slot: M/G/c with c = N_max (0 far from saturation)."""
        c = max(1, int(self.max_running))
        hold = (self._o + 1.0) * t  # a sequence occupies its slot for its prefill step and its decode steps
        rho = lam * hold / c
        if rho <= 0:
            return np.zeros(_SAMPLES)
        if rho >= 1.0:
            rho = 1.0 - 1e-6
        p_wait = erlang_c(c, rho)
        cs2 = self._o2 / (self._o * self._o) - 1.0
        mean_if_wait = (1.0 + cs2) / 2.0 * hold / (c * (1.0 - rho))
        waits = rng.exponential(mean_if_wait, _SAMPLES)
        out: _F64 = np.where(rng.random(_SAMPLES) < p_wait, waits, 0.0)
        return out

    def knee_rps(self, bounds: dict[str, float], quantile: float = 0.99) -> float:
        """The largest rate at which every bound holds at ``quantile`` (keys ``ttft``, ``itl``, ``e2e``; seconds).
        0 when an idle engine already misses one."""

        def ok(rate: float) -> bool:
            point = self.at(rate)
            samples = {"ttft": point.ttft_s, "itl": point.itl_s, "e2e": point.e2e_s}
            return all(float(np.quantile(samples[k], quantile)) <= v for k, v in bounds.items())

        low, high = self.saturation_rps * 1e-4, self.saturation_rps * (1.0 - 1e-6)
        if not ok(low):
            return 0.0
        if ok(high):
            return high
        for _ in range(30):
            mid = 0.5 * (low + high)
            if ok(mid):
                low = mid
            else:
                high = mid
        return low


def _compound(counts: npt.NDArray[np.int64], grid: _F64, rng: np.random.Generator) -> _F64:
    """Per entry of ``counts``, the sum of that many lengths drawn from ``grid``."""
    total = int(counts.sum())
    out = np.zeros(counts.size)
    if total == 0:
        return out
    draws = grid[rng.integers(0, grid.size, total)]
    owner = np.repeat(np.arange(counts.size), counts)
    np.add.at(out, owner, draws)
    return out
