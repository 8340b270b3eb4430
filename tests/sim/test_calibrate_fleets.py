"""benchmarks/calibrate_fleets.py's calibration half: ``calibrate --simulate`` for one profile x mix becomes a
catalog that loads, differs from the embedded one only in the composite's terms, and carries what calibrate
proposed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import yaml

from adapter.catalog import load_catalog

REPO = Path(__file__).resolve().parents[2]


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("calibrate_fleets", REPO / "benchmarks" / "calibrate_fleets.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations through sys.modules
    sys.path.append(str(REPO / "benchmarks"))  # it imports simrun
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    return module


cf = _benchmark()


def test_a_calibrated_cell_is_the_embedded_catalog_with_the_proposed_terms(tmp_path: Path) -> None:
    cal = cf._calibrate("llama3-8b-h100", "azure-code", None, tmp_path)
    assert cal.catalog is not None and cal.knee is not None and 0 < cal.safe < cal.knee
    shipped, tuned = load_catalog(None), load_catalog(cal.catalog)
    name = shipped.forecast.base
    proposed = {t["metric"]: float(t["target"]) for t in cal.terms}
    assert {t.metric: t.target for t in tuned.composites[name].terms} == proposed
    # A code mix reads another GPU utilization at its knee than the conversation mix the catalog ships for.
    assert proposed != {t.metric: t.target for t in shipped.composites[name].terms}
    before = yaml.safe_load((REPO / "adapter" / "catalog.yaml").read_text())
    after = yaml.safe_load(cal.catalog.read_text())
    for doc in (before, after):
        del doc["composites"][name]["terms"], doc["composites"][name]["help"]
    assert after == before
    assert cf.terms_text(cal.terms).startswith("GPU ")


def test_the_growth_quantile_reaches_calibrate(tmp_path: Path) -> None:
    """``--growth-quantile`` is passed to every cell's ``calibrate``: a higher quantile of the trace's demand growth
    leaves more headroom, a lower safe point below the same knee."""
    (tmp_path / "median").mkdir()
    (tmp_path / "high").mkdir()
    median = cf._calibrate("llama3-8b-h100", "azure-conversation", None, tmp_path / "median")
    high = cf._calibrate("llama3-8b-h100", "azure-conversation", None, tmp_path / "high", growth_quantile=0.9)
    assert median.knee is not None and high.knee == median.knee
    assert high.safe is not None and median.safe is not None and high.safe < median.safe
