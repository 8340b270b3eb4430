"""The HPA controller of ``simulate --live`` and ``demo --autoscale``: what it sees, what it reads, what it
decides, and the replay that checks it.

``Autoscaler.sync`` lists the pods as the controller's pod lister would (from the fleet, as the Kubernetes API holds
them), reads each Pods metric exactly as the controller does (``GET .../v1beta2/namespaces/<ns>/pods/%2A/<metric>
?labelSelector=<scale selector>``, ``MilliValue()`` of every item), reconciles ``adapter.hpa``'s model and applies a
rescale to the fleet. ``replay`` feeds the recorded syncs to a *fresh* ``HPAModel`` whose replica count follows only
its own decisions: identical decisions at every sync prove that the live HPA is the offline model, fed nothing but
what it read over HTTP, and that each decision reached the fleet (the next sync's replica count is the previous
decision).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from adapter.api.groups import PREFIX
from adapter.hpa.controller import ControllerConfig, HPAModel
from adapter.hpa.proposals import MetricReading
from adapter.hpa.replicas import PodInfo
from adapter.hpa.spec import HPASpec
from adapter.quantity import milli_value, parse_quantity
from adapter.sim.observer import pod_info
from adapter.sim.simulate import SimulationError, SyncRecord
from adapter.sim.snapshot import FleetSnapshot, PodPhase

API = f"{PREFIX}/v1beta2"


def pod_infos(snapshot: FleetSnapshot, cpu_request_milli: int) -> tuple[PodInfo, ...]:
    """The pods the scale selector lists, as the Kubernetes API holds them (``observer.pod_info``, the
    offline engine's conversion): a loading pod is Running but not Ready; a deleted (draining) pod has its
    deletion timestamp set."""
    return tuple(
        pod_info(
            pod.name,
            ready=pod.phase is PodPhase.READY,
            created=pod.created_at,
            ready_at=pod.ready_at,
            cpu_request_milli=cpu_request_milli,
            deleted=pod.phase is PodPhase.TERMINATING,
        )
        for pod in snapshot.pods
    )


def pods_metric_path(namespace: str, metric: str) -> str:
    """The path the HPA requests for a Pods metric (kubernetes/metrics versioned_client.go:
    ``GetForObjects`` with name ``*``, escaped as the client's URL builder does)."""
    return f"{API}/namespaces/{quote(namespace, safe='')}/pods/%2A/{quote(metric, safe='')}"


def read_pods_metric(client: httpx.Client, namespace: str, metric: str, selector: str) -> MetricReading:
    """One Pods-metric read as the HPA controller does it: ``{describedObject.name: MilliValue()}`` of every
    item, or a failed reading carrying the error (kubernetes pkg/controller/podautoscaler/metrics/client.go
    ``GetRawMetric``)."""
    try:
        response = client.get(pods_metric_path(namespace, metric), params={"labelSelector": selector})
    except httpx.HTTPError as exc:
        return MetricReading.failed(f"unable to fetch metrics from custom metrics API: {exc}")
    if response.status_code != 200:
        try:
            message = str(response.json().get("message", response.text))
        except ValueError:
            message = response.text.strip()
        return MetricReading.failed(f"unable to fetch metrics from custom metrics API: {message}")
    try:
        items = response.json()["items"]
        values = {str(i["describedObject"]["name"]): milli_value(parse_quantity(str(i["value"]))) for i in items}
    except (ValueError, KeyError, TypeError) as exc:
        return MetricReading.failed(f"unable to fetch metrics from custom metrics API: bad answer: {exc}")
    return MetricReading.pods(values)


class Autoscaler:
    """The HPA controller for one simulated Deployment served by the adapter.

    ``sync(now)`` is one controller sync: list the pods (from the fleet, as the pod lister would), read each
    Pods metric of the spec over HTTP (``read_pods_metric``), reconcile the model, and scale the fleet when
    it decides to. ``runner`` is an ``adapter.demo.exporter.FleetRunner`` (``snapshot``, ``set_replicas``).
    """

    def __init__(self, spec: HPASpec, runner: Any, client: httpx.Client, namespace: str, selector: str,
                 cpu_request_milli: int = 4000, config: ControllerConfig | None = None) -> None:  # fmt: skip
        for metric in spec.metrics:
            if metric.type != "Pods":
                raise SimulationError(f"the live loop reads Pods metrics only: {metric.describe()}")
        self.spec = spec
        self.model = HPAModel(spec, config)
        self.runner = runner
        self.client = client
        self.namespace = namespace
        self.selector = selector
        self.cpu_request_milli = cpu_request_milli

    def sync(self, now: float) -> tuple[SyncRecord, FleetSnapshot]:
        """One sync at ``now`` (seconds on the fleet's clock); returns its record and the fleet it saw."""
        snapshot: FleetSnapshot = self.runner.snapshot()
        pods = pod_infos(snapshot, self.cpu_request_milli)
        metrics = tuple(read_pods_metric(self.client, self.namespace, m.name, self.selector) for m in self.spec.metrics)
        current = snapshot.desired_replicas
        status = sum(1 for p in snapshot.pods if p.phase is not PodPhase.TERMINATING)
        decision = self.model.reconcile(now, spec_replicas=current, status_replicas=status, metrics=metrics,
                                        pods=pods)  # fmt: skip
        if decision.rescale:
            self.runner.set_replicas(decision.desired_replicas)
        return SyncRecord(now, current, status, pods, metrics, decision.desired_replicas), snapshot


@dataclass(frozen=True)
class ReplayResult:
    """Replicas a fresh ``HPAModel`` chose from the recorded inputs, and the syncs where they differ from the
    recorded decision (or where the recorded replica count was not the previous decision)."""

    decisions: tuple[int, ...]
    mismatches: tuple[int, ...]

    @property
    def matches(self) -> bool:
        """True when every replayed decision equals the live one."""
        return not self.mismatches


def replay(spec: HPASpec, records: Sequence[SyncRecord], config: ControllerConfig | None = None) -> ReplayResult:
    """Re-run the recorded syncs through a fresh ``HPAModel``; its replica count is its own last decision
    (starting from the first record's), never the recorded one."""
    model = HPAModel(spec, config)
    decisions: list[int] = []
    mismatches: list[int] = []
    current = records[0].spec_replicas if records else 0
    for i, rec in enumerate(records):
        decision = model.reconcile(
            rec.now,
            spec_replicas=current,
            status_replicas=rec.status_replicas,
            metrics=rec.readings,
            pods=rec.pods,
        )
        decisions.append(decision.desired_replicas)
        if decision.desired_replicas != rec.desired or rec.spec_replicas != current:
            mismatches.append(i)
        current = decision.desired_replicas
    return ReplayResult(tuple(decisions), tuple(mismatches))
