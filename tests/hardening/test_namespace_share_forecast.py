"""Issue 26 row 2: one namespace cannot take the forecast slots of another by naming sets of Deployments.

Against a real Prometheus (10 h of the victim's load history) and the real adapter. The attacker runs 9
one-pod Deployments; a ``pods/*`` request registers the *set* of Deployments its selector's pods belong to,
so ``app in (d0,d3,...)`` names up to 2^9 - 1 = 511 workloads. With ``forecast.max_workloads`` at 40 (a
key today's adapter knows) and 60 such sets, today the victim's new HPA never gets a forecast: its
``llm_load_boost`` answers 404 "forecast pending" and its boosted composite is the live one. After: the
attacker gets ``forecast.max_sets_per_namespace`` sets (the rest served unboosted, counted), and the
victim's boost is the one computed independently from its own history, its boosted composite the one at
that boost, its requests answered 200 throughout.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
import time

import httpx
import pytest

from adapter.catalog import ForecastDef, load_catalog
from adapter.quantity import parse_quantity
from adapter.settings import Settings
from tests.forecast_serving.test_boosted import at_load, independent_boost, load_ramp
from tests.support.adapter_server import APPS, running_adapter
from tests.support.backends import TestBackend
from tests.support.fleet_data import PodSpec, build, expected

DEPLOYMENTS = [f"d{i}" for i in range(9)]
SETS = 60


def counter(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    found = re.search(rf"^llm_hpa_adapter_{name}\{{{re.escape(want)}\}} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def values(r: httpx.Response) -> dict[str, float]:
    assert r.status_code == 200, r.text
    return {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}


def test_sets_of_deployments_cannot_take_the_forecast_slots(prometheus: TestBackend, unique_ns: str) -> None:
    victim, attacker = f"{unique_ns}-victim", f"{unique_ns}-attacker"
    now, llama = load_ramp(prometheus, victim)
    prometheus.load(
        build(
            attacker,
            [
                PodSpec(f"{d}-5d8f7b9c6-p{i}", gpus=1, layout="honor", labels={"app": d}, deployment=d)
                for i, d in enumerate(DEPLOYMENTS)
            ],
            now,
        )
    )
    cat = load_catalog(None)
    assert cat.forecast is not None
    cat = dataclasses.replace(cat, forecast=dataclasses.replace(cat.forecast, model="ar", max_workloads=40))
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", catalog=cat, forecast_tick_s=0.2)
    api = "/apis/custom.metrics.k8s.io/v1beta2/namespaces"
    victim_pods = f"{api}/{victim}/pods/*/llm_composite_load_boosted"
    selector = {"labelSelector": "app=llama"}
    with running_adapter(settings, clock=lambda: now) as url, httpx.Client(timeout=30) as client:
        subsets = [s for n in range(2, 10) for s in itertools.combinations(DEPLOYMENTS, n)][:SETS]
        for i, subset in enumerate(subsets):
            r = client.get(
                f"{url}{api}/{attacker}/pods/*/llm_composite_load_boosted",
                params={"labelSelector": f"app in ({','.join(subset)})"},
            )
            assert set(values(r)) == {f"{d}-5d8f7b9c6-p{DEPLOYMENTS.index(d)}" for d in subset}
            if i % 10 == 0:  # the victim's existing (unboosted) HPA polls all along
                live = values(client.get(f"{url}{api}/{victim}/pods/*/llm_composite_load", params=selector))
                assert live == pytest.approx({p.name: expected(p, "llm_composite_load") for p in llama}, abs=0.0011)
        # Then the victim's new, boosted HPA: registered and forecast from its own history.
        assert client.get(f"{url}{api}/{victim}/deployments.apps/llama/llm_composite_load_boosted").status_code == 200
        deadline = time.monotonic() + 60
        while (r := client.get(f"{url}{api}/{victim}/deployments.apps/llama/llm_load_boost")).status_code != 200:
            assert time.monotonic() < deadline, r.text  # today: 404 "forecast pending", for as long as it asks
            time.sleep(0.2)
        boost = float(parse_quantity(r.json()["items"][0]["value"]))
        want = independent_boost(prometheus, victim, now, "ar")
        assert math.isclose(boost, want, abs_tol=0.0006) and boost > 1.05, (boost, want)
        served = values(client.get(url + victim_pods, params=selector))
        for p in llama:
            assert math.isclose(served[p.name], at_load(p, boost), rel_tol=0.002, abs_tol=0.0011)
            assert served[p.name] > expected(p, "llm_composite_load")
        # The attacker's sets past its share are served unboosted and counted, under its namespace only.
        forecasts = APPS[url].state.forecasts
        attacker_sets = [k for k in forecasts.workloads() if k.namespace == attacker]
        assert len(attacker_sets) == ForecastDef.max_sets_per_namespace  # today: all 40 slots
        text = client.get(url + "/metrics").text
        refused = SETS - ForecastDef.max_sets_per_namespace
        assert counter(text, "namespace_share_exceeded_total", budget="forecast_sets", namespace=attacker) == refused
        assert counter(text, "namespace_share_exceeded_total", budget="forecast_sets", namespace=victim) == 0
        assert forecasts.refused == refused


def test_a_namespace_past_its_workload_share_is_told_why(prometheus: TestBackend, unique_ns: str) -> None:
    victim, attacker = f"{unique_ns}-victim", f"{unique_ns}-attacker"
    now = float(int(time.time()) - 60)
    pods = [
        PodSpec(f"{d}-5d8f7b9c6-p{i}", gpus=1, layout="honor", labels={"app": d}, deployment=d)
        for i, d in enumerate(DEPLOYMENTS)
    ]
    prometheus.load(build(attacker, pods, now))
    prometheus.load(
        build(
            victim,
            [PodSpec("llama-7f9b8c6d4-bbbb1", gpus=1, layout="honor", labels={"app": "llama"}, deployment="llama")],
            now,
        )
    )
    cat = load_catalog(None)
    assert cat.forecast is not None
    cat = dataclasses.replace(cat, forecast=dataclasses.replace(cat.forecast, max_workloads_per_namespace=3))
    settings = Settings(prometheus_url=prometheus.url, pod_source="prometheus", catalog=cat, forecast_tick_s=0.2)
    api = "/apis/custom.metrics.k8s.io/v1beta2/namespaces"
    with running_adapter(settings, clock=lambda: now) as url, httpx.Client(timeout=30) as client:
        codes = [
            client.get(f"{url}{api}/{attacker}/deployments.apps/{d}/llm_load_boost").status_code for d in DEPLOYMENTS
        ]
        assert codes[3:] == [429] * 6 and all(c in (200, 404) for c in codes[:3]), codes  # 404: pending
        refused = client.get(f"{url}{api}/{attacker}/deployments.apps/d5/llm_load_boost")
        assert refused.headers["retry-after"] == "1"
        doc = refused.json()
        assert doc["kind"] == "Status" and doc["reason"] == "TooManyRequests"
        assert "forecast.max_workloads_per_namespace" in doc["message"]
        # Its boosted composite is still served, at boost 1 (the live composite).
        boosted = values(client.get(f"{url}{api}/{attacker}/deployments.apps/d5/llm_composite_load_boosted"))
        plain = values(client.get(f"{url}{api}/{attacker}/deployments.apps/d5/llm_composite_load"))
        assert boosted == plain
        # Another namespace's Deployment is registered.
        assert client.get(f"{url}{api}/{victim}/deployments.apps/llama/llm_load_boost").status_code in (200, 404)
        forecasts = APPS[url].state.forecasts
        assert {k.deployments for k in forecasts.workloads() if k.namespace == victim} == {("llama",)}
        assert len([k for k in forecasts.workloads() if k.namespace == attacker]) == 3
        text = client.get(url + "/metrics").text
        assert counter(text, "namespace_share_exceeded_total", budget="forecast_workloads", namespace=attacker) == 8
