"""The clairvoyant bound (``simulate --policy clairvoyant[:LEAD]@TARGET``): a metric that knows the true demand,
read through the same HPA model. It is a yardstick for ``benchmarks/information_bound.py``, never served."""

from __future__ import annotations

import math

import numpy as np
import pytest

from adapter.hpa.replicas import PodInfo
from adapter.hpa.spec import load_hpa
from adapter.sim.accounting import frontier_cost
from adapter.sim.policies import CLAIRVOYANT_METRIC, build_policy
from adapter.sim.readings import PolicyError, clairvoyant_reading, to_milli
from adapter.sim.simulate import peak_demand, run_policy
from adapter.sim.trace import RateTrace, ScaledTrace
from tests.sim.test_simulate import HPA_FILE, step_trace
from tests.support.sim import CATALOG, sim_config

# A 3x step, and a per-pod target just below the engine's knee (9.75 req/s per pod: tests/support/sim.py).
LOW, HIGH, TARGET = 30.0, 90.0, 9.0


def test_the_policy_reads_its_lead_and_target() -> None:
    base = load_hpa(HPA_FILE)
    ahead = build_policy("clairvoyant:5m@30", base, CATALOG)
    assert ahead.lead_s == 300.0
    (metric,) = ahead.hpa.metrics
    assert metric.type == "Pods" and metric.name == CLAIRVOYANT_METRIC
    assert metric.target.average_value_milli == 30_000
    assert ahead.hpa.behavior == base.behavior and ahead.hpa.max_replicas == base.max_replicas
    assert build_policy("clairvoyant@29.5", base, CATALOG).lead_s == 0.0
    assert build_policy("clairvoyant:90s@29.5", base, CATALOG).lead_s == 90.0
    # Every other policy has no lead: the simulator reads their metrics from the fleet, not the trace.
    assert build_policy("boosted", base, CATALOG).lead_s is None


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("clairvoyant", "needs @TARGET"),
        ("clairvoyant:5m", "needs @TARGET"),
        ("clairvoyant:soon@30", "lead"),
        ("clairvoyant@-3", "positive"),
        ("composite:5m", "only boosted takes a model"),
    ],
)
def test_bad_clairvoyant_policies_are_refused(name: str, message: str) -> None:
    with pytest.raises(PolicyError, match=message):
        build_policy(name, load_hpa(HPA_FILE), CATALOG)


def test_every_counted_pod_reads_its_share_of_the_peak() -> None:
    pods = [
        PodInfo(name="a"),
        PodInfo(name="b", ready=False),  # a loading pod counts: the HPA would see its metric too
        PodInfo(name="gone", deleted=True),
        PodInfo(name="dead", phase="Failed"),
        PodInfo(name="c"),
    ]
    reading = clairvoyant_reading(100.0, pods)
    assert reading.pod_values == {name: to_milli(100.0 / 3) for name in ("a", "b", "c")}
    # ceil(3 x average / target) is ceil(peak / target), whatever the fleet holds.
    target = 30.0
    average = sum(reading.pod_values.values()) / 3 / 1000.0  # type: ignore[union-attr]
    assert math.ceil(3 * average / target) == math.ceil(100.0 / target) == 4
    assert clairvoyant_reading(5.0, [PodInfo(name="x", deleted=True)]).pod_values == {}
    with pytest.raises(ValueError):
        clairvoyant_reading(float("nan"), pods)


def test_peak_demand_looks_exactly_lead_seconds_ahead() -> None:
    trace = ScaledTrace(
        RateTrace(step_s=600.0, rates=np.array([10.0, 30.0, 20.0]), suspect=np.zeros(3, dtype=np.bool_)),
        peak_rps=30.0,
    )
    assert peak_demand(trace, 0.0, 0.0) == 10.0
    assert peak_demand(trace, 299.0, 300.0) == 10.0  # the next window starts at 600 s: one second too far
    assert peak_demand(trace, 300.0, 300.0) == 30.0  # ... and is seen from 300 s with a 5-minute lead
    assert peak_demand(trace, 700.0, 1200.0) == 30.0  # the peak of the span, not its end
    assert peak_demand(trace, 1300.0, 0.0) == 20.0


