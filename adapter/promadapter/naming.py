"""Series names -> API metric names, as one rule's ``seriesFilters`` and ``name`` define them.

``passes`` is ``metricNamer.FilterSeries`` for one name: every filter must match (``name.matches`` is the last
one, so a name the pattern does not match never reaches naming). ``metric_name`` is
``MetricNameForSeries``: the first match of ``name.matches`` (unanchored, as Go's ``FindStringSubmatchIndex``)
expanded through ``name.as`` with Go's ``$1`` / ``${1}`` / ``$name`` rules (``pkg/naming/metric_namer.go``).
"""

from __future__ import annotations

from adapter.promadapter.config import Rule
from adapter.promadapter.goregexp import expand


def passes(rule: Rule, series_name: str) -> bool:
    """Whether a series of this name is one of the rule's (all its filters match)."""
    return all(f.matches(series_name) for f in rule.series_filters)


def metric_name(rule: Rule, series_name: str) -> str | None:
    """The name the rule serves a series under, or None when ``name.matches`` does not match it."""
    m = rule.name_matches.search(series_name)
    return None if m is None else expand(rule.name_as, m)
