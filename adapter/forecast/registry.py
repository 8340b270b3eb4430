"""Models by name: ``MODELS`` and ``get_model(name, **params)`` (what settings, the CLI and ``auto`` use)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from adapter.forecast.ar import AutoRegressive
from adapter.forecast.arima import Arima
from adapter.forecast.base import Forecaster
from adapter.forecast.baselines import Persistence, SeasonalNaive
from adapter.forecast.fourier_ar import FourierAR
from adapter.forecast.margined import ArMargin, SesArMargin
from adapter.forecast.ses import SimpleExpSmoothing

AUTO = "auto"

MODELS: dict[str, Callable[..., Forecaster]] = {
    "persistence": Persistence,
    "seasonal_naive": SeasonalNaive,
    "ses": SimpleExpSmoothing,
    "ar": AutoRegressive,
    "ar_margin": ArMargin,
    "ses_ar_margin": SesArMargin,
    "fourier_ar": FourierAR,
    "arima": Arima,
}

# The model the adapter uses when the settings name none: chosen from benchmarks/forecast_accuracy.py (the one
# model with a lower WAPE *and* a lower under-forecast rate than persistence in every shared-trace column, and
# no worse on the traces without a daily cycle, docs/forecasting.md "The models") and cheap enough
# (benchmarks/forecast_cost.py) to refit thousands of workloads per step on one core.
DEFAULT_MODEL = "ses_ar_margin"


def get_model(name: str, **params: Any) -> Forecaster:
    """A new model ``name`` built with ``params`` (the model's dataclass fields).

    Raises ``ValueError`` for an unknown name (the message lists the known ones; ``auto`` is a selection,
    see ``select.select_model``) or for parameters the model does not take or rejects.
    """
    if name == AUTO:
        raise ValueError("'auto' is not a model but a per-workload selection: use select.select_model")
    try:
        factory = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown forecast model {name!r}; known: {', '.join(sorted(MODELS))}, auto") from None
    try:
        return factory(**params)
    except TypeError as exc:
        raise ValueError(f"bad parameters for forecast model {name!r}: {exc}") from exc
