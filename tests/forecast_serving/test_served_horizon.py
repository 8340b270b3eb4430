"""A model that tunes itself at a lead time tunes at the horizon the catalog serves (horizon_steps x step)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from adapter.catalog import parse_catalog
from adapter.demo.catalogs import catalog_document
from adapter.forecast.registry import get_model
from adapter.forecast_service import _at_served_horizon, fit_history


def test_ses_fits_on_a_short_step_because_it_tunes_at_the_served_horizon() -> None:
    spec = parse_catalog(catalog_document(None)).forecast
    assert spec is not None
    spec = replace(spec, model="ses")  # this test is about ses (the default is ses_ar_margin, tested below)
    rng = np.random.default_rng(0)
    history = 100.0 + rng.normal(0.0, 5.0, spec.history_points)
    default = fit_history(history, step_ts=1e9, spec=spec)
    assert default.reason == "ok"
    # The same 120 points on a 5 s step (a catalog on a compressed clock, 30 s ahead): with a fixed 30 min
    # tuning lead the model would need 360 points and answer insufficient_history.
    short = fit_history(history, step_ts=1e9, spec=replace(spec, step_s=5.0))
    assert short.reason == "ok" and short.forecast is not None
    assert short.forecast.shape == (spec.horizon_steps,)
    # The default catalog serves 30 min (6 x 5 min), the design's horizon: the served horizon changes nothing there.
    assert spec.horizon_steps * spec.step_s == 1800.0
    assert _at_served_horizon(get_model("ses"), spec).horizon_s == 1800.0
    # A catalog serving 15 min (3 x 5 min): ses tunes its margin at that lead, not at its built-in 30 min.
    shorter = replace(spec, horizon_steps=3)
    assert _at_served_horizon(get_model("ses"), shorter).horizon_s == 900.0 != get_model("ses").horizon_s
    np.testing.assert_array_equal(default.forecast, fit_history(history, step_ts=1e9, spec=spec).forecast)


def test_a_catalog_can_select_the_margin_models_and_they_tune_at_the_served_horizon() -> None:
    doc = catalog_document(None)
    rng = np.random.default_rng(1)
    history = 100.0 + rng.normal(0.0, 5.0, 120)
    for name in ("ar_margin", "ses_ar_margin"):
        doc["forecast"]["model"] = name
        spec = parse_catalog(doc).forecast
        assert spec is not None and spec.model == name
        state = fit_history(history, step_ts=1e9, spec=spec)
        assert state.model == name and state.reason == "ok" and state.forecast is not None
        assert state.forecast.shape == (spec.horizon_steps,) and state.boost >= 1.0
    shorter = replace(spec, horizon_steps=3)
    assert _at_served_horizon(get_model("ses_ar_margin"), shorter).horizon_s == 900.0
