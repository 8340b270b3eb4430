"""The vendored ServeGen trace as a rate source: loading, gaps, suspect windows, scaling, the clock."""

from __future__ import annotations

import csv
import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from adapter.sim.trace import (
    RateStatus,
    RateTrace,
    ScaledTrace,
    TraceClock,
    default_trace_1min_path,
    default_trace_path,
    format_sim_time,
    load_trace,
    synthetic_trace,
)

CSV_10MIN = default_trace_path()
CSV_1MIN = default_trace_1min_path()


def _rows() -> list[dict[str, str]]:
    # Read with the stdlib, independently of the pandas loader under test.
    with CSV_10MIN.open(newline="") as fh:
        return list(csv.DictReader(fh))


def test_loads_the_10min_trace_with_gaps_as_nan() -> None:
    rows = _rows()
    trace = load_trace(CSV_10MIN)
    assert trace.step_s == 600.0
    assert len(trace.rates) == len(rows) == 2016
    gaps = [i for i, row in enumerate(rows) if row["gap"] == "1"]
    assert len(gaps) == 84  # as documented in adapter/data/traces/README.md
    assert np.flatnonzero(trace.gap_mask).tolist() == gaps
    good = [i for i, row in enumerate(rows) if row["gap"] == "0"]
    assert trace.rates[good] == pytest.approx([float(rows[i]["rate_rps"]) for i in good])


def test_suspect_windows_are_the_partial_ones_below_a_fifth_of_the_median() -> None:
    rows = _rows()
    values = [float(r["rate_rps"]) for r in rows if r["gap"] == "0"]
    median = float(np.median(values))
    expected = [i for i, r in enumerate(rows) if r["gap"] == "0" and float(r["rate_rps"]) < 0.2 * median]
    trace = load_trace(CSV_10MIN)
    assert np.flatnonzero(trace.suspect).tolist() == expected
    assert 1386 in expected  # 0.94 req/s next to a gap on day 9
    assert trace.peak == pytest.approx(
        max(float(rows[i]["rate_rps"]) for i in range(len(rows)) if rows[i]["gap"] == "0" and i not in expected)
    )
    assert load_trace(CSV_10MIN, suspect_fraction=0.0).suspect.sum() == 0


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


def test_the_trace_is_package_data_inside_the_installed_package() -> None:
    import adapter

    package = Path(adapter.__file__).resolve().parent
    for path in (default_trace_path(), default_trace_1min_path()):
        assert path.is_file()
        assert path.resolve().parent == package / "data" / "traces"
    # Attribution travels with the data (Apache-2.0 asks for the license and a notice of changes).
    here = default_trace_path().parent
    assert "Apache License" in (here / "Apache-2.0.txt").read_text()
    assert "github.com/alibaba/ServeGen" in (here / "README.md").read_text()


def test_the_vendored_trace_is_the_published_one_byte_for_byte() -> None:
    # SHA-256 of the project's published CSVs: other code (benchmarks, README figures) quotes numbers
    # computed on exactly these bytes, so an edited copy must fail here rather than drift silently.
    expected = {
        default_trace_path(): "a8463f1470e4135863746ac752ca571fd5abec9a0df6c463acc84021e10d5ba1",
        default_trace_1min_path(): "4ebc69450d7d900a8dc27081f0c8824a5527276eed48d04cd6066b9f2ec95eb3",
    }
    for path, digest in expected.items():
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, path


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
