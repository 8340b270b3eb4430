"""The real LLM request-rate trace (ServeGen m-mid, 14 days) as a scaled, gap-aware rate source.

``load_trace`` reads either ServeGen CSV (10-minute native or 1-minute grid, vendored in ``adapter/data/traces``)
into a ``RateTrace``;
``ScaledTrace`` answers "what is the arrival rate at simulated second t" with step interpolation, the
trace rescaled so its peak matches a fleet's capacity; ``TraceClock`` maps wall time to simulated time
with a compression factor. Everything here is pure apart from ``load_trace`` reading its file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from importlib import resources
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

TRACE_FILE_10MIN = "servegen_language_m_mid_10min.csv"
TRACE_FILE_1MIN = "servegen_language_m_mid_1min.csv"
# The trace's README (adapter/data/traces) calls windows below ~20 % of the median "suspect": they sit next to
# collection gaps and hold only a few clients' traffic, so they would read as a false collapse of load.
DEFAULT_SUSPECT_FRACTION = 0.2


class RateStatus(StrEnum):
    """Where a rate came from: the window itself, or a held value standing in for a bad window."""

    OK = "ok"
    GAP = "gap"  # no data at all for the window (collection gap, not zero load)
    SUSPECT = "suspect"  # data present but implausibly low (partial window next to a gap)


@dataclass(frozen=True)
class RateTrace:
    """A request-rate series on a regular grid.

    ``rates[i]`` is the arrival rate (req/s) over ``[start_s + i*step_s, start_s + (i+1)*step_s)``; NaN
    where the source has a gap. ``suspect[i]`` marks windows with data that should not be trusted.
    """

    step_s: float
    rates: npt.NDArray[np.float64]
    suspect: npt.NDArray[np.bool_]
    start_s: float = 0.0
    prompt_means: npt.NDArray[np.float64] | None = None  # prompt tokens per request in each window (NaN: unknown)
    output_means: npt.NDArray[np.float64] | None = None  # output tokens per request in each window

    def __post_init__(self) -> None:
        if self.step_s <= 0:
            raise ValueError(f"step_s must be positive, got {self.step_s}")
        if self.rates.ndim != 1 or self.rates.shape != self.suspect.shape:
            raise ValueError("rates and suspect must be 1-D arrays of the same length")
        for means in (self.prompt_means, self.output_means):
            if means is not None and means.shape != self.rates.shape:
                raise ValueError("token means must have one value per window")
        if (self.prompt_means is None) != (self.output_means is None):
            raise ValueError("give both prompt and output token means, or neither")
        if not np.any(self.good_mask):
            raise ValueError("the trace has no usable window (all gaps or suspect)")

    @property
    def duration_s(self) -> float:
        """Length of the whole trace in seconds."""
        return float(self.step_s * len(self.rates))

    @property
    def gap_mask(self) -> npt.NDArray[np.bool_]:
        """True where the window has no data."""
        return np.isnan(self.rates)

    @property
    def good_mask(self) -> npt.NDArray[np.bool_]:
        """True where the window's own value is used (neither a gap nor suspect)."""
        return ~self.gap_mask & ~self.suspect

    @property
    def peak(self) -> float:
        """The largest trustworthy window rate (req/s)."""
        return float(np.max(self.rates[self.good_mask]))


def load_trace(path: str | Path, *, suspect_fraction: float = DEFAULT_SUSPECT_FRACTION) -> RateTrace:
    """Read a ServeGen CSV into a ``RateTrace``.

    Accepts the 10-minute file (columns ``window_start_s, rate_rps, gap``) and the 1-minute file
    (``minute_index, requests, gap``; rate = requests / 60). Gap rows become NaN. Windows whose rate is
    below ``suspect_fraction`` x the median of non-gap windows are flagged suspect (0 disables this).
    Raises ``ValueError`` for an unknown column layout or an irregular time grid.
    """
    frame = pd.read_csv(path)
    columns = set(frame.columns)
    if {"window_start_s", "rate_rps", "gap"} <= columns:
        starts = frame["window_start_s"].to_numpy(dtype=np.float64)
        rates = frame["rate_rps"].to_numpy(dtype=np.float64)
    elif {"minute_index", "requests", "gap"} <= columns:
        starts = frame["minute_index"].to_numpy(dtype=np.float64) * 60.0
        rates = frame["requests"].to_numpy(dtype=np.float64) / 60.0
    else:
        raise ValueError(f"{path}: unknown trace layout, columns {sorted(columns)}")
    if len(starts) < 2:
        raise ValueError(f"{path}: need at least two windows")
    steps = np.diff(starts)
    step = float(steps[0])
    if step <= 0 or not np.allclose(steps, step):
        raise ValueError(f"{path}: windows are not on a regular grid")
    # The gap flag wins over whatever the rate column holds: a gap is "no data", never zero load.
    rates = np.where(frame["gap"].to_numpy() != 0, np.nan, rates)
    known = rates[~np.isnan(rates)]
    median = float(np.median(known)) if known.size else math.nan
    with np.errstate(invalid="ignore"):
        suspect = ~np.isnan(rates) & (rates < suspect_fraction * median)
    return RateTrace(step_s=step, rates=rates, suspect=suspect, start_s=float(starts[0]))


