"""The boost's upper-quantile part as the server computes it (``fit_history``): a workload whose load jumps
gets the headroom of its own jumps, a smooth one none, and ``rise_quantile: 0`` is the plain point boost."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from adapter.catalog import parse_catalog
from adapter.demo.catalogs import catalog_document
from adapter.forecast.boost import rise_quantile
from adapter.forecast_service import fit_history


def _spec():  # type: ignore[no-untyped-def]
    spec = parse_catalog(catalog_document(None)).forecast
    assert spec is not None
    return spec


def test_a_jumpy_workload_is_boosted_by_at_least_its_own_rise() -> None:
    spec = _spec()
    assert spec.rise_quantile == 0.7 and spec.rise_lead_steps == 3  # the shipped 15 min at a 5 min step
    rng = np.random.default_rng(1)
    # A load that is 100 or 130 req/s at random from one 5-minute step to the next: no trend for a level model
    # to see, but from a 100 the next 15 minutes hold a 130 seven times in eight.
    steps = rng.choice([100.0, 130.0], size=spec.history_points)
    state = fit_history(steps, step_ts=1e9, spec=spec)
    plain = fit_history(steps, step_ts=1e9, spec=replace(spec, rise_quantile=0.0))
    rise = rise_quantile(steps, spec.rise_lead_steps, spec.rise_quantile)
    assert rise is not None and rise > 0.25
    assert state.reason == plain.reason == "ok"
    assert state.boost >= 1.0 + rise - 1e-12
    assert state.boost > plain.boost
    # The state says what the boost was made of (explain shows it): its rise, and the point peak's ratio.
    assert state.rise == rise and plain.rise == 0.0
    assert state.current > 0 and state.peak is not None
    assert state.boost == min(max(state.peak / state.current, 1.0 + rise), spec.max_boost)
    np.testing.assert_array_equal(state.forecast, plain.forecast)  # the served forecast is the model's own


def test_a_smooth_workload_gets_no_rise() -> None:
    spec = _spec()
    flat = np.full(spec.history_points, 100.0)
    state = fit_history(flat, step_ts=1e9, spec=spec)
    assert rise_quantile(flat, spec.rise_lead_steps, spec.rise_quantile) == 0.0
    assert state.reason == "ok" and state.boost == 1.0
