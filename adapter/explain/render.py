"""An ``Explanation`` for people: ``rich`` tables for a terminal, or the same as plain text. No I/O."""

from __future__ import annotations

import io
import math

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from adapter.explain.model import Explanation


def _num(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}g}"


def renderables(ex: Explanation) -> list[RenderableType]:
    """Rich tables and lines for a terminal (``rich.console.Console.print`` each, or export as text)."""
    out: list[RenderableType] = []
    target = f"Deployment {ex.deployment}" if ex.deployment else f"selector {ex.selector}"
    out.append(
        Text(
            f"{ex.metric} for {target} in namespace {ex.namespace}"
            + (f" (reads {ex.base_metric})" if ex.base_metric != ex.metric else ""),
            style="bold",
        )
    )
    if ex.data_age_s is not None:
        out.append(Text(f"served values are {ex.data_age_s:.1f} s old (the value store's latest refresh)"))
    if ex.queries or ex.raw_queries:
        q = Table(title="PromQL sent (one query per metric for all the pods)", show_lines=True, expand=False)
        q.add_column("metric")
        q.add_column("kind")
        q.add_column("PromQL", overflow="fold")
        for name, text in ex.queries.items():
            q.add_row(name, "served", text)
        for name, text in ex.raw_queries.items():
            q.add_row(name, "raw per-GPU", text)
        out.append(q)
    for pod in ex.pods:
        t = Table(title=f"pod {pod.pod}", title_justify="left")
        for col in (
            "term",
            "value",
            "per-GPU samples",
            "P90 (numpy)",
            "target",
            "weight",
            "value/target",
            "contribution",
        ):
            t.add_column(col, overflow="fold")
        for term in pod.terms:
            gpus = " ".join(
                f"{g.gpu.get('gpu') or next(iter(g.gpu.values()), '?')}={g.value:g}" for g in term.gpu_samples
            )
            t.add_row(
                term.metric,
                _num(term.value),
                gpus or "-",
                _num(term.gpu_p90),
                _num(term.target),
                _num(term.weight, 3),
                _num(term.normalized),
                _num(term.contribution),
            )
        lines: list[RenderableType] = [t]
        receives = pod.quantity if pod.quantity is not None else "nothing"
        flat = " (flat terms up to their target)" if ex.boost_flat_share > 0 and pod.boost != 1.0 else ""
        lines.append(
            Text(
                f"  {ex.base_metric} = {_num(pod.value, 6)}   boost = {pod.boost:g}{flat}   "
                f"HPA receives {ex.metric} = {receives}",
                style="bold",
            )
        )
        for m in pod.missing:
            lines.append(Text(f"  missing: {m}", style="red"))
        out.append(Group(*lines))
    if ex.object_quantity is not None:
        out.append(Text(f"Deployment {ex.deployment}: {ex.metric} = {ex.object_quantity}", style="bold"))
    if ex.forecast is not None:
        f = ex.forecast
        fc = ", ".join(_num(v) for v in f.forecast) if f.forecast is not None else "-"
        out.append(
            Text(
                f"forecast for {f.workload}: model {f.model or '-'}, {f.reason}; load now "
                f"{_num(f.current_load)} req/s, forecast [{fc}] (peak {_num(f.peak)}), "
                f"rise {f.rise:.1%}, boost {f.boost:g}"
            )
        )
    if ex.hpa is not None:
        h = ex.hpa
        used = ", ".join(h.metrics) or "no matching metric"
        out.append(
            Text(
                f"HPA {h.name} ({used}): {h.current_replicas} replicas now, usage {h.usage or '-'}, "
                f"formula proposes {h.metric_replicas}, desired {h.desired_replicas} ({h.reason})"
                + (f"; {h.error}" if h.error else ""),
                style="bold",
            )
        )
        for e in h.proposals:
            won = "  <- the largest: the HPA takes it" if len(h.proposals) > 1 and e.metric == h.decided_by else ""
            out.append(
                Text(
                    f"  {e.metric}: usage {e.usage or '-'} against {e.target}, proposes "
                    + (f"{e.replicas}{won}" if e.replicas is not None else f"nothing ({e.error})")
                )
            )
        if h.ignored:
            out.append(Text(f"  not explained (not served by this adapter): {', '.join(h.ignored)}", style="dim"))
    for p in ex.problems:
        out.append(Text(f"problem: {p}", style="red"))
    return out


def to_text(ex: Explanation, width: int = 120) -> str:
    """The tables as plain text (the HTTP endpoint's ``format=text``)."""
    console = Console(width=width, record=True, color_system=None, file=io.StringIO())
    for r in renderables(ex):
        console.print(r)
    return console.export_text()
