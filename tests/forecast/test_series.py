"""Resampling onto the forecaster's grid without inventing load."""

from __future__ import annotations

import numpy as np
import pytest

from adapter.forecast.series import native_spacing, resample_mean


def test_minutes_to_five_minute_means() -> None:
    ts = 60.0 * np.arange(10)
    values = np.arange(10, dtype=np.float64)
    grid, means = resample_mean(ts, values, 300.0)
    np.testing.assert_array_equal(grid, [0.0, 300.0])
    np.testing.assert_array_equal(means, [2.0, 7.0])


def test_bins_align_to_multiples_of_the_step() -> None:
    ts = 600.0 * np.arange(3) + 1200.0
    grid, means = resample_mean(ts, np.array([1.0, 2.0, 3.0]), 600.0)
    np.testing.assert_array_equal(grid, [1200.0, 1800.0, 2400.0])
    np.testing.assert_array_equal(means, [1.0, 2.0, 3.0])


def test_gaps_and_empty_bins_become_nan() -> None:
    ts = 60.0 * np.array([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16])  # minutes 10-14 absent
    values = np.array([1.0, 1, 1, 1, 1, 2, 2, np.nan, 2, 2, 3, 3])
    gap = np.zeros(ts.size, dtype=bool)
    gap[1] = True
    grid, means = resample_mean(ts, values, 300.0, gap=gap)
    np.testing.assert_array_equal(grid, [0.0, 300.0, 600.0, 900.0])
    assert np.isnan(means[0])  # a gap row in the bin
    assert np.isnan(means[1])  # an empty value in the bin
    assert np.isnan(means[2])  # no row at all
    assert means[3] == 3.0


def test_upsampling_is_refused() -> None:
    with pytest.raises(ValueError, match="finer than the data"):
        resample_mean(600.0 * np.arange(5), np.ones(5), 300.0)


def test_native_spacing() -> None:
    assert native_spacing(np.array([0.0, 600.0, 1200.0, 3000.0])) == 600.0
    with pytest.raises(ValueError):
        native_spacing(np.array([5.0]))
