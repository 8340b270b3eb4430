"""SLO bounds in the terms LLM operators state them: P99 TTFT, P99 inter-token latency, optionally P99 e2e.

``parse_slo("ttft=2s,itl=100ms")`` reads the ``--slo`` flag. A simulated minute is a violation minute when any
stated bound is broken in it: more than 1 % of the minute's requests (TTFT, e2e) or of its output tokens (ITL)
were slower than the bound. The defaults follow MLPerf Inference's LLM server scenario, which bounds the P99 of
TTFT (2 s for Llama 2 70B) and of TPOT (the per-token time); 100 ms per token is the chat-grade bound this
project uses (MLPerf's Llama 2 70B server bound is 200 ms, its interactive one 40 ms).
"""

from __future__ import annotations

from dataclasses import dataclass

from adapter.catalog import duration_seconds

BOUND_NAMES = ("ttft", "itl", "e2e")
DEFAULT_SLO = "ttft=2s,itl=100ms"


@dataclass(frozen=True)
class SloBounds:
    """P99 bounds in seconds; None where a bound is not stated. At least one is stated."""

    ttft_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None

    def __post_init__(self) -> None:
        values = [v for v in (self.ttft_s, self.itl_s, self.e2e_s) if v is not None]
        if not values:
            raise ValueError("an SLO needs at least one bound (ttft, itl or e2e)")
        if any(not v > 0 for v in values):
            raise ValueError("SLO bounds must be positive")

    @property
    def stated(self) -> dict[str, float]:
        """The stated bounds by name (``ttft``, ``itl``, ``e2e``), seconds."""
        out = {"ttft": self.ttft_s, "itl": self.itl_s, "e2e": self.e2e_s}
        return {k: v for k, v in out.items() if v is not None}

    def describe(self) -> str:
        """The flag form, e.g. ``ttft=2s,itl=0.1s``."""
        return ",".join(f"{k}={v:g}s" for k, v in self.stated.items())


def parse_slo(text: str) -> SloBounds:
    """``ttft=2s,itl=100ms[,e2e=30s]``: any subset, durations as in ``--duration``; ``ValueError`` names the
    bad part."""
    bounds: dict[str, float] = {}
    for part in text.split(","):
        name, sep, value = part.strip().partition("=")
        name = name.strip().lower()
        if not sep or name not in BOUND_NAMES:
            raise ValueError(f"--slo {text!r}: each part is NAME=DURATION with NAME one of {', '.join(BOUND_NAMES)}")
        if name in bounds:
            raise ValueError(f"--slo {text!r}: {name} given twice")
        try:
            seconds = float(value)
        except ValueError:
            try:
                seconds = duration_seconds(value.strip(), fractional=True)
            except ValueError:
                raise ValueError(f"--slo {text!r}: bad duration {value.strip()!r} (e.g. 2s, 100ms)") from None
        bounds[name] = seconds
    return SloBounds(ttft_s=bounds.get("ttft"), itl_s=bounds.get("itl"), e2e_s=bounds.get("e2e"))
