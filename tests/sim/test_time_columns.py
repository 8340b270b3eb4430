"""``simulate``/``backtest`` read a CSV's time column in the unit it has, or refuse it: never minutes as seconds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from adapter.cli.series_input import CliError, load_csv

REPO = Path(__file__).resolve().parents[2]
HPA_FILE = REPO / "apiservice-manifests" / "examples" / "vllm-hpa.yaml"


def _minute_csv(path: Path, minutes: int = 59) -> Path:
    rng = np.random.default_rng(3)
    rows = ["minute_index,requests"] + [f"{i},{int(v)}" for i, v in enumerate(rng.integers(1200, 2400, minutes))]
    path.write_text("\n".join(rows) + "\n")
    return path


def _simulate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "adapter", "simulate", "--hpa", str(HPA_FILE), "--policy", "gpu", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_minute_index_is_refused_without_its_unit(tmp_path: Path) -> None:
    src = _minute_csv(tmp_path / "m.csv")
    with pytest.raises(CliError, match="--time-unit"):
        load_csv(src, value_col="requests", time_col="minute_index", count=True)
    done = _simulate(
        "--trace",
        str(src),
        "--time-col",
        "minute_index",
        "--value-col",
        "requests",
        "--count",
        "--json",
        str(tmp_path / "o.json"),
    )
    assert done.returncode == 2 and "--time-unit" in done.stderr and done.stderr.count("\n") == 1
    assert not (tmp_path / "o.json").exists()


def test_an_index_counting_one_by_one_is_refused_whatever_its_name(tmp_path: Path) -> None:
    src = tmp_path / "t.csv"
    src.write_text("t,rps\n" + "".join(f"{i},{10 + i % 3}\n" for i in range(30)))
    with pytest.raises(CliError, match="steps of 1"):
        load_csv(src, value_col="rps", time_col="t")
    assert load_csv(src, value_col="rps", time_col="t", time_unit="s").step_s == 1.0  # said so: seconds


@pytest.mark.parametrize("unit_args", [["--time-unit", "min"], ["--index-step", "1m"]])
def test_a_minute_index_with_its_unit_simulates_every_minute(tmp_path: Path, unit_args: list[str]) -> None:
    src = _minute_csv(tmp_path / "m.csv")
    out = tmp_path / "o.json"
    done = _simulate(
        "--trace",
        str(src),
        "--time-col",
        "minute_index",
        *unit_args,
        "--value-col",
        "requests",
        "--count",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(out.read_text())
    assert doc["inputs"]["duration_s"] == 59 * 60  # the whole 59-minute trace, not 59 s
    series = load_csv(src, value_col="requests", time_col="minute_index", count=True, time_unit="min")
    assert series.step_s == 60.0 and series.timestamps[-1] == 58 * 60
    assert series.values[0] == pytest.approx(int(src.read_text().splitlines()[1].split(",")[1]) / 60.0)


def test_rows_without_a_time_column_need_their_spacing(tmp_path: Path) -> None:
    src = _minute_csv(tmp_path / "m.csv")
    out = tmp_path / "o.json"
    done = _simulate("--trace", str(src), "--value-col", "requests", "--count", "--json", str(out))
    assert done.returncode == 2 and "--index-step" in done.stderr  # an option simulate now has
    done = _simulate(
        "--trace", str(src), "--value-col", "requests", "--count", "--index-step", "1m", "--json", str(out)
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["inputs"]["duration_s"] == 59 * 60


def test_seconds_and_iso_times_still_read_as_before(tmp_path: Path) -> None:
    src = tmp_path / "s.csv"
    src.write_text("window_start_s,rate\n" + "".join(f"{600 * i},{5 + i}\n" for i in range(6)))
    assert load_csv(src, value_col="rate", time_col="window_start_s").step_s == 600.0
    iso = tmp_path / "iso.csv"
    iso.write_text("time,rate\n2024-01-01T00:00:00,5\n2024-01-01T00:10:00,6\n2024-01-01T00:20:00,7\n")
    assert load_csv(iso, value_col="rate", time_col="time").step_s == 600.0
    with pytest.raises(CliError, match="numeric time"):
        load_csv(iso, value_col="rate", time_col="time", time_unit="min")
    with pytest.raises(CliError, match="--time-unit"):
        load_csv(src, value_col="rate", time_col="window_start_s", time_unit="fortnight")
