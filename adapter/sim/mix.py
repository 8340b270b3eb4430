"""Request mixes: how many prompt and output tokens the requests of a service carry.

A ``TokenMix`` is a per-request distribution: prompt and output lengths are independent lognormals with the
stated means and shapes, rounded to whole tokens and clipped to ``[1, max_tokens]``. Public traces publish
means (per-window sums divided by request counts) and describe the per-request distributions as long-tailed
(BurstGPT, Splitwise); the shapes here are this module's assumption, stated as such in docs/simulation.md.

``TokenMix.at(prompt_mean, output_mean)`` keeps the shapes and moves the means: what a trace with per-window
token sums gives for each window. ``moments()`` are computed on a fixed quantile grid, so the fast model
(``adapter.sim.steady``) and the step-level model (``adapter.sim.engine``, which samples) see the same mix.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import numpy.typing as npt

from adapter.sim.config import named

_F64 = npt.NDArray[np.float64]
_GRID = 512  # quantile points per length distribution


def _normal_ppf(p: _F64) -> _F64:
    """Standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9); numpy has none."""
    a = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02, 1.383577518672690e02,
         -3.066479806614716e01, 2.506628277459239e00)  # fmt: skip
    b = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02, 6.680131188771972e01,
         -1.328068155288572e01)  # fmt: skip
    c = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00, -2.549732539343734e00,
         4.374664141464968e00, 2.938163982698783e00)  # fmt: skip
    d = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00, 3.754408661907416e00)
    p = np.asarray(p, dtype=np.float64)
    out = np.empty_like(p)
    low, high = p < 0.02425, p > 1 - 0.02425
    mid = ~low & ~high
    q = p[mid] - 0.5
    r = q * q
    num = ((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]
    den = ((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0
    out[mid] = q * num / den
    for mask, sign, pp in ((low, 1.0, p[low]), (high, -1.0, 1.0 - p[high])):
        t = np.sqrt(-2.0 * np.log(pp))
        num = ((((c[0] * t + c[1]) * t + c[2]) * t + c[3]) * t + c[4]) * t + c[5]
        den = (((d[0] * t + d[1]) * t + d[2]) * t + d[3]) * t + 1.0
        out[mask] = sign * num / den
    return out


_Z_GRID = _normal_ppf((np.arange(_GRID) + 0.5) / _GRID)


@dataclass(frozen=True)
class TokenMix:
    """Independent lognormal prompt and output lengths (tokens) with these means and log-space shapes."""

    name: str
    prompt_mean: float
    output_mean: float
    prompt_sigma: float = 0.8
    output_sigma: float = 1.0
    max_tokens: int = 8192
    source: str = ""

    def __post_init__(self) -> None:
        if not (self.prompt_mean >= 1 and self.output_mean >= 1):
            raise ValueError(f"mix {self.name!r}: mean prompt and output lengths must be at least 1 token")
        if not (self.prompt_sigma >= 0 and self.output_sigma >= 0):
            raise ValueError(f"mix {self.name!r}: shapes must not be negative")
        if self.prompt_mean + self.output_mean > self.max_tokens:
            raise ValueError(f"mix {self.name!r}: mean request longer than max_tokens ({self.max_tokens})")

    def at(self, prompt_mean: float, output_mean: float) -> TokenMix:
        """The same shapes with other means (a trace window's own mix)."""
        return replace(self, prompt_mean=max(prompt_mean, 1.0), output_mean=max(output_mean, 1.0))

    def _lengths(self, mean: float, sigma: float, z: _F64) -> _F64:
        mu = math.log(mean) - sigma * sigma / 2.0
        out: _F64 = np.clip(np.rint(np.exp(mu + sigma * z)), 1.0, float(self.max_tokens))
        return out

    @cached_property
    def prompt_grid(self) -> _F64:
        """Prompt lengths at ``_GRID`` evenly spaced quantiles (ascending)."""
        return self._lengths(self.prompt_mean, self.prompt_sigma, _Z_GRID)

    @cached_property
    def output_grid(self) -> _F64:
        """Output lengths at ``_GRID`` evenly spaced quantiles (ascending)."""
        return self._lengths(self.output_mean, self.output_sigma, _Z_GRID)

    def sample(self, n: int, rng: np.random.Generator) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """``n`` requests' (prompt, output) lengths drawn at random."""
        zp, zo = rng.standard_normal(n), rng.standard_normal(n)
        prompts = self._lengths(self.prompt_mean, self.prompt_sigma, zp).astype(np.int64)
        outputs = self._lengths(self.output_mean, self.output_sigma, zo).astype(np.int64)
        return prompts, outputs

    def moments(self) -> dict[str, float]:
        """Means on the quantile grid: prompt, output, output^2 (for the KV a decoding sequence holds)."""
        p, o = self.prompt_grid, self.output_grid
        return {
            "prompt": float(p.mean()),
            "output": float(o.mean()),
            "output2": float((o * o).mean()),
            "prompt2": float((p * p).mean()),
        }


# The default mix: Azure LLM inference trace 2023, "conversation" service (Patel et al., Splitwise, ISCA 2024;
# github.com/Azure/AzurePublicDataset AzureLLMInferenceTrace_conv.csv): about 1,155 prompt and 211 output tokens
# per request on average (per-minute sums over the hour divided by the request count). A chat service, so a
# decode-heavy mix: the output lengths set the pod's concurrency. Shapes: this module's assumption.
AZURE_CONVERSATION = TokenMix(
    name="azure-conversation",
    prompt_mean=1155.0,
    output_mean=211.0,
    source="Azure LLM inference trace 2023, conversation (CC-BY-4.0): mean 1,155 prompt / 211 output tokens",
)
# The Azure 2023 "code" service (vendored in adapter/data/traces): ~2,048 prompt and ~28 output tokens.
AZURE_CODE = TokenMix(
    name="azure-code",
    prompt_mean=2048.0,
    output_mean=28.0,
    source="Azure LLM inference trace 2023, code (CC-BY-4.0): mean 2,048 prompt / 28 output tokens",
)
# The ShareGPT sample of vLLM's v0.6.0 benchmark (blog.vllm.ai/2024/09/05/perf-update.html): 202 in / 179 out.
SHAREGPT = TokenMix(
    name="sharegpt",
    prompt_mean=202.0,
    output_mean=179.0,
    max_tokens=1024,  # vLLM's benchmark drops ShareGPT prompts over 1,024 tokens (benchmarks/benchmark_dataset.py)
    source="vLLM v0.6.0 blog, ShareGPT",
)

MIXES: dict[str, TokenMix] = {m.name: m for m in (AZURE_CONVERSATION, AZURE_CODE, SHAREGPT)}
DEFAULT_MIX = AZURE_CONVERSATION.name


def mix(name: str) -> TokenMix:
    """The named mix (``ValueError`` listing the known names otherwise)."""
    return named(MIXES, name, "request mix")
