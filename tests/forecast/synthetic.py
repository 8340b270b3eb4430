"""Synthetic load series with a known truth, shared by the forecast tests."""

from __future__ import annotations

import numpy as np

DAY_S = 86_400.0


def noisy_ramp(n: int, *, start: float = 100.0, slope: float = 2.0, noise: float = 1.0, seed: int = 0) -> np.ndarray:
    """``start + slope * i`` plus Gaussian noise (sd ``noise``), i = 0..n-1."""
    rng = np.random.default_rng(seed)
    return start + slope * np.arange(n) + rng.normal(0.0, noise, n)


def ramp_truth(i: np.ndarray, *, start: float = 100.0, slope: float = 2.0) -> np.ndarray:
    """The noise-free ramp at indices ``i``."""
    return start + slope * np.asarray(i, dtype=np.float64)


def daily_cycle(
    times: np.ndarray, *, mean: float = 1000.0, amplitude: float = 400.0, noise: float = 0.0, seed: int = 0
) -> np.ndarray:
    """``mean + amplitude * sin(2 pi t / day)`` at unix times ``times``, plus optional Gaussian noise."""
    rng = np.random.default_rng(seed)
    t = np.asarray(times, dtype=np.float64)
    return mean + amplitude * np.sin(2 * np.pi * t / DAY_S) + rng.normal(0.0, noise, t.size)
