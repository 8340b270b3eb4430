"""Where each profile's knee sits: the table docs/simulation.md publishes is the model's own.

The knee is the largest per-pod load of a mix at which every stated P99 bound holds (``TokenEngine.knee``): the
oracle's per-pod load, ``--peak-pods``' unit and what ``calibrate --simulate`` looks for. A user reads it in the
table "knee (ttft=2s,itl=100ms)"; this test recomputes every cell, so the page cannot drift from the physics.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from adapter.sim.mix import mix
from adapter.sim.profiles import profile
from adapter.sim.slo import parse_slo
from adapter.sim.tokenfleet import TokenEngine

PAGE = Path(__file__).resolve().parents[2] / "docs" / "simulation.md"
HEADER = "| profile | mix | saturation, req/s per pod | knee (ttft=2s,itl=100ms) |"


def published_rows() -> list[list[str]]:
    lines = PAGE.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(HEADER))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip("|").split("|")])
    return rows


def knee(profile_name: str, mix_name: str, slo: str) -> float:
    return TokenEngine(profile(profile_name), mix(mix_name), parse_slo(slo)).knee()


def as_printed(value: float, printed: str) -> bool:
    """``value`` is what the cell says, to its last printed digit (a value on a half reads either way)."""
    half_unit = 0.5 * 10.0 ** -len(printed.partition(".")[2])
    return abs(value - float(printed)) <= half_unit + 1e-6 * abs(value)  # the knee search stops within 1e-8


def test_the_table_covers_both_profiles_and_the_default_mix() -> None:
    rows = published_rows()
    assert {(r[0], r[1]) for r in rows} >= {
        ("llama3-8b-h100", "azure-conversation"),
        ("llama3-70b-h100-tp4", "azure-conversation"),
    }


@pytest.mark.parametrize("row", published_rows(), ids=lambda r: f"{r[0]}-{r[1]}")
def test_each_published_knee_is_the_models(row: list[str]) -> None:
    profile_name, mix_name, saturation, both, share, ttft_only, itl_only = row
    engine = TokenEngine(profile(profile_name), mix(mix_name), parse_slo("ttft=2s,itl=100ms"))
    computed = {
        "saturation": (engine.model().saturation_rps, saturation),
        "knee": (engine.knee(), both),
        "knee / saturation": (engine.knee() / engine.model().saturation_rps, share),
        "TTFT-only knee": (knee(profile_name, mix_name, "ttft=2s"), ttft_only),
        "ITL-only knee": (knee(profile_name, mix_name, "itl=100ms"), itl_only),
    }
    wrong = {name: (round(v, 4), cell) for name, (v, cell) in computed.items() if not as_printed(v, cell)}
    assert not wrong, f"docs/simulation.md's knee table disagrees with the model: {wrong}"
    # Both bounds hold only where each alone does, and no knee lies beyond saturation.
    assert engine.knee() <= min(computed["TTFT-only knee"][0], computed["ITL-only knee"][0]) + 1e-9
    assert engine.knee() <= engine.model().saturation_rps + 1e-9


def test_a_wrong_cell_is_caught() -> None:
    assert as_printed(9.755, "9.76") and not as_printed(9.755, "9.66") and not as_printed(9.9, "9.76")
    assert re.fullmatch(r"\d+(\.\d+)?", published_rows()[0][3])
