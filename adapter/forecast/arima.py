"""``arima``: statsmodels' exact-likelihood ARIMA (default order (5,1,0)), the design's seed model.

Kept selectable by name for comparison; it costs tens of milliseconds per fit (see
``benchmarks/forecast_cost.py``), so it is not among the ``auto`` candidates by default. The state-space
Kalman filter treats NaN observations as missing, so gaps are masked without any filling.

statsmodels is imported inside ``fit`` (its cold import takes seconds; importing this module stays cheap).
Its warnings are captured locally: a non-converged optimiser is a ``ForecastError("fit_failed")`` and the
other warnings (start-parameter notices and the like) never reach the process's log.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapter.forecast.base import (
    DEFAULT_MAX_TRAILING_GAP,
    DEFAULT_MIN_POINTS,
    Fitted,
    ForecastError,
    check_steps,
    checked,
    prepare,
)


@dataclass(frozen=True)
class _FittedARIMA:
    results: Any  # statsmodels ARIMAResults (untyped library)
    skip: int

    def forecast(self, steps: int) -> np.ndarray:
        check_steps(steps)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                path = np.asarray(self.results.forecast(steps + self.skip), dtype=np.float64)
        except (ValueError, np.linalg.LinAlgError) as exc:
            raise ForecastError("fit_failed", f"ARIMA forecast failed: {exc}") from exc
        return checked(path[self.skip :], steps)


@dataclass(frozen=True)
class Arima:
    """ARIMA(``order``) fitted by maximum likelihood (statsmodels state space); ``trend`` as statsmodels.

    Raises ``ForecastError("fit_failed")`` when statsmodels raises or reports non-convergence.
    """

    order: tuple[int, int, int] = (5, 1, 0)
    trend: str | None = None
    min_points: int = DEFAULT_MIN_POINTS
    max_trailing_gap: int = DEFAULT_MAX_TRAILING_GAP
    name: str = "arima"

    def fit(self, values: np.ndarray, *, step_s: float, start_ts: float) -> Fitted:
        """Maximum-likelihood fit on the history (gaps as missing observations)."""
        hist = prepare(values, step_s=step_s, min_points=self.min_points, max_trailing_gap=self.max_trailing_gap)
        from statsmodels.tools.sm_exceptions import ConvergenceWarning  # type: ignore[import-untyped]
        from statsmodels.tsa.arima.model import ARIMA  # type: ignore[import-untyped]

        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                results = ARIMA(hist.values, order=tuple(self.order), trend=self.trend).fit()
            except (ValueError, np.linalg.LinAlgError, IndexError) as exc:
                raise ForecastError("fit_failed", f"ARIMA{tuple(self.order)} fit failed: {exc}") from exc
        if any(issubclass(w.category, ConvergenceWarning) for w in caught):
            raise ForecastError("fit_failed", f"ARIMA{tuple(self.order)} did not converge")
        retvals = getattr(results, "mle_retvals", None) or {}
        if retvals.get("converged") is False:
            raise ForecastError("fit_failed", f"ARIMA{tuple(self.order)} did not converge")
        return _FittedARIMA(results=results, skip=hist.skip)

    def history_points(self, step_s: float, default: int) -> int:
        """The recent past only: ``default``."""
        return default
