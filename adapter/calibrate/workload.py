"""What the history's pods saw besides the SLO: the token mix they served and how full their KV cache was.

The knee is a request rate, and a request rate means a capacity only for one mix: a pod serving 2,000-token
prompts and 28-token answers saturates at another rate than one serving chat. So the report states the mix the
knee was found on (mean prompt and output tokens per request, pooled over the history: vLLM's
``prompt_tokens_total`` and ``generation_tokens_total`` over the requests the SLO's histogram counted) and the
KV-cache usage (``kv_cache_usage_perc``, the bins' medians) at the safe point and at the knee, the signal the
LLM-specific autoscalers scale on. Pure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapter.calibrate.calibration import Calibration
from adapter.calibrate.knee import History


@dataclass(frozen=True)
class Workload:
    """The mix and KV usage of a history; None where the history has no such series (or the knee was not
    reached, for the values at the knee and the safe point)."""

    requests: float  # requests the pooled means are over
    prompt_mean: float | None
    output_mean: float | None
    kv_at_safe: float | None
    kv_at_knee: float | None
    kv_max: float | None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "requests": self.requests,
            "prompt_tokens_per_request": self.prompt_mean,
            "output_tokens_per_request": self.output_mean,
            "kv_cache_usage_at_safe": self.kv_at_safe,
            "kv_cache_usage_at_knee": self.kv_at_knee,
            "kv_cache_usage_max": self.kv_max,
        }

    def lines(self) -> list[str]:
        """The summary's lines (none when the history has neither series)."""
        out = []
        if self.prompt_mean is not None or self.output_mean is not None:
            prompt = "-" if self.prompt_mean is None else f"{self.prompt_mean:.4g}"
            output = "-" if self.output_mean is None else f"{self.output_mean:.4g}"
            out.append(
                f"mix seen: {prompt} prompt and {output} output tokens per request "
                f"(over {self.requests:.4g} requests); the knee holds for this mix"
            )
        if self.kv_max is not None:
            at = [
                f"{100 * v:.3g} % at the {where}"
                for where, v in (("safe point", self.kv_at_safe), ("knee", self.kv_at_knee))
                if v is not None
            ]
            out.append(f"KV cache usage: {', '.join([*at, f'{100 * self.kv_max:.3g} % at most'])}")
        return out


def _pooled(tokens: np.ndarray, requests: np.ndarray) -> tuple[float | None, float]:
    good = np.isfinite(tokens) & np.isfinite(requests)
    n = float(requests[good].sum())
    return (float(tokens[good].sum()) / n if n > 0 else None), n


def observed_workload(history: History, cal: Calibration) -> Workload:
    """The mix pooled over every row, the KV usage interpolated on the load bins (see the module docstring)."""
    prompt = output = None
    requests = float(np.nansum(history.requests))
    if history.prompt_tokens is not None:
        prompt, requests = _pooled(history.prompt_tokens, history.requests)
    if history.output_tokens is not None:
        output, requests = _pooled(history.output_tokens, history.requests)
    pts = sorted(
        (b.load, b.observed["kv_cache_usage"])
        for b in cal.bins
        if math.isfinite(b.observed.get("kv_cache_usage", math.nan))
    )

    def kv_at(load: float | None) -> float | None:
        if load is None or not pts or not pts[0][0] <= load <= pts[-1][0]:
            return None
        return float(np.interp(load, [p[0] for p in pts], [p[1] for p in pts]))

    kv = history.kv_usage
    kv_max = float(np.nanmax(kv)) if kv is not None and np.any(np.isfinite(kv)) else None
    return Workload(
        requests=requests * history.step_s,
        prompt_mean=prompt,
        output_mean=output,
        kv_at_safe=kv_at(cal.safe_rps),
        kv_at_knee=kv_at(cal.knee_rps),
        kv_max=kv_max,
    )
