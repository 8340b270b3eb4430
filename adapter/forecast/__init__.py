"""Load forecasting: models behind one narrow interface, per-workload selection, the boost, and backtests.

Pure numerics (numpy; statsmodels only inside ``arima``'s fit). Fits are CPU work: run them off the event
loop. Importing this package has no side effects.
"""

from __future__ import annotations

from adapter.forecast.backtest import run_backtest
from adapter.forecast.base import Fitted, Forecaster, ForecastError
from adapter.forecast.boost import boost_factor
from adapter.forecast.registry import AUTO, DEFAULT_MODEL, MODELS, get_model
from adapter.forecast.select import Selection, select_model

__all__ = [
    "AUTO",
    "DEFAULT_MODEL",
    "MODELS",
    "Fitted",
    "ForecastError",
    "Forecaster",
    "Selection",
    "boost_factor",
    "get_model",
    "run_backtest",
    "select_model",
]
