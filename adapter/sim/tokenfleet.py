"""The simulator's physics: a fleet of token-level vLLM engines (``simulate``, ``calibrate --simulate``, the demo).

``TokenEngine`` is the physics one replay shares: an engine profile, the default request mix, the SLO bounds,
and the fast model of each mix a trace window asks for (``adapter.sim.steady``, cached by the mix's means,
rounded to 1 %). ``knee(mix)`` is the largest per-pod load of that mix at which every stated bound holds.

``TokenFleet`` serves on ``adapter.sim.lifecycle.PodLifecycle``'s pods, scaling, GPU pool and ledger, per piece of
constant load: a ready pod at ``lam`` requests/s below the mix's saturation serves them in the steady
state ``SteadyState.at(lam)``; at or above saturation (or while it still has a backlog) it completes the
saturation rate, the excess queues (up to ``max_queue``, the rest is dropped), and a request waits the backlog
ahead of it on top of the saturated engine's TTFT. Per minute the ledger counts, per stated bound, the requests
(TTFT, e2e) or output tokens (ITL) above the bound; ``over_slo`` holds the completions times the worst bound's
share, so a minute violates the SLO when any bound is broken. The pods' e2e histograms (vLLM's buckets) and
their running sequences feed the observer (``adapter.sim.observer``). With ``families``, each pod also counts vLLM's
other families, its preemptions among them (the operating point's preemptions per completed request).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from adapter.sim.config import Deployment, FleetConfig
from adapter.sim.latency import SLO_QUANTILE
from adapter.sim.latency import UPPER as _UPPER
from adapter.sim.lifecycle import MINUTE_S, GpuPool, PodLifecycle
from adapter.sim.mix import TokenMix
from adapter.sim.profiles import EngineProfile
from adapter.sim.slo import SloBounds
from adapter.sim.steady import OperatingPoint, SteadyState
from adapter.sim.vllm_families import HISTOGRAM_BOUNDS, EngineCounters

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_EPS = 1e-9
_CACHED_MODELS = 16
TOKEN_LATENCY_FAMILIES = {"ttft": "vllm:time_to_first_token_seconds", "itl": "vllm:inter_token_latency_seconds"}
_FAMILY_UPPER = {name: np.asarray(bounds, dtype=np.float64) for name, bounds in HISTOGRAM_BOUNDS.items()}


@dataclass
class TokenEngine:
    """The token-level physics of a replay (module docstring). Picklable: caches are rebuilt per process."""

    profile: EngineProfile
    mix: TokenMix
    slo: SloBounds
    _models: dict[tuple[int, int], SteadyState] = field(default_factory=dict, repr=False)
    _knees: dict[tuple[int, int], float] = field(default_factory=dict, repr=False)

    @staticmethod
    def _key(prompt_mean: float, output_mean: float) -> tuple[int, int]:
        return round(math.log(max(prompt_mean, 1.0)) * 100), round(math.log(max(output_mean, 1.0)) * 100)

    def model(self, prompt_mean: float | None = None, output_mean: float | None = None) -> SteadyState:
        """The fast model for a window's mix (the default mix's shapes at these means; None: the default)."""
        p = self.mix.prompt_mean if prompt_mean is None else prompt_mean
        o = self.mix.output_mean if output_mean is None else output_mean
        key = self._key(p, o)
        hit = self._models.get(key)
        if hit is None:
            if len(self._models) >= _CACHED_MODELS:
                self._models.clear()  # a trace with many mixes: keep memory bounded (32 MiB a model)
            means = math.exp(key[0] / 100.0), math.exp(key[1] / 100.0)
            mix = self.mix if (prompt_mean is None and output_mean is None) else self.mix.at(*means)
            hit = self._models[key] = SteadyState(self.profile, mix)
        return hit

    def knee(self, prompt_mean: float | None = None, output_mean: float | None = None) -> float:
        """Per-pod requests/s of this mix at which every stated bound holds at P99."""
        model = self.model(prompt_mean, output_mean)
        key = self._key(model.mix.prompt_mean, model.mix.output_mean)
        hit = self._knees.get(key)
        if hit is None:
            hit = self._knees[key] = model.knee_rps(self.slo.stated, SLO_QUANTILE)
        return hit

    def fleet_config(self, *, deployment: Deployment, load_delay_s: tuple[float, float], drain_timeout_s: float,
                     seed: int) -> FleetConfig:  # fmt: skip
        """The ``FleetConfig`` of pods running this engine: its GPUs and weights, its saturation at the default mix."""
        model = self.model()
        sat = model.saturation_rps
        return FleetConfig(
            deployment=deployment,
            gpus_per_pod=self.profile.gpus,
            gpus_per_node=8,
            capacity_rps=sat,
            load_delay_s=load_delay_s,
            drain_timeout_s=drain_timeout_s,
            model_weights_mib=self.profile.weights_gib * 1024.0,
            seed=seed,
        )

    def describe(self) -> dict[str, object]:
        """The engine, mix and SLO as the report's ``inputs`` show them."""
        model = self.model()
        return {
            "engine": "token",
            "profile": self.profile.name,
            "model_name": self.profile.model_name,
            "gpus_per_pod": self.profile.gpus,
            "kv_cache_tokens": self.profile.kv_cache_tokens,
            "max_num_seqs": self.profile.max_num_seqs,
            "max_num_batched_tokens": self.profile.max_num_batched_tokens,
            "step_cost": {
                "overhead_s": self.profile.overhead_s,
                "token_s": self.profile.token_s,
                "kv_read_s": self.profile.kv_read_s,
            },
            "mix": {
                "name": self.mix.name,
                "prompt_mean": self.mix.prompt_mean,
                "output_mean": self.mix.output_mean,
                "prompt_sigma": self.mix.prompt_sigma,
                "output_sigma": self.mix.output_sigma,
            },
            "saturation_rps_per_pod": model.saturation_rps,
            "saturation_tokens_s_per_pod": model.saturation_tokens_s,
        }


