"""``read_history`` against a fake Prometheus (``tests/support/fake_prometheus.py``): what it refuses to judge.

A Deployment whose pods have load but whose history holds none of the histograms the stated SLO is judged on
(another engine, a vLLM without them) cannot be calibrated on that SLO: ``read_history`` names the missing
``_bucket`` series and the e2e form that reads another histogram, instead of reporting a history with no rows.
The real-backend tests (``test_calibrate_e2e.py``, ``test_calibrate_tokens_e2e.py``) prove the PromQL itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

import pytest

from adapter.calibrate.history import read_history
from adapter.sim.slo import parse_slo
from tests.support.fake_prometheus import FakePrometheus, Series
from tests.support.sim import CATALOG

POD = {"namespace": "llm-ns", "pod": "llm-7d9f8b6c5d-x2x7q"}


def _read(fake: FakePrometheus, **slo: object) -> None:
    async def go() -> None:
        async with fake.http_client() as http:
            await read_history(
                fake.client(http), CATALOG, CATALOG.composites["llm_composite_load"].terms,
                namespace="llm-ns", deployment="llm", start=0.0, end=600.0, step_s=60.0, **slo,  # type: ignore[arg-type]
            )  # fmt: skip

    asyncio.run(go())


def _everything_but(*histograms: str) -> FakePrometheus:
    """Every query answered with one pod's series, except those reading ``histograms``' buckets (none)."""
    fake = FakePrometheus()

    def answer(promql: str) -> Iterable[Series]:
        if any(f"{h}_bucket" in promql for h in histograms):
            return []
        return [({**POD, "le": "+Inf"} if "_bucket" in promql else POD, 1.0)]

    fake.fallback = answer
    return fake


def test_a_history_without_the_slos_histograms_is_refused_by_name() -> None:
    fake = _everything_but("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds")
    with pytest.raises(ValueError) as err:
        _read(fake, slo=parse_slo("ttft=2s,itl=100ms"))
    message = str(err.value)
    assert "no vllm:time_to_first_token_seconds_bucket, vllm:inter_token_latency_seconds_bucket series" in message
    assert "--slo-p99 with --histogram" in message
    assert any("vllm:time_to_first_token_seconds_bucket" in q for q in fake.queries)  # it did ask


def test_one_missing_histogram_is_named_alone() -> None:
    fake = _everything_but("vllm:inter_token_latency_seconds")
    with pytest.raises(ValueError, match=r"no vllm:inter_token_latency_seconds_bucket series"):
        _read(fake, slo=parse_slo("ttft=2s,itl=100ms"))


def test_the_same_history_is_read_when_its_histograms_are_there() -> None:
    _read(_everything_but(), slo=parse_slo("ttft=2s,itl=100ms"))  # no error: the refusal is about absence


def test_no_load_is_no_history_not_a_missing_histogram() -> None:
    fake = FakePrometheus()  # every query answers an empty vector: the Deployment had no pods with load
    _read(fake, slo=parse_slo("ttft=2s,itl=100ms"))