def default_trace_path() -> Path:
    """The vendored 10-minute ServeGen trace (package data ``adapter/data/traces``, Apache-2.0; see the
    README beside it). It ships inside the package, so an installed ``llm-hpa-adapter demo`` finds it too."""
    return Path(str(resources.files("adapter").joinpath("data", "traces", TRACE_FILE_10MIN)))


def default_trace_1min_path() -> Path:
    """The same trace on a per-minute grid (``servegen_language_m_mid_1min.csv``), also package data."""
    return Path(str(resources.files("adapter").joinpath("data", "traces", TRACE_FILE_1MIN)))


def synthetic_trace(*, days: int = 2, step_s: float = 600.0) -> RateTrace:
    """A smooth diurnal stand-in (trough 40 % of peak at 04:00, peak at 16:00), for tests and what-ifs."""
    t = np.arange(int(days * 86400 / step_s), dtype=np.float64) * step_s
    rates = 0.7 + 0.3 * np.cos(2.0 * np.pi * (t - 16 * 3600.0) / 86400.0)
    return RateTrace(step_s=step_s, rates=rates, suspect=np.zeros(rates.shape, dtype=np.bool_))


def flat_noisy_trace(*, days: float = 2.0, step_s: float = 60.0, seed: int = 0) -> RateTrace:
    """A trace without a daily cycle: a mean-reverting log random walk (AR(1), 1-hour memory, 15 % spread)
    with a level shift of 0.6-1.6x every ~6 hours. For checking that nothing relies on a daily pattern."""
    rng = np.random.default_rng(seed)
    n = int(days * 86400 / step_s)
    phi = math.exp(-step_s / 3600.0)
    noise = rng.normal(0.0, 0.15 * math.sqrt(1.0 - phi * phi), n)
    x = np.zeros(n)
    for i in range(1, n):
        x[i] = phi * x[i - 1] + noise[i]
    shifts = rng.random(n) < step_s / (6 * 3600.0)
    level = np.exp(np.cumsum(np.where(shifts, rng.uniform(math.log(0.6), math.log(1.6), n), 0.0)))
    level = np.clip(level, 0.3, 3.0)  # keep the walk within a fleet's range
    rates = level * np.exp(x)
    return RateTrace(step_s=step_s, rates=rates, suspect=np.zeros(n, dtype=np.bool_))


def bursty_trace(*, minutes: int = 60, seed: int = 0) -> RateTrace:
    """A 1-minute-step trace of ``minutes`` with bursts: a base load with 5 % noise and, about every 15
    minutes, a burst that doubles or triples the load within a minute and decays over ~5 minutes."""
    rng = np.random.default_rng(seed)
    t = np.arange(minutes, dtype=np.float64)
    rates = 1.0 + 0.05 * rng.normal(size=minutes)
    starts = np.flatnonzero(rng.random(minutes) < 1.0 / 15.0)
    for start in starts:
        height = rng.uniform(1.0, 2.0)
        after = t - start
        rates += np.where(after >= 0, height * np.exp(-np.maximum(after, 0.0) / 5.0), 0.0)
    return RateTrace(step_s=60.0, rates=np.maximum(rates, 0.05), suspect=np.zeros(minutes, dtype=np.bool_))


@dataclass(frozen=True)
class RateSample:
    """The arrival rate at one instant and where it came from.

    ``rate`` is always finite. ``status`` is OK when the window's own value was used; for a gap or a
    suspect window ``rate`` is the last good value before it (or the first good one after it, at the
    start of the trace) and ``raw`` is the window's own (scaled) value, NaN for a gap.
    """

    sim_time_s: float
    rate: float
    status: RateStatus
    raw: float
    window: int

    @property
    def held(self) -> bool:
        """True when ``rate`` is a held value rather than the window's own."""
        return self.status is not RateStatus.OK


