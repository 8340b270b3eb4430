"""Latency arithmetic the simulator shares: vLLM's e2e buckets, the SLO quantile, Prometheus' histogram quantile,
and Erlang C.

``histogram_quantile`` is what the observer (``adapter.sim.observer``) and the replay's per-minute P99 read from
the pods' histograms, as a dashboard would; ``erlang_c`` is the probability that an arrival waits in an
M/M/c queue, which the fast engine model (``adapter.sim.steady``) uses for the wait for a sequence slot near
saturation.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from adapter.sim.config import VLLM_E2E_LATENCY_BUCKETS

_F64 = npt.NDArray[np.float64]
UPPER: _F64 = np.asarray(VLLM_E2E_LATENCY_BUCKETS, dtype=np.float64)
SLO_QUANTILE = 0.99


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
