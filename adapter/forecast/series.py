"""Putting irregular or finer samples on the forecaster's regular grid, without inventing load.

``resample_mean`` averages the samples that fall in each ``step_s`` bin. A bin becomes NaN (a gap) when no
sample falls in it or when any sample in it is missing or flagged as a gap: part of that bin's window is
unknown, and averaging the rest would pass a partial window off as a whole one. Upsampling (a step finer than
the data) is refused rather than done by repeating values.
"""

from __future__ import annotations

import math

import numpy as np


def native_spacing(timestamps: np.ndarray) -> float:
    """The data's own sampling interval: the median positive difference of the sorted timestamps.

    Raises ``ValueError`` with fewer than two distinct timestamps.
    """
    ts = np.unique(np.asarray(timestamps, dtype=np.float64))
    if ts.size < 2:
        raise ValueError("need at least two distinct timestamps to tell the data's spacing")
    return float(np.median(np.diff(ts)))


def resample_mean(
    timestamps: np.ndarray,
    values: np.ndarray,
    step_s: float,
    *,
    gap: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(grid_ts, grid_values)``: the mean of the samples in each bin ``[k step, (k+1) step)`` of unix time.

    Bins are aligned to multiples of ``step_s`` (so a 10-minute series stays on its own 10-minute marks) and
    run from the bin of the first sample to the bin of the last. A bin with no sample, a NaN sample or a
    sample whose ``gap`` flag is true is NaN. Raises ``ValueError`` when ``step_s`` is finer than the data's
    spacing (that would need invented values), for mismatched lengths, or for non-finite timestamps.
    """
    ts = np.asarray(timestamps, dtype=np.float64).reshape(-1)
    vals = np.asarray(values, dtype=np.float64).reshape(-1)
    flags = np.zeros(ts.size, dtype=bool) if gap is None else np.asarray(gap, dtype=bool).reshape(-1)
    if not (ts.size == vals.size == flags.size):
        raise ValueError(f"timestamps, values and gap flags differ in length: {ts.size}, {vals.size}, {flags.size}")
    if ts.size == 0:
        raise ValueError("no samples to resample")
    if not np.all(np.isfinite(ts)):
        raise ValueError("timestamps must all be finite")
    if not (math.isfinite(step_s) and step_s > 0):
        raise ValueError(f"step must be a positive number of seconds, got {step_s!r}")
    if ts.size >= 2:
        spacing = native_spacing(ts)
        # A little slack for float timestamps (e.g. 599.999 s spacing with a 600 s step).
        if step_s < spacing * (1 - 1e-6):
            raise ValueError(
                f"step {step_s:g} s is finer than the data's spacing {spacing:g} s; "
                "choose a step at least as long (upsampling would invent values)"
            )
    # The small epsilon keeps a sample sitting exactly on a bin edge (up to float error) in that bin.
    bins = np.floor(ts / step_s + 1e-9).astype(np.int64)
    first = int(bins.min())
    index = bins - first
    n = int(index.max()) + 1
    bad = flags | ~np.isfinite(vals)
    sums = np.bincount(index, weights=np.where(bad, 0.0, vals), minlength=n)
    counts = np.bincount(index, minlength=n)
    bad_counts = np.bincount(index, weights=bad.astype(np.float64), minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / counts
    means[(counts == 0) | (bad_counts > 0)] = np.nan
    grid = (first + np.arange(n)) * step_s
    return grid.astype(np.float64), means.astype(np.float64)
