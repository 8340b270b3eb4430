"""What the demo saw, sample by sample, and the PNG (and JSON) it writes on exit.

``Timeline`` collects one ``Sample`` per second of the demo: the trace's arrival rate, the fleet's replicas,
the P99 the fleet served (on token-level engines its TTFT and ITL P99, drawn against their SLO bounds), and
what the adapter answered for the Deployment (composite, boost, boosted composite, forecast). ``write_png``
draws it with matplotlib's Agg backend (no display needed); ``write_json`` writes the same samples (``demo
--json FILE``). Values the adapter did not answer are NaN: a gap in the plot, ``null`` in the JSON, never a
made-up point.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Sample:
    """One instant of the demo. Rates are simulated requests/s; NaN where the adapter had no answer."""

    sim_time_s: float
    arrivals_rps: float
    desired: int
    ready: int
    composite: float = math.nan
    boost: float = math.nan
    boosted: float = math.nan
    forecast_rps: float = math.nan
    ttft_p99_s: float = math.nan  # the worst ready pod's TTFT and ITL P99
    itl_p99_s: float = math.nan


@dataclass
class Timeline:
    """Samples in time order, plus what the plot needs to label them."""

    speed: float
    autoscale: bool
    samples: list[Sample] = field(default_factory=list)
    slo_ttft_s: float | None = None  # the TTFT and ITL P99 bounds the plot draws (None: not stated)
    slo_itl_s: float | None = None
    max_replicas: int | None = None  # the HPA's maxReplicas (autoscale)
    trace_peak_rps: float | None = None  # the scaled trace's peak arrival rate (simulated requests/s)

    def add(self, sample: Sample) -> None:
        self.samples.append(sample)

    def document(self) -> dict[str, object]:
        """The timeline as JSON-ready data: the run's settings and one object per sample (NaN as None)."""

        def clean(value: object) -> object:
            return None if isinstance(value, float) and not math.isfinite(value) else value

        return {
            "speed": self.speed,
            "autoscale": self.autoscale,
            "slo_ttft_s": self.slo_ttft_s,
            "slo_itl_s": self.slo_itl_s,
            "max_replicas": self.max_replicas,
            "trace_peak_rps": self.trace_peak_rps,
            "samples": [{k: clean(v) for k, v in asdict(sample).items()} for sample in self.samples],
        }

    def write_json(self, path: Path) -> Path:
        """Write ``document()`` to ``path`` (strict JSON: no NaN); returns ``path``."""
        path.write_text(json.dumps(self.document(), indent=1, allow_nan=False) + "\n", encoding="utf-8")
        return path

    def write_png(self, path: Path) -> Path:
        """Draw load, replicas, composite/boost and P99 vs the SLO against simulated hours; returns ``path``.

        Raises ``ValueError`` with fewer than two samples (nothing to draw a line through).
        """
        if len(self.samples) < 2:
            raise ValueError("the demo stopped before it had two samples to plot")
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        s = self.samples
        hours = [x.sim_time_s / 3600.0 for x in s]
        fig, (ax_load, ax_rep, ax_comp, ax_p99) = plt.subplots(4, 1, figsize=(11, 10), sharex=True)
        ax_load.plot(hours, [x.arrivals_rps for x in s], color="black", linewidth=1, label="arrivals (trace)")
        ax_load.plot(hours, [x.forecast_rps for x in s], color="tab:orange", linewidth=1,
                     label="llm_load_forecast (30 min peak)")  # fmt: skip
        ax_load.set_ylabel("requests/s")
        ax_load.legend(loc="upper left", fontsize=8)
        ax_rep.plot(hours, [x.desired for x in s], drawstyle="steps-post", label="desired (Deployment spec)")
        ax_rep.plot(hours, [x.ready for x in s], drawstyle="steps-post", linestyle="--", label="ready")
        if self.max_replicas is not None:
            ax_rep.axhline(self.max_replicas, color="grey", linewidth=0.8, linestyle=":", label="maxReplicas")
        ax_rep.set_ylabel("replicas")
        ax_rep.legend(loc="upper left", fontsize=8)
        ax_comp.plot(hours, [x.composite for x in s], label="llm_composite_load")
        ax_comp.plot(hours, [x.boosted for x in s], label="llm_composite_load_boosted")
        ax_comp.plot(hours, [x.boost for x in s], linestyle=":", label="llm_load_boost")
        ax_comp.axhline(1.0, color="grey", linewidth=0.8)
        ax_comp.set_ylabel("Deployment value")
        ax_comp.legend(loc="upper left", fontsize=8)
        ax_p99.plot(hours, [x.ttft_p99_s for x in s], color="tab:red", label="worst pod TTFT P99")
        ax_p99.plot(hours, [x.itl_p99_s for x in s], color="tab:blue", label="worst pod ITL P99")
        if self.slo_ttft_s is not None:
            ax_p99.axhline(self.slo_ttft_s, color="tab:red", linestyle="--", label=f"TTFT SLO {self.slo_ttft_s:g} s")
        if self.slo_itl_s is not None:
            ax_p99.axhline(
                self.slo_itl_s, color="tab:blue", linestyle="--", label=f"ITL SLO {self.slo_itl_s * 1000:g} ms"
            )
        ax_p99.set_yscale("log")
        ax_p99.set_ylabel("latency (s)")
        ax_p99.set_xlabel("simulated hours (day 0 = 0 h)")
        ax_p99.legend(loc="upper left", fontsize=8)
        mode = "HPA closed loop (--autoscale)" if self.autoscale else "fixed replicas"
        ax_load.set_title(f"llm-hpa-adapter demo: {mode}, trace x{self.speed:g}")
        fig.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fig.savefig(path, dpi=100)
        finally:
            plt.close(fig)
        return path
