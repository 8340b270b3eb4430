"""The simulated fleet's options that ``simulate`` and ``calibrate --simulate`` share (one physics, one trace
reader for both): a trace's layout and token columns, and the token-level engine they choose."""

from __future__ import annotations

import argparse
from typing import Any


def add_trace_layout_arguments(group: argparse._ArgumentGroup) -> None:
    """The options that read ``--trace`` in another layout than the shared one, and its token columns
    (``load_trace_args``); ``simulate`` and ``calibrate --simulate`` share them."""
    group.add_argument(
        "--time-col", help="time column (seconds, see --time-unit, or ISO-8601); default: the shared layout"
    )
    group.add_argument("--time-unit", choices=["h", "min", "ms", "s"], help="unit of a numeric --time-col")
    group.add_argument("--index-step", help="the time column (or the row number) is an index this far apart")
    group.add_argument("--value-col", help="request-rate column (req/s; see --count)")
    group.add_argument("--gap-col", help="column that is 1 in collection gaps")
    group.add_argument("--count", action="store_true", help="the value column counts requests per row")
    group.add_argument("--prompt-tokens-col", help="column with the prompt tokens summed over each row's requests")
    group.add_argument("--output-tokens-col", help="column with the output tokens summed over each row's requests")


TRACE_LAYOUT_OPTIONS = (
    "time_col", "time_unit", "index_step", "value_col", "gap_col", "count", "prompt_tokens_col", "output_tokens_col",
)  # fmt: skip


def load_trace_args(args: argparse.Namespace) -> Any:
    """``--trace`` read as ``add_trace_layout_arguments``' options say (a ``RateTrace``, with per-window token
    means when the token columns are given); ``ValueError`` for contradictory options."""
    import numpy as np

    from adapter.cli.series_input import load_csv, parse_duration
    from adapter.sim.trace import DEFAULT_SUSPECT_FRACTION, RateTrace, load_trace

    if args.time_col is None and args.value_col is None:
        if args.time_unit or args.index_step:
            raise ValueError("--time-unit and --index-step need --value-col (a CSV in another layout)")
        if args.prompt_tokens_col or args.output_tokens_col:
            raise ValueError("token columns need --value-col and --count (rows count requests)")
        return load_trace(args.trace)
    if args.value_col is None:
        raise ValueError("--time-col needs --value-col")
    series = load_csv(
        args.trace,
        value_col=args.value_col,
        time_col=args.time_col,
        gap_col=args.gap_col,
        count=args.count,
        time_unit=args.time_unit,
        index_step_s=parse_duration(args.index_step) if args.index_step else None,
    )
    values = np.asarray(series.values, dtype=np.float64)
    known = values[np.isfinite(values)]
    if known.size == 0:
        raise ValueError(f"{args.trace}: no usable value in column {args.value_col!r}")
    # The same rule as load_trace: windows far below the median sit next to gaps and are not trusted.
    with np.errstate(invalid="ignore"):
        suspect = np.isfinite(values) & (values < DEFAULT_SUSPECT_FRACTION * float(np.median(known)))
    means: list[Any] = [None, None]
    if args.prompt_tokens_col or args.output_tokens_col:
        if not (args.prompt_tokens_col and args.output_tokens_col):
            raise ValueError("give both --prompt-tokens-col and --output-tokens-col")
        if not args.count:
            raise ValueError("token columns are sums per row: they need --count (rows count requests)")
        for k, col in enumerate((args.prompt_tokens_col, args.output_tokens_col)):
            sums = load_csv(
                args.trace,
                value_col=col,
                time_col=args.time_col,
                gap_col=args.gap_col,
                count=True,
                time_unit=args.time_unit,
                index_step_s=parse_duration(args.index_step) if args.index_step else None,
            )
            tokens = np.asarray(sums.values, dtype=np.float64)
            with np.errstate(invalid="ignore", divide="ignore"):
                means[k] = np.where(values > 0, tokens / np.where(values > 0, values, 1.0), np.nan)
    return RateTrace(
        step_s=series.step_s,
        rates=values,
        suspect=suspect,
        start_s=float(series.timestamps[0]),
        prompt_means=means[0],
        output_means=means[1],
    )


def token_engine(args: argparse.Namespace, trace: Any) -> Any:
    """The ``TokenEngine`` of ``--profile``, ``--slo`` and the mix: the trace's own mean mix when it has token
    columns, else ``--mix`` (``trace`` may be None); ``ValueError`` when both give the mix."""
    from dataclasses import replace

    from adapter.sim.mix import DEFAULT_MIX, mix
    from adapter.sim.profiles import DEFAULT_PROFILE, profile
    from adapter.sim.slo import DEFAULT_SLO, parse_slo
    from adapter.sim.tokenfleet import TokenEngine

    chosen = mix(args.mix or DEFAULT_MIX)
    if trace is not None and trace.prompt_means is not None:
        if args.mix is not None:
            raise ValueError("--mix and token columns both give the mix: use one")
        from adapter.sim.trace import ScaledTrace

        own = ScaledTrace(trace, peak_rps=1.0).mean_mix()
        assert own is not None
        chosen = replace(chosen.at(*own), name="trace", source=f"token columns of {args.trace}")
    return TokenEngine(profile(args.profile or DEFAULT_PROFILE), chosen, parse_slo(args.slo or DEFAULT_SLO))
