"""A real Prometheus scrapes two running adapters; the dashboard's and the alert rules' PromQL run on it.

Adapter "good" reads a scripted fleet from the session Prometheus; adapter "broken" points at a port where
nothing listens. A third Prometheus (this module's own) scrapes both every second and evaluates
alerts/llm-hpa-adapter.rules.yaml. Every expression of the dashboard and of the rules must execute; the
core panels must show data, and the computed series must carry the values the fleet implies.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from adapter.demo.servers import PrometheusProcess, free_port
from adapter.settings import Settings
from tests.support.adapter_server import get, running_adapter
from tests.support.backends import TestBackend
from tests.support.binaries import require_binary
from tests.support.fleet_data import PodSpec, build, expected

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "dashboards" / "llm-hpa-adapter.json"
RULES = ROOT / "alerts" / "llm-hpa-adapter.rules.yaml"
BASE = "/apis/custom.metrics.k8s.io/v1beta2"


class RulesPrometheus(PrometheusProcess):
    """The dev Prometheus plus a ``rule_files`` entry (its config is JSON, which is YAML)."""

    def __init__(self, rule_file: Path, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rule_file = rule_file

    def _write_config(self) -> None:
        super()._write_config()
        config = json.loads(self.config_path.read_text())
        config["rule_files"] = [str(self.rule_file)]
        self.config_path.write_text(json.dumps(config, indent=2) + "\n")


class Scraped:
    def __init__(self, prom: RulesPrometheus, ns: str, pods: list[PodSpec], good: str, broken: str) -> None:
        self.prom, self.ns, self.pods, self.good, self.broken = prom, ns, pods, good, broken

    def api(self, path: str, **params: str) -> Any:
        r = httpx.get(self.prom.url + path, params=params, timeout=30, trust_env=False)
        body = r.json()
        assert r.status_code == 200 and body["status"] == "success", (path, params, r.text[:500])
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = self.api("/api/v1/query", query=expr)
        assert data["resultType"] in ("vector", "scalar", "matrix"), data
        result: list[dict[str, Any]] = data["result"] if data["resultType"] != "scalar" else [data["result"]]
        return result


def host_port(url: str) -> str:
    return url.removeprefix("http://")


def drive(good: str, broken: str, ns: str) -> None:
    """The traffic an HPA (and a confused user) would make."""
    for metric in ("llm_composite_load", "llm_composite_load_boosted"):
        r = get(f"{good}{BASE}/namespaces/{ns}/pods/*/{metric}", params={"labelSelector": "app=llama"})
        assert r.status_code == 200, r.text
    assert get(f"{good}{BASE}/namespaces/{ns}/deployments.apps/llama/llm_composite_load").status_code == 200
    assert get(f"{good}{BASE}/namespaces/{ns}/pods/*/no_such_metric").status_code == 404
    assert (
        get(
            f"{good}/explain",
            params={"namespace": ns, "selector": "app=llama", "metric": "llm_composite_load"},
        ).status_code
        == 200
    )
    r = get(f"{broken}{BASE}/namespaces/{ns}/pods/*/llm_composite_load", params={"labelSelector": "app=llama"})
    assert r.status_code == 503, r.text


@pytest.fixture(scope="module")
def scraped(prometheus: TestBackend) -> Iterator[Scraped]:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    now = float(int(time.time()) - 30)
    pods = [
        PodSpec("llama-7f9b8c6d4-aaaa1", gpus=4, layout="honor", labels={"app": "llama"}, deployment="llama"),
        PodSpec("llama-7f9b8c6d4-aaaa2", gpus=2, layout="exported", labels={"app": "llama"}, deployment="llama"),
        PodSpec(
            "llama-7f9b8c6d4-aaaa3",
            gpus=1,
            layout="old",
            labels={"app": "llama"},
            deployment="llama",
            with_latency=False,
        ),
    ]
    prometheus.load(build(ns, pods, now))
    with ExitStack() as stack:
        good = stack.enter_context(
            running_adapter(Settings(prometheus_url=prometheus.url, pod_source="prometheus", forecast_tick_s=0.2))
        )
        broken = stack.enter_context(
            running_adapter(Settings(prometheus_url=f"http://127.0.0.1:{free_port()}", pod_source="prometheus"))
        )
        job = {
            "job_name": "llm-hpa-adapter",
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "honor_labels": True,
            "static_configs": [
                {"targets": [host_port(good)], "labels": {"adapter": "good"}},
                {"targets": [host_port(broken)], "labels": {"adapter": "broken"}},
            ],
        }
        prom = RulesPrometheus(RULES, scrape_configs=[job], scrape_interval="1s")
        prom.start()
        stack.callback(prom.close)
        s = Scraped(prom, ns, pods, good, broken)
        # Traffic before and after the first scrapes: a counter first seen at 1 shows no increase, so the
        # rate() of the dashboard and the alerts needs requests made while Prometheus is watching, as an
        # HPA's every 15 s are.
        drive(good, broken, ns)
        wait_for_scrapes(s, 3)
        drive(good, broken, ns)
        wait_for_scrapes(s, 6)
        yield s


def wait_for_scrapes(s: Scraped, n: int) -> None:
    deadline = time.monotonic() + 60
    while not s.query(
        f'count_over_time(llm_hpa_adapter_pod_series{{adapter="good"}}[1m]) >= {n} and on () '
        f'count_over_time(llm_hpa_adapter_upstream_reachable{{adapter="broken"}}[1m]) >= {n}'
    ):
        assert time.monotonic() < deadline, "the adapters were not scraped"
        time.sleep(0.3)


def dashboard_targets() -> list[tuple[str, str, str]]:
    doc = json.loads(DASHBOARD.read_text())
    return [(p["title"], t["refId"], t["expr"]) for p in doc["panels"] for t in p.get("targets", [])]


def substitute(expr: str, ns: str) -> str:
    return (
        expr.replace("$namespace", ns)
        .replace("$workload", "llama")
        .replace("$__rate_interval", "1m")
        .replace("$__range", "5m")
        .replace("$__interval", "15s")
        .replace("$p99_slo", "0.1")
    )


# Panels that must show data after the traffic above (the rest may be empty here: no HPA target from
# kube-state-metrics, no load history so no forecast, nothing scored yet).
MUST_HAVE_DATA = {
    ("Composite vs target, per pod", "A"),
    ("Served value (boosted composite), per pod", "A"),
    ("Term contributions (weight x value / target), mean over pods", "A"),
    ("GPU utilization P90 per pod (%)", "A"),
    ("Queue depth and ITL P99 per pod", "A"),
    ("Queue depth and ITL P99 per pod", "B"),
    ("Load vs forecast vs boost", "C"),
    ("Forecast age and state", "A"),
    ("Forecast age and state", "B"),
    ("Fits by outcome", "A"),
    ("Fits by outcome", "B"),
    ("Fit duration P90", "A"),
    ("Requests by route and code", "A"),
    ("Request latency P50 / P99", "A"),
    ("Errors and unknown metrics", "A"),
    ("Errors and unknown metrics", "B"),
    ("Backend reachable and time since last success", "A"),
    ("Backend reachable and time since last success", "B"),
    ("Backend query latency P50 / P99", "A"),
    ("Backend queries by outcome", "A"),
    ("Backend queries by outcome", "B"),
}


def test_every_dashboard_expression_runs(scraped: Scraped) -> None:
    targets = dashboard_targets()
    assert {(t, r) for t, r, _ in targets} >= MUST_HAVE_DATA
    empty = []
    for title, ref, expr in targets:
        result = scraped.query(substitute(expr, scraped.ns))  # asserts the query itself succeeds
        if not result:
            empty.append((title, ref))
    assert not MUST_HAVE_DATA & set(empty), empty


def test_dashboard_variables_find_the_fleet(scraped: Scraped) -> None:
    doc = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in doc["templating"]["list"]}
    assert set(variables) == {"datasource", "namespace", "workload", "p99_slo"}
    assert float(variables["p99_slo"]["query"]) == 0.1  # the default ITL P99 SLO (100 ms), what the panel reads
    for name, want in (("namespace", scraped.ns), ("workload", "llama")):
        # Grafana runs label_values(<selector>, <label>) as /api/v1/label/<label>/values?match[]=<selector>
        m = re.fullmatch(r"label_values\((.+), (\w+)\)", variables[name]["query"]["query"])
        assert m is not None and m.group(2) == name
        values = scraped.api(f"/api/v1/label/{name}/values", **{"match[]": substitute(m.group(1), scraped.ns)})
        assert want in values


def test_computed_series_carry_the_fleets_values(scraped: Scraped) -> None:
    got = {
        r["metric"]["pod"]: float(r["value"][1])
        for r in scraped.query(f'llm_hpa_adapter_pod_composite{{namespace="{scraped.ns}"}}')
    }
    assert set(got) == {p.name for p in scraped.pods}
    for pod in scraped.pods:
        want = expected(pod, "llm_composite_load")
        assert want is not None and math.isclose(got[pod.name], want, rel_tol=1e-9)
    terms = scraped.query(f'llm_hpa_adapter_pod_term_value{{namespace="{scraped.ns}"}}')
    by = {(r["metric"]["pod"], r["metric"]["term"]): float(r["value"][1]) for r in terms}
    for pod in scraped.pods:
        for term in ("gpu_utilization_p90", "inference_queue_depth", "inference_itl_p99_seconds"):
            want = expected(pod, term)
            if want is None:
                assert (pod.name, term) not in by
            else:
                assert math.isclose(by[(pod.name, term)], want, rel_tol=1e-9, abs_tol=1e-9)
    # The workload label of a pod series joins the workload series (the dashboard's served-value panel).
    boost = scraped.query(f'llm_hpa_adapter_workload_boost{{namespace="{scraped.ns}"}}')
    assert [(r["metric"]["workload"], r["value"][1]) for r in boost] == [("llama", "1")]


@pytest.mark.binary("promtool")  # Debian package prometheus
def test_promtool_accepts_the_rules_file() -> None:
    promtool = require_binary("promtool")
    out = subprocess.run([promtool, "check", "rules", str(RULES)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "SUCCESS: 8 rules found" in out.stdout


def test_every_rule_expression_runs_and_prometheus_evaluates_them(scraped: Scraped) -> None:
    rules = [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]
    for rule in rules:
        scraped.query(rule["expr"])
    deadline = time.monotonic() + 30
    while True:
        groups = scraped.api("/api/v1/rules")["groups"]
        loaded = [r for g in groups for r in g["rules"]]
        if len(loaded) == len(rules) and all(not r["lastEvaluation"].startswith("0001") for r in loaded):
            break
        assert time.monotonic() < deadline, loaded
        time.sleep(0.5)
    assert {r["name"] for r in loaded} == {r["alert"] for r in rules}
    for r in loaded:
        assert r["health"] == "ok" and not r.get("lastError"), r


def test_alerts_single_out_what_is_wrong(scraped: Scraped) -> None:
    """The broken adapter's backend is unreachable and its metric requests fail; the good one was asked for
    a metric it does not serve. Each shows as a pending (or firing) alert, on the right instance only."""
    want = {
        ("LLMHPAAdapterBackendUnreachable", host_port(scraped.broken)),
        ("LLMHPAAdapterMetricRequestsFailing", host_port(scraped.broken)),
        ("LLMHPAAdapterUnknownMetricRequested", host_port(scraped.good)),
    }
    deadline = time.monotonic() + 30
    while True:
        alerts = scraped.api("/api/v1/alerts")["alerts"]
        active = {
            (a["labels"]["alertname"], a["labels"].get("instance"))
            for a in alerts
            if a["state"] in ("pending", "firing")
        }
        if want <= active:
            break
        assert time.monotonic() < deadline, active
        time.sleep(0.5)
    unknown = [a for a in alerts if a["labels"]["alertname"] == "LLMHPAAdapterUnknownMetricRequested"]
    assert [a["labels"]["metric"] for a in unknown] == ["no_such_metric"]
    assert not any(
        name == "LLMHPAAdapterBackendUnreachable" and inst == host_port(scraped.good) for name, inst in active
    )