class TokenFleet(PodLifecycle):
    """``PodLifecycle``'s pods serving with the token-level model of ``engine`` (module docstring)."""

    def __init__(
        self,
        engine: TokenEngine,
        config: FleetConfig,
        *,
        replicas: int,
        start: float,
        end: float,
        pool: GpuPool | None = None,
        families: bool | frozenset[str] = False,
    ) -> None:
        self._families: dict[str, _F64] | None = None
        # True: every vLLM family (the demo's exporter); a set: only those histograms (what a replay's HPA reads)
        self._counted = frozenset(HISTOGRAM_BOUNDS) if families is True else frozenset(families or ())
        super().__init__(config, replicas=replicas, start=start, end=end, pool=pool)
        self.engine = engine
        self._model = engine.model()
        minutes = self.ledger.arrivals.size
        self.bound_over = {k: np.zeros(minutes) for k in engine.slo.stated}
        self.bound_base = {k: np.zeros(minutes) for k in engine.slo.stated}
        self.output_tokens = np.zeros(minutes)
        if families:
            self._families = self._zero_families(self._ids.size)

    @staticmethod
    def _zero_families(pods: int) -> dict[str, _F64]:
        out = {name: np.zeros((pods, len(bounds) + 1)) for name, bounds in HISTOGRAM_BOUNDS.items()}
        # per pod: the histograms' sums, then prompt tokens, generation tokens, preemptions
        out["sums"] = np.zeros((pods, len(HISTOGRAM_BOUNDS) + 3))
        return out

    def set_replicas(self, n: int, now: float) -> None:
        """``PodLifecycle.set_replicas``; vLLM's per-pod counters (``families``) follow their pods."""
        before = self._ids.copy()
        super().set_replicas(n, now)
        if self._families is None:
            return
        fresh = self._zero_families(self._ids.size)
        if before.size == 0:
            self._families = fresh
            return
        pos = np.minimum(np.searchsorted(before, self._ids), before.size - 1)
        found = before[pos] == self._ids  # ids ascend (creation order): kept pods keep their counters
        for key, old in self._families.items():
            fresh[key][found] = old[pos[found]]
        self._families = fresh

    def engine_counters(self) -> list[EngineCounters]:
        """vLLM's counters and gauges per pod (``ids`` order); needs ``families=True``."""
        if self._families is None:
            raise ValueError("this fleet was built without families=True")
        fam = self._families
        names = list(HISTOGRAM_BOUNDS)
        usage = self.kv_cache_usage
        out = []
        for row in range(self._ids.size):
            sums = fam["sums"][row]
            out.append(
                EngineCounters(
                    running=float(self._n[row]),
                    waiting=float(self.queue_depth[row]),
                    kv_cache_usage=float(usage[row]),
                    preemptions=float(sums[len(names) + 2]),
                    prompt_tokens=float(sums[len(names)]),
                    generation_tokens=float(sums[len(names) + 1]),
                    success=float(fam["vllm:e2e_request_latency_seconds"][row, -1]),
                    histograms={name: (fam[name][row].copy(), float(sums[k])) for k, name in enumerate(names)},
                )
            )
        return out

    def _count_families(self, idx: _I64, done: _F64, point: OperatingPoint, extra: _F64) -> None:
        """Add completions to vLLM's per-pod histograms, token counters and preemptions (the operating point's
        evictions per served request)."""
        fam = self._families
        if fam is None:
            return
        mix = self._model.mix
        tokens = done * mix.output_mean
        # The wait behind a backlog is spent WAITING: it adds to queue, TTFT and e2e, not to prefill or decode.
        none = np.zeros_like(extra)
        draws = {
            "vllm:time_to_first_token_seconds": (point.ttft_s, extra, done),
            "vllm:inter_token_latency_seconds": (point.itl_s, none, tokens),
            "vllm:e2e_request_latency_seconds": (point.e2e_s, extra, done),
            "vllm:request_queue_time_seconds": (point.queue_s, extra, done),
            "vllm:request_prefill_time_seconds": (point.prefill_s, none, done),
            "vllm:request_decode_time_seconds": (point.decode_s, none, done),
        }
        for k, name in enumerate(HISTOGRAM_BOUNDS):  # the order of the per-pod sums
            samples, shift, weight = draws[name]
            if name not in self._counted:
                continue
            bounds = _FAMILY_UPPER[name]
            if shift.any():
                below = np.searchsorted(samples, bounds[None, :] - shift[:, None], side="right") / samples.size
            else:  # no backlog: every pod's requests see the same distribution
                below = (np.searchsorted(samples, bounds, side="right") / samples.size)[None, :]
            fam[name][idx, :-1] += weight[:, None] * below
            fam[name][idx, -1] += weight
            fam["sums"][idx, k] += weight * (float(samples.mean()) + shift)
        fam["sums"][idx, len(HISTOGRAM_BOUNDS)] += done * mix.prompt_mean
        fam["sums"][idx, len(HISTOGRAM_BOUNDS) + 1] += tokens
        fam["sums"][idx, len(HISTOGRAM_BOUNDS) + 2] += done * point.preempted

    def set_mix(self, prompt_mean: float | None, output_mean: float | None) -> None:
        """The mix of the requests arriving from now on (None: the engine's default mix)."""
        self._model = self.engine.model(prompt_mean, output_mean)

    def latency_histograms(self) -> dict[str, tuple[_F64, _F64]]:
        """The e2e histogram, plus vLLM's TTFT and ITL histograms when built with ``families``."""
        out = super().latency_histograms()
        if self._families is not None:
            for key, name in TOKEN_LATENCY_FAMILIES.items():
                if name in self._counted:
                    out[key] = (_FAMILY_UPPER[name], self._families[name])
        return out

    @property
    def kv_cache_usage(self) -> _F64:
        """KV usage per pod: the running sequences' mean context over the cache's tokens (0..1)."""
        held = self._n * self._model.context_per_seq / self.engine.profile.kv_cache_tokens
        out: _F64 = np.minimum(held, 1.0)
        return out

    @property
    def saturation_rps(self) -> float:
        """Per-pod saturation of the current mix."""
        return self._model.saturation_rps

    def bound_minutes(self) -> dict[str, npt.NDArray[np.bool_]]:
        """Per stated bound, the minutes in which it was broken (dropped requests count against every bound)."""
        led = self.ledger
        out: dict[str, npt.NDArray[np.bool_]] = {}
        for k in self.bound_over:
            base = self.bound_base[k] + led.dropped * (self._model.mix.output_mean if k == "itl" else 1.0)
            bad = self.bound_over[k] + led.dropped * (self._model.mix.output_mean if k == "itl" else 1.0)
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.where(base > 0, bad / np.where(base > 0, base, 1.0), 0.0)
            out[k] = share > 1.0 - SLO_QUANTILE + 1e-12
        return out

    def _book_point(self, m: int, idx: _I64, done: _F64, point: OperatingPoint, extra: _F64) -> None:
        """Book ``done`` completions per pod ``idx`` from ``point``, each having waited ``extra`` s more."""
        led = self.ledger
        total = float(done.sum())
        if total <= 0:
            return
        tokens = total * self._model.mix.output_mean
        self.output_tokens[m] += tokens
        stated = self.engine.slo.stated
        for k, bound in stated.items():
            if k == "itl":
                share = float(OperatingPoint.over(point.itl_s, bound, np.zeros(1))[0])
                self.bound_over[k][m] += tokens * share
                self.bound_base[k][m] += tokens
            else:
                samples = point.ttft_s if k == "ttft" else point.e2e_s
                self.bound_over[k][m] += float(np.sum(done * OperatingPoint.over(samples, bound, extra)))
                self.bound_base[k][m] += total
        # The e2e histogram vLLM exports, per pod and per minute.
        below = np.searchsorted(point.e2e_s, _UPPER[None, :] - extra[:, None], side="right") / point.e2e_s.size
        per_pod = done[:, None] * below
        self._cum[idx, :-1] += per_pod
        self._cum[idx, -1] += done
        led.completions[m] += total
        led.buckets[m] += np.diff(np.concatenate(([0.0], per_pod.sum(axis=0), [total])))
        self._count_families(idx, done, point, extra)
        worst = 0.0
        for k in stated:
            base = self.bound_base[k][m]
            if base > 0:
                worst = max(worst, self.bound_over[k][m] / base)
        led.over_slo[m] = led.completions[m] * worst

    def _flow(self, a: float, b: float, rate: float) -> None:
        d = b - a
        m, idx = self._open_piece(a, b, rate)
        led = self.ledger
        if idx.size == 0:
            return
        model = self._model
        mu, qmax = model.saturation_rps, self.config.max_queue
        lam = rate / idx.size
        q0 = self._q[idx]
        raw = q0 + (lam - mu) * d
        q_end = np.clip(raw, 0.0, qmax)
        dropped = np.maximum(raw - qmax, 0.0)
        done = np.maximum(lam * d + q0 - q_end - dropped, 0.0)
        backlog = (q0 > _EPS) | (lam >= mu)
        steady = model.at(lam) if lam < mu else model.at(mu * (1.0 - 1e-6))
        if np.any(~backlog):
            self._book_point(m, idx[~backlog], done[~backlog], steady, np.zeros(int((~backlog).sum())))
        if np.any(backlog):
            saturated = model.at(mu * (1.0 - 1e-6))
            wait = 0.5 * (q0[backlog] + q_end[backlog]) / mu
            self._book_point(m, idx[backlog], done[backlog], saturated, wait)
        led.dropped[m] += float(dropped.sum())
        led.max_waiting[m] = max(led.max_waiting[m], float(max(q0.sum(), q_end.sum())))
        self._q[idx] = q_end
        self._n[idx] = np.where(q_end > 0, model.max_running, steady.running)

    def _drain(self, idx: _I64) -> None:
        """Deleted ready pods finish their backlog at saturation (up to the drain timeout) and the requests in
        flight (one decode span); what does not fit in the timeout is lost."""
        model = self._model
        mu = model.saturation_rps
        m = self.minute(self.now)
        timeout = self.config.drain_timeout_s
        q0 = self._q[idx]
        served = np.minimum(q0, mu * timeout)
        self.ledger.dropped[m] += float((q0 - served).sum())
        point = model.at(mu * (1.0 - 1e-6))
        tail = model.mix.output_mean * model.at(0.0).step_s
        self.ledger.pod_seconds[m] += float(np.sum(np.minimum(q0 / mu + tail, timeout)))
        if float(served.sum()) > 0:
            self._book_point(m, idx, served, point, 0.5 * served / mu)


def oracle_gpu_hours_by_mix(arrivals_per_s: _F64, knees: _F64, saturation: _F64, gpus_per_pod: int) -> float:
    """GPU-hours of the clairvoyant when each minute's knee depends on that minute's mix: ``ceil(rate / knee)``
    pods, or at saturation in a minute whose mix misses a bound even on an idle pod (knee 0)."""
    per_pod = np.where(knees > 0, knees, saturation)
    pods = np.ceil(np.maximum(arrivals_per_s, 0.0) / per_pod - 1e-9)
    return float(pods.sum()) * MINUTE_S / 3600.0 * gpus_per_pod
