"""Latency distributions of the what-if simulator: queueing before saturation, histogram quantiles, the knee.

A pod serving ``lam`` requests/s below its capacity ``mu`` still makes some requests wait: arrivals are
random (Poisson), so the batch is sometimes full while a request arrives. ``WaitModel`` is the standard
M/G/c approximation of that wait, with the pod's ``batch_slots`` as the ``c`` servers:

* the probability that an arrival waits is Erlang C, ``C(c, c rho)`` with ``rho = lam / mu`` (computed
  through the Erlang B recursion, numerically stable for any ``c``);
* a request that waits, waits an exponential time of mean ``k / (mu - lam)`` (exact for M/M/c), where
  ``k = (ca2 + cs2) / 2`` is the Allen-Cunneen correction for general arrivals and service: ``cs2`` is the
  squared coefficient of variation of the lognormal service time, ``exp(sigma^2) - 1``, ``ca2`` that of the
  inter-arrival times (1 for Poisson, the default; bursty clients have more).

So the wait grows smoothly as utilisation approaches 1 and diverges there, instead of the fluid model's
queue that forms only at exactly 100 % of capacity. The latency of a request is wait + lognormal service
time; ``stationary_cdf`` gives ``P(latency <= b)`` for each bound ``b`` by quadrature over the service time
(the waiting part's integrand vanishes at ``x = b``, so a fixed grid is accurate). ``knee_rate`` is the largest per-pod
arrival rate at which the P99 meets the SLO under this model: the oracle's and the right-sized start's
per-pod load, computed from the fleet model itself.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from adapter.sim.config import VLLM_E2E_LATENCY_BUCKETS, FleetConfig

_F64 = npt.NDArray[np.float64]
UPPER: _F64 = np.asarray(VLLM_E2E_LATENCY_BUCKETS, dtype=np.float64)
SLO_QUANTILE = 0.99
# Quadrature over the lognormal service time: +-5 sigma in 81 points (normal weights, renormalized).
_Z = np.linspace(-5.0, 5.0, 81)
_W = np.exp(-0.5 * _Z * _Z)
_W /= _W.sum()


def normal_cdf(z: _F64) -> _F64:
    """Standard normal CDF, vectorized: 0.5 * erfc(-z / sqrt(2)) with the Chebyshev-fitted erfc of
    Numerical Recipes (``erfcc``, fractional error below 1.2e-7 everywhere); numpy has no erf."""
    x = -np.asarray(z, dtype=np.float64) / math.sqrt(2.0)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * a)
    coeffs = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807, -1.13520398,
              1.48851587, -0.82215223, 0.17087277)  # fmt: skip
    poly = np.full_like(t, coeffs[-1])
    for c in coeffs[-2::-1]:
        poly = c + t * poly
    erfc = t * np.exp(-a * a + poly)
    erfc = np.where(x >= 0, erfc, 2.0 - erfc)
    out: _F64 = 0.5 * erfc
    return out


def histogram_quantile(q: float, upper: _F64, cumulative: _F64) -> _F64:
    """Prometheus ``histogram_quantile`` for each row of ``cumulative`` (prometheus/prometheus
    promql/quantile.go ``bucketQuantile``): linear interpolation inside the bucket holding rank
    ``q x count``; the upper bound of the last finite bucket when the rank falls in +Inf; NaN for an
    empty histogram. ``cumulative[:, i]`` counts observations <= ``upper[i]``; the last column is +Inf.
    """
    rows = cumulative.shape[0]
    n_finite = upper.size
    out = np.full(rows, np.nan)
    total = cumulative[:, -1]
    ok = total > 0
    if not np.any(ok):
        return out
    rank = q * total
    b = np.argmax(cumulative >= rank[:, None], axis=1)
    in_inf = b >= n_finite
    out[ok & in_inf] = upper[-1]
    finite = ok & ~in_inf
    if np.any(finite):
        r = np.flatnonzero(finite)
        bb = b[r]
        start = np.where(bb > 0, upper[np.maximum(bb - 1, 0)], 0.0)
        prev = np.where(bb > 0, cumulative[r, np.maximum(bb - 1, 0)], 0.0)
        count = cumulative[r, bb] - prev
        out[r] = start + (upper[bb] - start) * ((rank[r] - prev) / count)
    return out


def erlang_c(servers: int, rho: float) -> float:
    """Probability that an arrival waits in an M/M/``servers`` queue at utilisation ``rho`` (1 at rho >= 1)."""
    if rho <= 0.0:
        return 0.0
    if rho >= 1.0:
        return 1.0
    a = servers * rho
    b = 1.0
    for k in range(1, servers + 1):
        b = a * b / (k + a * b)
    return b / (1.0 - rho * (1.0 - b))


class WaitModel:
    """The M/G/c waiting time of a pod of ``config`` below capacity (module docstring), and the latency
    distribution it implies. ``arrival_cv2`` 1 is Poisson; ``enabled=False`` is the fluid model (no wait
    below capacity). Answers are cached per arrival rate (the trace holds a rate for whole minutes)."""

    def __init__(self, config: FleetConfig, *, arrival_cv2: float = 1.0, enabled: bool = True) -> None:
        if not (arrival_cv2 >= 0 and math.isfinite(arrival_cv2)):
            raise ValueError("arrival_cv2 must be a finite number >= 0")
        self.config = config
        self.enabled = enabled
        self.servers = max(1, round(config.batch_slots))
        self.cs2 = math.exp(config.latency_sigma**2) - 1.0
        self.k = (arrival_cv2 + self.cs2) / 2.0
        self._cache: dict[tuple[float, bytes], _F64] = {}

    def service_mean(self, lam: float) -> float:
        """Mean service time in the batch a pod holds at ``lam`` < capacity (``n / S(n) = lam``)."""
        cfg = self.config
        b, k, slots = cfg.base_service_s, cfg.batch_slowdown, cfg.batch_slots
        n = lam * b / (1.0 - lam * b * k / slots)
        return float(b * (1.0 + k * min(n / slots, 1.0)))

    def wait(self, lam: float) -> tuple[float, float]:
        """(probability of waiting, rate of the exponential wait of those who wait) at ``lam`` req/s."""
        mu = self.config.capacity_rps
        if not self.enabled or lam <= 0.0:
            return 0.0, math.inf
        if lam >= mu:
            return 1.0, 0.0
        return erlang_c(self.servers, lam / mu), (mu - lam) / self.k

    def mean_queue(self, lam: float) -> float:
        """Mean number waiting (Little: lam x mean wait), what ``vllm:num_requests_waiting`` averages."""
        p, theta = self.wait(lam)
        if p == 0.0:
            return 0.0
        return math.inf if theta == 0.0 else lam * p / theta

    def stationary_cdf(self, lam: float, bounds: _F64) -> _F64:
        """``P(latency <= b)`` for each of ``bounds`` at a steady ``lam`` < capacity (wait + service)."""
        key = (lam, bounds.tobytes())
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        sigma = self.config.latency_sigma
        mlog = math.log(self.service_mean(lam)) - sigma * sigma / 2.0
        x = np.exp(mlog + sigma * _Z)  # service-time quadrature points
        p, theta = self.wait(lam)
        gap = bounds[:, None] - x[None, :]
        inside = gap > 0.0
        positive = bounds > 0.0
        z = (np.log(np.where(positive, bounds, 1.0)) - mlog) / sigma
        served: _F64 = np.where(positive, normal_cdf(z), 0.0)  # P(service <= b), exact
        if p > 0.0:
            waited = np.where(inside, 1.0 - np.exp(-theta * np.where(inside, gap, 0.0)), 0.0)
            out: _F64 = (1.0 - p) * served + p * (waited * _W[None, :]).sum(axis=1)
        else:
            out = served
        if len(self._cache) > 4096:
            self._cache.clear()
        self._cache[key] = out
        return out

    def over_slo(self, lam: float, slo_s: float) -> float:
        """Share of requests slower than ``slo_s`` at a steady per-pod rate ``lam`` (1 at or above capacity)."""
        if lam >= self.config.capacity_rps:
            return 1.0
        return float(1.0 - self.stationary_cdf(lam, np.asarray([slo_s]))[0])


def knee_rate(model: WaitModel, slo_s: float, quantile: float = SLO_QUANTILE) -> float:
    """The largest per-pod arrival rate whose steady-state ``quantile`` latency meets ``slo_s`` (bisection:
    the share over the SLO grows with the rate). 0 when even an idle pod misses the SLO."""
    allowed = 1.0 - quantile
    mu = model.config.capacity_rps
    if model.over_slo(mu * 1e-6, slo_s) > allowed:
        return 0.0
    low, high = mu * 1e-6, mu
    for _ in range(50):
        mid = 0.5 * (low + high)
        if model.over_slo(mid, slo_s) <= allowed:
            low = mid
        else:
            high = mid
    return low
