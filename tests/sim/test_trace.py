"""The shared ServeGen trace as a rate source: loading, gaps, suspect windows, scaling, the clock."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from adapter.sim.trace import (
    RateStatus,
    RateTrace,
    ScaledTrace,
    TraceClock,
    default_trace_path,
    format_sim_time,
    load_trace,
    synthetic_trace,
)

# The traces vendored in the package (byte-identical copies of the shared ServeGen CSVs).
TRACES = Path(__file__).resolve().parents[2] / "adapter" / "data" / "traces"
CSV_10MIN = TRACES / "servegen_language_m_mid_10min.csv"
CSV_1MIN = TRACES / "servegen_language_m_mid_1min.csv"

needs_trace = pytest.mark.skipif(not CSV_10MIN.is_file(), reason="vendored trace not present")


def _rows() -> list[dict[str, str]]:
    # Read with the stdlib, independently of the pandas loader under test.
    with CSV_10MIN.open(newline="") as fh:
        return list(csv.DictReader(fh))


@needs_trace
def test_loads_the_10min_trace_with_gaps_as_nan() -> None:
    rows = _rows()
    trace = load_trace(CSV_10MIN)
    assert trace.step_s == 600.0
    assert len(trace.rates) == len(rows) == 2016
    gaps = [i for i, row in enumerate(rows) if row["gap"] == "1"]
    assert len(gaps) == 84  # as documented in shared/data/traces/README.md
    assert np.flatnonzero(trace.gap_mask).tolist() == gaps
    good = [i for i, row in enumerate(rows) if row["gap"] == "0"]
    assert trace.rates[good] == pytest.approx([float(rows[i]["rate_rps"]) for i in good])


@needs_trace
def test_suspect_windows_are_the_partial_ones_below_a_fifth_of_the_median() -> None:
    rows = _rows()
    values = [float(r["rate_rps"]) for r in rows if r["gap"] == "0"]
    median = float(np.median(values))
    expected = [i for i, r in enumerate(rows) if r["gap"] == "0" and float(r["rate_rps"]) < 0.2 * median]
    trace = load_trace(CSV_10MIN)
    assert np.flatnonzero(trace.suspect).tolist() == expected
    assert 1386 in expected  # 0.94 req/s next to a gap on day 9
    assert trace.peak == pytest.approx(
        max(
            float(rows[i]["rate_rps"])
            for i in range(len(rows))
            if rows[i]["gap"] == "0" and i not in expected
        )
    )
    assert load_trace(CSV_10MIN, suspect_fraction=0.0).suspect.sum() == 0


@needs_trace
def test_the_1min_file_is_the_same_series_on_a_finer_grid() -> None:
    coarse = load_trace(CSV_10MIN)
    fine = load_trace(CSV_1MIN)
    assert fine.step_s == 60.0
    assert len(fine.rates) == 10 * len(coarse.rates)
    repeated = np.repeat(coarse.rates, 10)
    both = ~np.isnan(repeated)
    assert np.array_equal(np.isnan(fine.rates), np.isnan(repeated))
    # rate_rps in the 10-minute file is rounded to 4 decimals.
    assert fine.rates[both] == pytest.approx(repeated[both], rel=1e-6, abs=1e-4)


@needs_trace
def test_scaled_peak_and_step_interpolation() -> None:
    trace = load_trace(CSV_10MIN)
    scaled = ScaledTrace.for_fleet(trace, replicas=4, capacity_rps=10.0)
    samples = [scaled.rate_at(i * 600.0 + 300.0) for i in range(len(trace.rates))]
    assert max(s.rate for s in samples) == pytest.approx(40.0)
    assert all(math.isfinite(s.rate) for s in samples)
    # Step interpolation: constant over a window, jumps at the boundary.
    assert scaled.rate_at(1200.0).rate == scaled.rate_at(1799.9).rate
    assert scaled.rate_at(1200.0).rate == pytest.approx(trace.rates[2] * scaled.scale)
    assert scaled.rate_at(1800.0).rate == pytest.approx(trace.rates[3] * scaled.scale)


@needs_trace
def test_gap_and_suspect_windows_hold_the_last_good_value_and_say_so() -> None:
    trace = load_trace(CSV_10MIN)
    scaled = ScaledTrace(trace, peak_rps=100.0)
    before = scaled.rate_at(521 * 600.0)
    assert before.status is RateStatus.OK and not before.held
    in_gap = scaled.rate_at(522 * 600.0 + 10)
    assert in_gap.status is RateStatus.GAP and in_gap.held
    assert math.isnan(in_gap.raw)
    assert in_gap.rate == before.rate
    # Window 533 ends the gap with a partial value: still held from window 521.
    after = scaled.rate_at(533 * 600.0)
    assert after.status is RateStatus.SUSPECT
    assert after.raw == pytest.approx(trace.rates[533] * scaled.scale)
    assert after.rate == before.rate
    assert scaled.rate_at(534 * 600.0).status is RateStatus.OK


@needs_trace
def test_time_wraps_around_at_the_end_of_the_trace() -> None:
    trace = load_trace(CSV_10MIN)
    scaled = ScaledTrace(trace, peak_rps=1.0)
    assert scaled.rate_at(trace.duration_s + 4321.0).rate == scaled.rate_at(4321.0).rate
    with pytest.raises(ValueError):
        scaled.rate_at(-1.0)


def test_leading_bad_windows_take_the_first_good_value() -> None:
    rates = np.array([np.nan, 0.5, 4.0, np.nan, 2.0])
    suspect = np.array([False, True, False, False, False])
    scaled = ScaledTrace(RateTrace(step_s=10.0, rates=rates, suspect=suspect), peak_rps=8.0)
    got = [(s.rate, s.status) for s in (scaled.rate_at(t) for t in (0.0, 10.0, 20.0, 30.0, 40.0))]
    assert got == [
        (8.0, RateStatus.GAP),
        (8.0, RateStatus.SUSPECT),
        (8.0, RateStatus.OK),
        (8.0, RateStatus.GAP),
        (4.0, RateStatus.OK),
    ]


def test_a_trace_without_a_usable_window_is_rejected() -> None:
    with pytest.raises(ValueError, match="no usable window"):
        RateTrace(step_s=1.0, rates=np.array([np.nan]), suspect=np.array([False]))


def test_unknown_csv_layout_and_irregular_grid_are_rejected(tmp_path: Path) -> None:
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n3,4\n")
    with pytest.raises(ValueError, match="unknown trace layout"):
        load_trace(odd)
    irregular = tmp_path / "irregular.csv"
    irregular.write_text("window_start_s,rate_rps,gap\n0,1,0\n600,2,0\n1800,3,0\n")
    with pytest.raises(ValueError, match="regular grid"):
        load_trace(irregular)


def test_synthetic_trace_is_diurnal() -> None:
    scaled = ScaledTrace(synthetic_trace(), peak_rps=10.0)
    assert scaled.rate_at(16 * 3600.0).rate == pytest.approx(10.0)
    assert scaled.rate_at(4 * 3600.0).rate == pytest.approx(4.0)


def test_default_trace_path_looks_beside_the_repository(tmp_path: Path) -> None:
    repo = tmp_path / "main"
    repo.mkdir()
    assert default_trace_path(repo) is None
    target = tmp_path / "shared" / "data" / "traces" / "servegen_language_m_mid_10min.csv"
    target.parent.mkdir(parents=True)
    target.write_text("x")
    assert default_trace_path(repo) == target


def test_trace_clock_maps_both_ways() -> None:
    clock = TraceClock(wall_start=100.0, speed=288.0, sim_start=6 * 3600.0)
    assert clock.sim_time(100.0) == 6 * 3600.0
    assert clock.sim_time(400.0) == 6 * 3600.0 + 300.0 * 288.0  # 5 wall minutes = one simulated day
    assert clock.wall_time(clock.sim_time(123.4)) == pytest.approx(123.4)
    with pytest.raises(ValueError):
        TraceClock(wall_start=0.0, speed=0.0)


def test_format_sim_time() -> None:
    assert format_sim_time(0.0) == "day 0 00:00"
    assert format_sim_time(86400.0 + 13 * 3600 + 40 * 60 + 59) == "day 1 13:40"
