"""What the demo reads from the adapter and prints: the suggested ``kubectl get --raw`` paths, the Deployment's
Object metrics as the adapter serves them (``read_view``), and the status line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from urllib.parse import quote

import httpx

from adapter.api.groups import PREFIX
from adapter.demo.runner import RunnerStatus
from adapter.quantity import parse_quantity
from adapter.sim.trace import format_sim_time

API_PREFIX = f"{PREFIX}/v1beta2"
POD_METRICS = ("llm_composite_load", "llm_composite_load_boosted", "gpu_utilization_p90", "inference_queue_depth")
OBJECT_METRICS = ("llm_composite_load", "llm_load_forecast", "llm_load_boost", "llm_composite_load_boosted")


def metric_paths(namespace: str, deployment: str) -> list[str]:
    """API paths the demo suggests: discovery, Pods metrics by ``app=<deployment>``, then the Deployment's
    Object metrics (the composite, the forecast, the boost and the boosted composite)."""
    selector = quote(f"app={deployment}", safe="")
    paths = [API_PREFIX]
    paths += [f"{API_PREFIX}/namespaces/{namespace}/pods/*/{m}?labelSelector={selector}" for m in POD_METRICS]
    paths += [f"{API_PREFIX}/namespaces/{namespace}/deployments.apps/{deployment}/{m}" for m in OBJECT_METRICS]
    return paths


def kubectl_command(server: str, path: str) -> str:
    """A ready-to-paste ``kubectl get --raw`` against a plain-HTTP adapter."""
    return f"kubectl --server={server} get --raw '{path}'"


@dataclass(frozen=True)
class AdapterView:
    """What the adapter answered for the Deployment at one instant (NaN: no answer, e.g. a 404 reason)."""

    composite: float = math.nan
    boost: float = math.nan
    boosted: float = math.nan
    forecast_rps: float = math.nan  # simulated requests/s (the served value divided by the speed)
    forecast_reason: str = ""  # why there is no forecast, from the adapter's 404 message


def _fmt(value: float, spec: str = ".2f") -> str:
    return "-" if math.isnan(value) else format(value, spec)


def status_line(status: RunnerStatus, view: AdapterView | None = None) -> str:
    """One line: simulated time, arrival rate (and whether it is held over a gap), replicas, queue, P99, and
    (when given) the adapter's live composite next to the forecast, the boost and the boosted composite."""
    rate = f"{status.rate.rate:6.1f} req/s"
    if status.rate.held:
        rate += f" (held: {status.rate.status.value})"
    line = (
        f"[{format_sim_time(status.sim_time_s)}] arrivals {rate} | replicas {status.desired} "
        f"(ready {status.ready}, loading {status.loading}, terminating {status.terminating}) | "
        f"waiting {status.waiting:.0f} running {status.running:.0f} | "
        f"worst TTFT P99 {status.ttft_p99_s:.2f}s, ITL P99 {status.itl_p99_s * 1000:.0f}ms"
    )
    if view is not None:
        forecast = (
            f"forecast {_fmt(view.forecast_rps, '.1f')} req/s"
            if not math.isnan(view.forecast_rps)
            else f"forecast - ({view.forecast_reason or 'no answer'})"
        )
        line += (
            f" | composite {_fmt(view.composite)}, boost {_fmt(view.boost)}: boosted {_fmt(view.boosted)} | {forecast}"
        )
    return line


def read_object_metric(client: httpx.Client, namespace: str, deployment: str, metric: str) -> tuple[float, str]:
    """One Object metric of the Deployment: (value, "") or (NaN, the adapter's message when it answered)."""
    path = f"{API_PREFIX}/namespaces/{namespace}/deployments.apps/{deployment}/{metric}"
    try:
        response = client.get(path)
        body = response.json()
    except (httpx.HTTPError, ValueError) as exc:
        return math.nan, f"unreachable: {exc}"
    if response.status_code != 200:
        return math.nan, str(body.get("message", response.status_code)) if isinstance(body, dict) else ""
    try:
        return float(parse_quantity(str(body["items"][0]["value"]))), ""
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        return math.nan, f"bad answer: {exc}"


def read_view(client: httpx.Client, namespace: str, deployment: str, speed: float) -> AdapterView:
    """The Deployment's composite, boost, boosted composite and forecast, as the adapter serves them now (the
    forecast in simulated requests/s: the served value divided by the clock's ``speed``)."""
    values: dict[str, float] = {}
    reason = ""
    for metric in OBJECT_METRICS:
        value, message = read_object_metric(client, namespace, deployment, metric)
        values[metric] = value
        if metric == "llm_load_forecast" and message:
            # "no forecast: insufficient_history" -> the reason after the last colon.
            reason = message.rsplit(":", 1)[-1].strip()
    return AdapterView(
        composite=values["llm_composite_load"],
        boost=values["llm_load_boost"],
        boosted=values["llm_composite_load_boosted"],
        forecast_rps=values["llm_load_forecast"] / speed,
        forecast_reason=reason,
    )