class ScaledTrace:
    """A ``RateTrace`` rescaled so its peak equals ``peak_rps``, sampled by step interpolation.

    Simulated time wraps around at the end of the trace so a demo can run for ever; time before the
    trace start is an error.
    """

    def __init__(self, trace: RateTrace, *, peak_rps: float) -> None:
        if not peak_rps > 0:
            raise ValueError(f"peak_rps must be positive, got {peak_rps}")
        self.trace = trace
        self.peak_rps = float(peak_rps)
        self.scale = self.peak_rps / trace.peak
        self._raw = trace.rates * self.scale
        self._status = np.where(trace.gap_mask, 1, np.where(trace.suspect, 2, 0)).astype(np.int8)
        self._filled = _hold_last_good(self._raw, trace.good_mask)
        self._prompt: npt.NDArray[np.float64] | None = None
        self._output: npt.NDArray[np.float64] | None = None
        if trace.prompt_means is not None and trace.output_means is not None:
            known = trace.good_mask & np.isfinite(trace.prompt_means) & np.isfinite(trace.output_means)
            if not np.any(known):
                raise ValueError("the trace's token columns have no usable window")
            self._prompt = _hold_last_good(trace.prompt_means, known)
            self._output = _hold_last_good(trace.output_means, known)

    @classmethod
    def for_fleet(cls, trace: RateTrace, *, replicas: int, capacity_rps: float, load: float = 1.0) -> ScaledTrace:
        """Scale so the trace peak is ``load`` x ``replicas`` x ``capacity_rps`` (1.0: the peak fills it)."""
        return cls(trace, peak_rps=load * replicas * capacity_rps)

    def window_at(self, sim_time_s: float) -> int:
        """Index of the window that covers ``sim_time_s`` (after wrapping)."""
        offset = sim_time_s - self.trace.start_s
        if offset < 0:
            raise ValueError(f"simulated time {sim_time_s} is before the trace start {self.trace.start_s}")
        offset = math.fmod(offset, self.trace.duration_s)
        return min(int(offset // self.trace.step_s), len(self._raw) - 1)

    def mix_at(self, sim_time_s: float) -> tuple[float, float] | None:
        """(prompt, output) tokens per request of the window at ``sim_time_s``; None for a trace without token
        columns. A window without requests (or a bad one) holds the last known mix, like the rate."""
        if self._prompt is None or self._output is None:
            return None
        i = self.window_at(sim_time_s)
        return float(self._prompt[i]), float(self._output[i])

    def mean_mix(self) -> tuple[float, float] | None:
        """The trace's own mix over all its good windows (token sums / request sums), None without token columns."""
        t = self.trace
        if t.prompt_means is None or t.output_means is None:
            return None
        ok = t.good_mask & np.isfinite(t.prompt_means) & np.isfinite(t.output_means)
        weights = t.rates[ok]
        return (
            float(np.sum(t.prompt_means[ok] * weights) / weights.sum()),
            float(np.sum(t.output_means[ok] * weights) / weights.sum()),
        )

    def rate_at(self, sim_time_s: float) -> RateSample:
        """The (scaled) arrival rate at ``sim_time_s``; never NaN, held values are flagged."""
        i = self.window_at(sim_time_s)
        status = (RateStatus.OK, RateStatus.GAP, RateStatus.SUSPECT)[int(self._status[i])]
        return RateSample(
            sim_time_s=sim_time_s,
            rate=float(self._filled[i]),
            status=status,
            raw=float(self._raw[i]),
            window=i,
        )


def _hold_last_good(values: npt.NDArray[np.float64], good: npt.NDArray[np.bool_]) -> npt.NDArray[np.float64]:
    """Forward-fill bad entries with the last good value; leading bad entries take the first good one."""
    index = np.where(good, np.arange(len(values)), -1)
    last_good = np.maximum.accumulate(index)
    first_good = int(np.argmax(good))
    last_good[last_good < 0] = first_good
    filled: npt.NDArray[np.float64] = values[last_good]
    return filled


@dataclass(frozen=True)
class TraceClock:
    """Maps wall-clock seconds to simulated trace seconds: ``sim = sim_start + (wall - wall_start) * speed``.

    ``speed`` is the compression factor (simulated seconds per wall second; 288 plays a day in 5 minutes).
    Pure: the caller supplies wall times (e.g. from ``time.monotonic()``).
    """

    wall_start: float
    speed: float
    sim_start: float = 0.0

    def __post_init__(self) -> None:
        if not self.speed > 0:
            raise ValueError(f"speed must be positive, got {self.speed}")

    def sim_time(self, wall: float) -> float:
        """Simulated time at wall time ``wall``."""
        return self.sim_start + (wall - self.wall_start) * self.speed

    def wall_time(self, sim: float) -> float:
        """Wall time at which the simulation reaches ``sim``."""
        return self.wall_start + (sim - self.sim_start) / self.speed


def format_sim_time(sim_time_s: float) -> str:
    """``day D HH:MM`` for a simulated time counted from 00:00 of day 0."""
    total_min = int(sim_time_s // 60)
    day, minute_of_day = divmod(total_min, 24 * 60)
    return f"day {day} {minute_of_day // 60:02d}:{minute_of_day % 60:02d}"
