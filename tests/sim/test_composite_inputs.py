"""benchmarks/composite_inputs.py and the proposed catalog in docs/simulation.md: the snippet parses into the
embedded catalog, and its composite reads within the stated spread at the knee of every profile x mix."""

from __future__ import annotations

import importlib.util
import re
import sys
from importlib import resources
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from adapter.catalog import parse_catalog
from adapter.sim.mix import MIXES
from adapter.sim.profiles import PROFILES

REPO = Path(__file__).resolve().parents[2]
SIMULATION_DOC = REPO / "docs" / "simulation.md"
# docs/simulation.md states: the proposed composite reads 0.70-1.20 at every knee and 1.00 at the reference knee.
STATED_LOW, STATED_HIGH = 0.70, 1.20


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("composite_inputs", REPO / "benchmarks" / "composite_inputs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


ci = _benchmark()


def _proposed_block() -> dict[str, Any]:
    blocks = re.findall(r"^```yaml\n(# proposed: composite-inputs\n.*?)^```", SIMULATION_DOC.read_text(), re.S | re.M)
    assert len(blocks) == 1, "docs/simulation.md holds one proposed composite-inputs block"
    doc = yaml.safe_load(blocks[0])
    assert isinstance(doc, dict)
    return doc


def _proposed_catalog() -> Any:
    """The embedded catalog with the proposed metrics added and its composites replaced by the proposed ones."""
    base = yaml.safe_load(resources.files("adapter").joinpath("catalog.yaml").read_text(encoding="utf-8"))
    block = _proposed_block()
    base["metrics"].update(block["metrics"])
    base["composites"] = block["composites"]
    return parse_catalog(base)


@pytest.fixture(scope="module")
def sweeps() -> list[Any]:
    return [ci.sweep(p, m, loads=(0.5, 1.0)) for p in PROFILES for m in MIXES]


def test_the_proposed_block_parses_into_the_catalog() -> None:
    catalog = _proposed_catalog()
    for name in ("inference_itl_p99_seconds", "inference_ttft_p99_seconds", "inference_kv_cache_usage"):
        assert name in catalog.metrics
        assert "<<matchers>>" in catalog.metrics[name].query
    terms = catalog.composites["llm_composite_load"].terms
    assert [t.metric for t in terms] == [ci.GPU, ci.QUEUE, ci.ITL]
    assert [t.weight for t in terms] == [0.4, 0.3, 0.3]
    assert catalog.composites["llm_composite_load"].flat_metrics == {ci.GPU}


def test_the_proposed_composite_reads_the_stated_spread_at_every_knee(sweeps: list[Any]) -> None:
    terms = _proposed_catalog().composites["llm_composite_load"].terms
    at_knees = ci.at_knees(terms, sweeps)
    assert len(at_knees) == len(PROFILES) * len(MIXES)
    for s, value in zip(sweeps, at_knees, strict=True):
        assert STATED_LOW <= value <= STATED_HIGH, (s.profile, s.mix, value)
    reference = next(v for s, v in zip(sweeps, at_knees, strict=True) if (s.profile, s.mix) == ci.REFERENCE)
    assert reference == pytest.approx(1.0, abs=0.01)


def test_the_proposed_targets_are_the_rule_applied_to_the_recommended_candidate(sweeps: list[Any]) -> None:
    reference = next(s for s in sweeps if (s.profile, s.mix) == ci.REFERENCE)
    ruled = {t.metric: t for t in ci.targets_for(ci.CANDIDATES[ci.RECOMMENDED], reference)}
    for term in _proposed_catalog().composites["llm_composite_load"].terms:
        assert term.target == pytest.approx(ruled[term.metric].target, rel=0.01), term.metric
        assert term.idle == pytest.approx(ruled[term.metric].idle, rel=0.01, abs=1e-9), term.metric


def test_the_composite_rises_with_load_below_every_knee(sweeps: list[Any]) -> None:
    terms = _proposed_catalog().composites["llm_composite_load"].terms
    for s in sweeps:
        assert ci.composite(terms, s.readings_at(0.5)) < ci.composite(terms, s.readings_at(1.0)), (s.profile, s.mix)


def test_the_embedded_composite_reads_just_above_one_at_the_default_mixs_knees(sweeps: list[Any]) -> None:
    """The embedded targets put 1.0 at the safe point (the knee over the HPA's band), so at the knee itself the
    composite reads a little above 1 on the default mix of both profiles: the HPA adds pods before the SLO breaks."""
    at_knees = ci.at_knees(tuple(ci.EMBEDDED), sweeps)
    default = [v for v, s in zip(at_knees, sweeps, strict=True) if s.mix == "azure-conversation"]
    assert len(default) == 2 and all(1.0 < v < 1.2 for v in default), default


def test_itl_is_the_input_whose_knee_readings_agree_best(sweeps: list[Any]) -> None:
    spread = {}
    for metric in ci.INPUTS:
        values = [s.at_knee(metric) for s in sweeps]
        spread[metric] = max(values) / min(values)
    assert min(spread, key=lambda m: spread[m]) == ci.ITL


def test_shape_tells_a_saturating_input_from_a_linear_one() -> None:
    import numpy as np

    loads = tuple(round(0.1 * i, 1) for i in range(1, 11))
    x = np.array(loads)
    linear = ci.Sweep("p", "m", 1.0, 2.0, loads, {"v": 3.0 * x}, {"v": 0.0})
    capped = ci.Sweep("p", "m", 1.0, 2.0, loads, {"v": 100.0 * (1.0 - np.exp(-8.0 * x))}, {"v": 0.0})
    a, b = ci.shape(linear, "v"), ci.shape(capped, "v")
    assert a.spearman == pytest.approx(1.0) and a.r2 == pytest.approx(1.0) and not a.saturates
    assert b.spearman == pytest.approx(1.0) and b.r2 < 0.9 and b.saturates