def test_foresight_buys_pods_before_a_step_and_the_present_alone_is_late() -> None:
    """A 3x step at 30 minutes: with a 10-minute lead the HPA has the pods ready when the step lands (model load
    90-180 s, 60 s up-stabilization, 2 pods per 30 s); knowing only the present, it orders them after."""
    trace = step_trace([LOW, LOW, LOW, HIGH, HIGH, HIGH])
    config = sim_config(duration_s=3600.0)
    base = load_hpa(HPA_FILE)
    ahead = run_policy(build_policy(f"clairvoyant:10m@{TARGET:g}", base, CATALOG), trace, config, CATALOG)
    now = run_policy(build_policy(f"clairvoyant@{TARGET:g}", base, CATALOG), trace, config, CATALOG)
    step = int(np.searchsorted(ahead.sync_t, 1800.0))
    # Ready for the step: each ready pod's share of the high load is within the HPA's 10 % tolerance of the target.
    assert HIGH / ahead.sync_ready[step] <= TARGET * 1.1 < HIGH / now.sync_ready[step]
    assert ahead.sync_desired[step - 4] > ahead.sync_desired[0]  # ordered before the step, not at it
    assert int(ahead.summary["slo_violation_minutes"] or 0) == 0
    assert int(now.summary["slo_violation_minutes"] or 0) > 0
    # Both settle on the same fleet once the step is known: the target sets the size, the lead the timing.
    assert ahead.sync_desired[-1] == now.sync_desired[-1]
    assert HIGH / (TARGET * 1.1) <= ahead.sync_desired[-1] <= HIGH / (TARGET * 0.9)  # the HPA's tolerance band


def test_frontier_cost_interpolates_between_the_bracketing_targets() -> None:
    # (violation %, x oracle) of one policy at four targets, given in no particular order.
    curve = [(0.5, 1.36), (2.5, 1.15), (1.5, 1.21), (0.7, 1.28)]
    assert frontier_cost(curve, 2.0) == pytest.approx(1.18)  # halfway between 2.5 % at 1.15 and 1.5 % at 1.21
    assert frontier_cost(curve, 1.5) == pytest.approx(1.21)
    assert frontier_cost(curve, 0.6) == pytest.approx(1.32)
    assert frontier_cost(curve, 3.0) is None and frontier_cost(curve, 0.1) is None  # outside: no extrapolation
    assert frontier_cost([(0.0, 1.1), (0.0, 1.2)], 0.0) is None  # a flat run of shares brackets nothing


def test_the_yardstick_is_as_old_as_every_metric() -> None:
    """Lead 0 reads the demand of ``metric_delay_s`` ago, as the observed metrics do: the step at 30 minutes
    moves the fleet exactly the delay later (after the same up-stabilization wait at every delay)."""
    trace = step_trace([LOW, LOW, LOW, HIGH, HIGH, HIGH])
    moves = {}
    for delay in (0.0, 30.0, 60.0):
        config = sim_config(duration_s=3600.0, metric_delay_s=delay)
        run = run_policy(build_policy(f"clairvoyant@{TARGET:g}", load_hpa(HPA_FILE), CATALOG), trace, config, CATALOG)
        settled = int(run.sync_desired[int(np.searchsorted(run.sync_t, 1800.0)) - 1])
        moves[delay] = float(run.sync_t[np.flatnonzero((run.sync_t >= 1800.0) & (run.sync_desired > settled))[0]])
    assert moves[0.0] > 1800.0  # the 60 s up-stabilization window holds the first high recommendation back
    assert moves[30.0] - moves[0.0] == 30.0 and moves[60.0] - moves[0.0] == 60.0
