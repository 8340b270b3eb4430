"""The ``backtest`` command: CSV sources (including the vendored ServeGen trace), Prometheus/VictoriaMetrics, errors."""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from adapter.cli import backtest, series_input
from adapter.sim.trace import default_trace_path
from tests.forecast.synthetic import daily_cycle
from tests.support.backends import Series, TestBackend

TRACE = default_trace_path()


def _run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    backtest.register(sub)
    args = parser.parse_args(["backtest", *argv])
    return int(args.func(args))


def _load(path: Path) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(path.read_text())
    return result


def _write_csv(path: Path, header: list[str], rows: Sequence[Sequence[object]]) -> Path:
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _load_series(n: int = 300, step: float = 300.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ts = 1_700_000_100.0 + step * np.arange(n)  # a multiple of 300 s
    values = daily_cycle(ts, noise=20.0, seed=4)
    gap = np.zeros(n, dtype=bool)
    gap[[i for i in (40, 41, 200) if i < n]] = True
    return ts, values, gap


def _one_line_error(capsys: pytest.CaptureFixture[str], *fragments: str) -> None:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("backtest: error: "), err
    assert "Traceback" not in err
    for fragment in fragments:
        assert fragment in err, err


def test_small_csv_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ts, values, gap = _load_series()
    rows = [[int(t), "" if g else f"{v:.3f}", int(g)] for t, v, g in zip(ts, values, gap, strict=True)]
    src = _write_csv(tmp_path / "load.csv", ["ts", "rps", "gap"], rows)
    out, png = tmp_path / "out.json", tmp_path / "out.png"
    rc = _run(
        "--trace",
        str(src),
        "--time-col",
        "ts",
        "--value-col",
        "rps",
        "--gap-col",
        "gap",
        "--step",
        "5m",
        "--horizon",
        "30m",
        "--model",
        "ses",
        "--json",
        str(out),
        "--plot",
        str(png),
    )
    assert rc == 0
    r = _load(out)
    assert r["model"] == "ses" and r["step_s"] == 300.0 and r["horizon_steps"] == 6
    assert r["points_tested"] + r["points_skipped"] == 150
    assert r["skipped"] == {"nan_target": 1}  # row 200 is in the test half; rows 40-41 are history
    assert set(r["baselines"]) == {"persistence", "seasonal_naive"}
    assert r["source"]["kind"] == "csv" and r["source"]["rows"] == 300
    assert len(r["points"]["actual"]) == r["points_tested"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "persistence (baseline)" in capsys.readouterr().out


def test_iso_timestamps_give_the_same_result_as_unix_seconds(tmp_path: Path) -> None:
    ts, values, _gap = _load_series(200)
    unix = _write_csv(
        tmp_path / "unix.csv", ["t", "v"], [[int(t), f"{v:.3f}"] for t, v in zip(ts, values, strict=True)]
    )
    iso_rows = [[datetime.fromtimestamp(t, UTC).isoformat(), f"{v:.3f}"] for t, v in zip(ts, values, strict=True)]
    iso = _write_csv(tmp_path / "iso.csv", ["t", "v"], iso_rows)
    for src in (unix, iso):
        assert (
            _run(
                "--trace",
                str(src),
                "--time-col",
                "t",
                "--value-col",
                "v",
                "--model",
                "ar",
                "--json",
                str(src.with_suffix(".json")),
            )
            == 0
        )
    a, b = _load(unix.with_suffix(".json")), _load(iso.with_suffix(".json"))
    assert a["points"] == b["points"]
    assert a["wape"] == b["wape"]


def test_index_time_and_count_columns(tmp_path: Path) -> None:
    _ts, values, _ = _load_series(200, step=600.0)
    rows = [[i, f"{v:.4f}", f"{v * 600:.2f}"] for i, v in enumerate(values)]
    src = _write_csv(tmp_path / "idx.csv", ["i", "rate", "requests"], rows)
    by_rate, by_count = tmp_path / "rate.json", tmp_path / "count.json"
    assert (
        _run(
            "--trace",
            str(src),
            "--time-col",
            "i",
            "--index-step",
            "10m",
            "--value-col",
            "rate",
            "--json",
            str(by_rate),
        )
        == 0
    )
    # The same data as requests per 10-minute row: --count turns it back into a rate per second.
    assert (
        _run(
            "--trace",
            str(src),
            "--index-step",
            "10m",
            "--value-col",
            "requests",
            "--count",
            "--json",
            str(by_count),
        )
        == 0
    )
    a, b = _load(by_rate), _load(by_count)
    assert a["step_s"] == b["step_s"] == 600.0
    np.testing.assert_allclose(b["points"]["actual"], a["points"]["actual"], rtol=1e-6)
    assert b["wape"] == pytest.approx(a["wape"], rel=1e-4)


def test_coarser_step_averages_rows(tmp_path: Path) -> None:
    ts, values, _ = _load_series(240)
    src = _write_csv(tmp_path / "l.csv", ["t", "v"], [[int(t), f"{v:.3f}"] for t, v in zip(ts, values, strict=True)])
    out = tmp_path / "o.json"
    assert _run("--trace", str(src), "--time-col", "t", "--value-col", "v", "--step", "10m", "--json", str(out)) == 0
    r = _load(out)
    assert r["step_s"] == 600.0 and r["horizon_steps"] == 3
    pts = r["points"]
    # Each 10-minute actual is the mean of its two 5-minute rows.
    i = int(np.searchsorted(ts, pts["timestamp"][0]))
    assert pts["actual"][0] == pytest.approx((round(values[i], 3) + round(values[i + 1], 3)) / 2)


def test_servegen_trace(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    rc = _run(
        "--trace",
        str(TRACE),
        "--time-col",
        "window_start_s",
        "--value-col",
        "rate_rps",
        "--gap-col",
        "gap",
        "--horizon",
        "30m",
        "--train-fraction",
        "0.9",
        "--model",
        "persistence",
        "--json",
        str(out),
    )
    assert rc == 0
    r = _load(out)
    with TRACE.open() as fh:
        rows = list(csv.DictReader(fh))
    first_test = math.ceil(len(rows) * 0.9)
    gap_targets = sum(1 for row in rows[first_test:] if row["gap"] == "1")
    assert r["step_s"] == 600.0 and r["horizon_steps"] == 3
    assert r["points_skipped"] == gap_targets > 0
    assert r["points_tested"] == len(rows) - first_test - gap_targets
    # Persistence figures recomputed from the file: the actual three windows earlier is the forecast.
    rate = [float(row["rate_rps"]) if row["gap"] == "0" else math.nan for row in rows]
    assert r["points"]["actual"][0] == rate[first_test]
    assert r["points"]["forecast"][0] == rate[first_test - 3]
    assert r["baselines"]["persistence"]["wape"] == r["wape"]


@pytest.mark.parametrize(
    ("argv", "fragments"),
    [
        (["--value-col", "nope"], ["no column 'nope'"]),
        (["--horizon", "7m"], ["not a whole number"]),
        (["--horizon", "soon"], ["bad duration"]),
        (["--model", "prophet"], ["unknown --model"]),
        (["--step", "1m"], ["finer than the data"]),
    ],
)
def test_user_errors_are_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragments: list[str]
) -> None:
    ts, values, _ = _load_series(200)
    src = _write_csv(tmp_path / "l.csv", ["t", "value"], [[int(t), v] for t, v in zip(ts, values, strict=True)])
    base = ["--trace", str(src), "--time-col", "t", "--json", str(tmp_path / "o.json")]
    assert _run(*base, *argv) == 2
    _one_line_error(capsys, *fragments)
    assert not (tmp_path / "o.json").exists()


def test_file_level_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = str(tmp_path / "o.json")
    assert _run("--trace", str(tmp_path / "missing.csv"), "--json", out) == 2
    _one_line_error(capsys, "cannot read")
    short = _write_csv(tmp_path / "short.csv", ["t", "value"], [[i * 60, 1.0] for i in range(20)])
    assert _run("--trace", str(short), "--time-col", "t", "--json", out) == 2
    _one_line_error(capsys, "usable points")
    bad = _write_csv(tmp_path / "bad.csv", ["t", "value"], [[0, 1.0], [60, "lots"]])
    assert _run("--trace", str(bad), "--time-col", "t", "--json", out) == 2
    _one_line_error(capsys, "row 3", "not a number")
    assert _run("--json", out) == 2
    _one_line_error(capsys, "no data")
    assert _run("--trace", str(short), "--json", out) == 2
    _one_line_error(capsys, "--index-step")


def test_parse_duration() -> None:
    assert series_input.parse_duration("30s") == 30.0
    assert series_input.parse_duration("5m") == 300.0
    assert series_input.parse_duration("1h30m") == 5400.0
    assert series_input.parse_duration("3d") == 259_200.0
    assert series_input.parse_duration("90") == 90.0
    for bad in ("", "5 minutes", "-5m", "0s", "m5"):
        with pytest.raises(series_input.CliError):
            series_input.parse_duration(bad)


# --- Prometheus / VictoriaMetrics as the source -------------------------------------------------------------


def test_prometheus_source(backend: TestBackend, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ns = f"bt-{uuid.uuid4().hex[:8]}"
    step = 300.0
    end = math.floor(time.time() / step) * step
    ts = end - step * np.arange(2 * 288 - 1, -1, -1)  # two days ending at the last 5-minute mark
    values = daily_cycle(ts, noise=10.0, seed=9)
    values[100] = np.nan  # not written at all: a gap on the server
    values[300:306] = np.nan  # half an hour without samples
    samples = [(float(t), float(v)) for t, v in zip(ts, values, strict=True) if math.isfinite(v)]
    backend.load([Series(labels={"__name__": "llm_load_rps", "namespace": ns}, samples=samples)])
    query = f'sum(llm_load_rps{{namespace="{ns}"}})'

    series = series_input.fetch_prometheus(backend.url, query, since_s=2 * 86_400 - step, step_s=step, end=end)
    np.testing.assert_array_equal(series.timestamps, ts)
    finite = np.isfinite(values)
    np.testing.assert_allclose(series.values[finite], values[finite], rtol=1e-11)
    # (VictoriaMetrics stores a sample as a decimal of about 12 significant digits, hence rtol rather than
    # equality; 1e-12 failed now and then: one value came back 1.00009e-12 off.)
    # A single missing sample is not a gap to a range query: both servers answer it with the previous sample
    # (their 5-minute lookback). Only longer silences come back as missing steps.
    assert series.values[100] == pytest.approx(values[99], rel=1e-9)
    assert series.values[300] == pytest.approx(values[299], rel=1e-9)
    assert np.isnan(series.values[301:306]).all()  # the rest of the silence is a gap, not a made-up value

    out = tmp_path / f"{backend.kind}.json"
    rc = _run(
        "--prometheus-url",
        backend.url,
        "--query",
        query,
        "--since",
        "1d",
        "--step",
        "5m",
        "--history",
        "60",
        "--json",
        str(out),
    )
    assert rc == 0, capsys.readouterr().err
    r = _load(out)
    assert r["source"]["kind"] == "prometheus" and r["source"]["query"] == query
    assert r["points_tested"] > 100

    assert (
        _run(
            "--prometheus-url",
            backend.url,
            "--query",
            'sum by (x) (llm_load_rps{namespace="none"})',
            "--json",
            str(out),
        )
        == 2
    )
    _one_line_error(capsys, "returned 0 series")
