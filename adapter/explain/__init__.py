"""``explain``: why the HPA sees the number it sees, pod by pod.

Three parts, from pure to I/O: ``model`` (the ``Explanation`` dataclasses and their JSON form), ``build``
(pure: turns the provider's answers into an ``Explanation``, naming the missing piece whenever a value is
absent or degraded), ``collect`` (``explain()``: asks the provider, through the narrow ``ExplainSource``
interface, the same questions the API asks it, plus one raw query per GPU metric) and ``render`` (``rich``
tables for a terminal or as text; no I/O).
"""

from __future__ import annotations

from adapter.explain.build import build, explain_forecast, explain_hpa, raw_queries
from adapter.explain.collect import ExplainSource, explain
from adapter.explain.model import (
    Explanation,
    ForecastExplanation,
    GpuSample,
    HPAExplanation,
    HPAMetricExplanation,
    PodExplanation,
    TermExplanation,
)
from adapter.explain.render import renderables, to_text

__all__ = [
    "ExplainSource",
    "Explanation",
    "ForecastExplanation",
    "GpuSample",
    "HPAExplanation",
    "HPAMetricExplanation",
    "PodExplanation",
    "TermExplanation",
    "build",
    "explain",
    "explain_forecast",
    "explain_hpa",
    "raw_queries",
    "renderables",
    "to_text",
]
