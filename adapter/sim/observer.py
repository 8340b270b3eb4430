"""What the metrics pipeline shows the HPA of a ``TokenFleet``: per-pod values, late, and the pod list.

``Observer.view`` reads the fleet at a sync as dcgm-exporter, vLLM and the catalog's PromQL would: GPU
utilization per GPU is ``100 (1 - exp(-batch))`` (2 % while loading) plus N(0, 1) noise, rounded as
dcgm-exporter prints it; the queue is vLLM's ``num_requests_waiting`` (``TokenFleet.queue_depth``); the
latency P99s (e2e; TTFT and ITL from a token fleet's vLLM histograms) are histogram_quantile(0.99) over the
pod's histogram increase in the last ``latency_window_s``.

``Observer.observed`` returns the view the HPA reads at a sync: the one taken ``delay_s`` earlier. In a
cluster the values the adapter serves are 30-60 s old: dcgm-exporter collects every 30 s (its
``--collect-interval`` default 30000 ms, NVIDIA/dcgm-exporter pkg/cmd/app.go), Prometheus scrapes every
15-30 s (kube-prometheus ServiceMonitors: 30 s), and the newest sample of each is on average half an
interval old; ``DEFAULT_METRIC_DELAY_S`` = 30 s is the sum of those two mean ages (15 s + 15 s). The pod
list is never late: the HPA lists pods from the API server at the sync.

``pod_info`` is the one fleet-pod -> ``PodInfo`` conversion, used by the live loop as well.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import numpy.typing as npt

from adapter.hpa.replicas import PodInfo
from adapter.sim.latency import SLO_QUANTILE, histogram_quantile
from adapter.sim.lifecycle import SimulationError
from adapter.sim.readings import CpuModel, PodView
from adapter.sim.tokenfleet import TokenFleet

_F64 = npt.NDArray[np.float64]
_I64 = npt.NDArray[np.int64]
_EPS = 1e-9
DEFAULT_METRIC_DELAY_S = 30.0


def pod_info(
    name: str,
    *,
    ready: bool,
    created: float,
    ready_at: float,
    cpu_request_milli: int,
    deleted: bool = False,
    pending: bool = False,
) -> PodInfo:
    """A pod as the Kubernetes API holds it: Pending while it waits for a GPU node, else Running; Ready once
    its model is loaded; ``deleted`` once the ReplicaSet deleted it (draining)."""
    return PodInfo(
        name=name,
        phase="Pending" if pending else "Running",
        ready=ready,
        deleted=deleted,
        start_time=None if pending else created,
        ready_transition_time=ready_at if ready else (None if pending else created),
        requests_milli={"cpu": cpu_request_milli},
    )


class Observer:
    """Turns the fleet's state into the ``PodView`` the metrics pipeline would serve at a sync (module doc)."""

    def __init__(
        self,
        fleet: TokenFleet,
        *,
        latency_window_s: float,
        cpu: CpuModel,
        sync_period_s: float,
        seed: int,
        deployment: str,
        delay_s: float = 0.0,
        latencies: frozenset[str] | None = None,
    ) -> None:
        steps = delay_s / sync_period_s
        if delay_s < 0 or abs(steps - round(steps)) > 1e-6:
            raise SimulationError(
                f"the metric delay ({delay_s:g} s) must be a non-negative multiple of the sync period"
            )
        self.fleet = fleet
        self.window = latency_window_s
        self.latencies = latencies  # the P99s a view computes (keys of latency_histograms); None: all
        self.cpu = cpu
        self.delay_syncs = round(steps)
        self._rng = np.random.default_rng(seed)
        self._history: deque[tuple[float, _I64, dict[str, _F64]]] = deque(
            maxlen=int(math.ceil(latency_window_s / sync_period_s)) + 2
        )
        self._views: deque[PodView] = deque(maxlen=self.delay_syncs + 1)
        self._prefix = deployment
        self._names: dict[int, str] = {}
        self._infos: dict[tuple[int, bool, bool], PodInfo] = {}

    def name(self, pod_id: int) -> str:
        """The pod name of a fleet pod id."""
        name = self._names.get(pod_id)
        if name is None:
            name = self._names[pod_id] = f"{self._prefix}-{pod_id:06d}"
        return name

    @staticmethod
    def _since(ids: _I64, cum: _F64, old_ids: _I64, old_cum: _F64) -> _F64:
        pos = np.searchsorted(old_ids, ids)
        found = pos < old_ids.size
        found[found] = old_ids[pos[found]] == ids[found]
        base = np.zeros_like(cum)
        base[found] = old_cum[pos[found]]
        out: _F64 = cum - base
        return out

    def view(self, now: float, *, latency: bool = True) -> PodView:
        """The pods as observed at ``now`` (call once per sync: it records the histogram history).

        ``latency=False`` skips the latency P99 (all NaN) for policies that do not read it.
        """
        fleet = self.fleet
        ids, histograms = fleet.ids, fleet.latency_histograms()
        ready = fleet.ready_mask(now)
        cfg = fleet.config
        noise = self._rng.normal(size=(ids.size, cfg.gpus_per_pod))
        busy = np.where(ready, 100.0 * (1.0 - np.exp(-fleet.running)), 2.0)
        gpu = np.clip(np.rint(busy[:, None] + noise), 0.0, 100.0)
        # A pod still waiting for a GPU node has no GPU yet: no dcgm series at all.
        gpu[~ready & (fleet.ready_at - now > cfg.load_delay_s[1] + _EPS)] = np.nan
        p99 = {key: np.full(ids.size, np.nan) for key in histograms}
        completions_rate = np.zeros(ids.size)
        if self._history and latency:
            base = self._history[0]
            for entry in self._history:
                if entry[0] <= now - self.window + _EPS:
                    base = entry
            for key, (upper, cum) in histograms.items():
                if self.latencies is not None and key not in self.latencies:
                    continue
                window = self._since(ids, cum, base[1], base[2][key])
                p99[key] = histogram_quantile(SLO_QUANTILE, upper, window)
        if self._history:
            last = self._history[-1]
            if now > last[0]:
                e2e = histograms["e2e"][1]
                completions_rate = self._since(ids, e2e, last[1], last[2]["e2e"])[:, -1] / (now - last[0])
        self._history.append((now, ids.copy(), {key: cum.copy() for key, (_, cum) in histograms.items()}))
        cpu = self.cpu.idle_milli + self.cpu.per_rps_milli * completions_rate
        return PodView(
            now=now,
            names=tuple(self.name(int(i)) for i in ids),
            serving=ready,
            gpu_util=gpu,
            queue=np.rint(fleet.queue_depth),
            latency_p99=p99["e2e"],
            ttft_p99=p99.get("ttft"),
            itl_p99=p99.get("itl"),
            cpu_milli=cpu,
            running=np.where(ready, fleet.running, 0.0),
            kv_cache_usage=np.where(ready, fleet.kv_cache_usage, 0.0),
        )

    def observed(self, now: float, *, latency: bool = True) -> PodView:
        """Take this sync's view and return the one the HPA reads now: ``delay_syncs`` syncs old (the
        oldest there is during the first syncs of a run)."""
        self._views.append(self.view(now, latency=latency))
        return self._views[0]

    def pods(self, now: float) -> tuple[PodInfo, ...]:
        """The pods the HPA lists through the scale selector, now (``pod_info``)."""
        fleet = self.fleet
        ready = fleet.ready_mask(now)
        load_max = fleet.config.load_delay_s[1]
        out = []
        for pod_id, is_ready, created, ready_at in zip(fleet.ids, ready, fleet.created, fleet.ready_at, strict=True):
            # Pending: still waiting for a node, i.e. more than one load delay from being ready.
            pending = bool(not is_ready and ready_at - now > load_max + _EPS)
            key = (int(pod_id), bool(is_ready), pending)
            info = self._infos.get(key)
            if info is None:
                info = pod_info(
                    self.name(key[0]),
                    ready=key[1],
                    created=float(created),
                    ready_at=float(ready_at),
                    cpu_request_milli=self.cpu.request_milli,
                    pending=pending,
                )
                for other in ((key[0], not key[1], False), (key[0], False, True)):
                    if other != key:
                        self._infos.pop(other, None)
                self._infos[key] = info
            out.append(info)
        return tuple(out)
