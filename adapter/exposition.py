"""Prometheus text exposition: the one label-value escaping rule, for the adapter's /metrics and the demo's.

Text format label values escape backslash, double quote and line feed, nothing else (prometheus/docs
``content/docs/instrumenting/exposition_formats.md``, "Text format details"). PromQL string literals are a
different grammar (Go quoting) and live in ``query/promql.py``.
"""

from __future__ import annotations

from collections.abc import Iterable


def escape_label_value(value: str) -> str:
    """``value`` as it goes between the double quotes of ``name="..."``."""
    if "\\" in value or '"' in value or "\n" in value:  # the common case (nothing to escape) allocates nothing
        return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return value


def label_pairs(pairs: Iterable[tuple[str, str]]) -> str:
    """``a="x",b="y"``: the inside of a label set (no braces), values escaped, in the given order."""
    return ",".join(f'{name}="{escape_label_value(value)}"' for name, value in pairs)
