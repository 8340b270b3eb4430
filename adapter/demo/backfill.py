"""The demo's history: the load the forecaster reads, written into Prometheus before it starts.

The forecaster needs ``history_points`` steps of load before it forecasts at all (and at least 30), so a
Prometheus that starts empty would keep ``llm_load_forecast`` at 404 for hours. The demo therefore writes the
fleet's past into the Prometheus data directory before launching it:

* ``history_span_s(forecast)`` -- how much simulated past the forecaster pulls (its model's lookback, one
  rate window, a few steps of slack);
* ``load_history(...)`` -- OpenMetrics text of ``vllm:request_success_total`` for each of the fleet's pods
  over that span, with exactly the labels the live exporter serves (``adapter.demo.render``). The counts
  are the trace's arrivals split evenly over the pods and capped at each pod's capacity (what the fleet
  would have completed in steady state): a history of the load, not a replay of the queueing physics, which
  would take minutes to integrate. Timestamps are wall (Unix) seconds on the demo's compressed clock, so the
  history joins the live scrapes without a gap. Pure.
* ``write_blocks(text, data_dir)`` -- ``promtool tsdb create-blocks-from openmetrics`` (shipped with the Debian
  ``prometheus`` package), the backfill path Prometheus documents; the blocks are read when Prometheus starts.

The live fleet's counters start again at 0, which ``rate()`` reads as a counter reset (as after a vLLM
restart), so the load stays continuous across the seam.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import tempfile
from pathlib import Path

from adapter.catalog import ForecastDef
from adapter.demo.render import VLLM_ENGINE, VLLM_FINISHED_REASONS
from adapter.exposition import label_pairs
from adapter.sim.forecasting import history_points
from adapter.sim.snapshot import FleetSnapshot
from adapter.sim.trace import ScaledTrace

PROMTOOL = "promtool"
_SLACK_STEPS = 3  # a few steps more than the lookback: the step grid and the first live scrape drift apart


class BackfillError(RuntimeError):
    """The history could not be written (promtool missing or failing); the message says why."""


def history_span_s(forecast: ForecastDef) -> float:
    """Simulated seconds of past the forecaster reads: its lookback, one rate window before the first step,
    and a few steps of slack. ``forecast`` is the catalog's (uncompressed) definition."""
    window = forecast.load.window_seconds or 0
    return (history_points(forecast) + _SLACK_STEPS) * forecast.step_s + window


def _labels(pairs: list[tuple[str, str]]) -> str:
    return "{" + label_pairs(pairs) + "}"


def load_history(
    snapshot: FleetSnapshot,
    trace: ScaledTrace,
    *,
    sim_end: float,
    span_s: float,
    interval_s: float,
    speed: float,
    wall_end: float,
    capacity_rps: float,
    target_labels: tuple[tuple[str, str], ...] = (),
) -> str:
    """OpenMetrics text of ``vllm:request_success_total`` for every serving pod of ``snapshot`` over the
    simulated interval ``[sim_end - span_s, sim_end)``, one sample every ``interval_s`` simulated seconds.

    Sample ``k`` at simulated time ``t`` carries the Unix timestamp ``wall_end - (sim_end - t) / speed``: on
    the compressed clock a simulated second lasts ``1 / speed`` wall seconds, so ``rate()`` over these counters
    reads the same (compressed) request rate as over the live fleet's. Counters are whole requests, monotone.
    ``target_labels`` (``instance``, ``job``) are the ones Prometheus will attach to the live scrapes, so history
    and live samples form one series per pod.
    """
    if not (span_s > 0 and interval_s > 0 and speed > 0):
        raise ValueError("span_s, interval_s and speed must be positive")
    pods = [p for p in snapshot.pods if p.serving]
    if not pods:
        return "# EOF\n"
    dep = snapshot.deployment
    steps = max(2, math.ceil(span_s / interval_s))
    start = sim_end - steps * interval_s
    series: list[tuple[str, list[str]]] = []
    for pod in pods:
        for reason in VLLM_FINISHED_REASONS:
            labels = [("container", dep.container), ("engine", VLLM_ENGINE), ("finished_reason", reason),
                      ("model_name", dep.model_name), ("namespace", pod.namespace), ("pod", pod.name),
                      *target_labels]  # fmt: skip
            series.append((reason, [f"vllm:request_success_total{_labels(labels)}"]))
    done = 0.0
    # Per-pod completions: arrivals split evenly (a Service's round robin), capped at the pod's capacity.
    for k in range(steps + 1):
        t = start + k * interval_s
        if k:
            rate = trace.rate_at(t - interval_s).rate / len(pods)
            done += min(rate, capacity_rps) * interval_s
        ts = f"{wall_end - (sim_end - t) / speed:.3f}"
        for reason, lines in series:
            value = math.floor(done) if reason == "stop" else 0
            lines.append(f"{lines[0]} {value} {ts}")
    out = ["# HELP vllm:request_success Count of successfully processed requests.",
           "# TYPE vllm:request_success counter"]  # fmt: skip
    for _, lines in series:
        out.extend(lines[1:])
    out.append("# EOF")
    return "\n".join(out) + "\n"


def write_blocks(text: str, data_dir: Path, *, timeout_s: float = 120.0) -> None:
    """Turn OpenMetrics ``text`` into TSDB blocks inside ``data_dir`` (a Prometheus that is not running yet)."""
    promtool = shutil.which(PROMTOOL)
    if promtool is None:
        raise BackfillError(
            "promtool not found on PATH: install the Debian package 'prometheus' (it ships promtool) "
            "or run `make sysdeps`"
        )
    with tempfile.TemporaryDirectory(prefix="llm-hpa-backfill-") as tmp:
        source = Path(tmp) / "history.om.txt"
        source.write_text(text, encoding="utf-8")
        try:
            done = subprocess.run(
                [promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(data_dir)],
                capture_output=True, text=True, timeout=timeout_s, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise BackfillError(f"promtool did not finish the backfill within {timeout_s:g}s") from None
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()[-2000:]
        raise BackfillError(f"promtool tsdb create-blocks-from openmetrics failed ({done.returncode}): {detail}")
