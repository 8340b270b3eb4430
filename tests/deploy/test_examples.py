"""apiservice-manifests/examples/: the vLLM Deployment and its HPA, as rendered by kubectl kustomize.

The HPA's behavior must be exactly the design's (tests/support/hpa_design.py); the Deployment's preStop drain is a
real program, run here against a small local stand-in for vLLM's /metrics that serves the real vLLM sample
from tests/data/samples/vllm.prom (vendored) with the request gauges set per poll.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from adapter.hpa.spec import load_hpa
from tests.support.hpa_design import DESIGN_HPA
from tests.support.manifests import (
    EXAMPLES,
    REPO,
    SCHEMA_VERSIONS,
    Obj,
    check_object,
    find,
    of_kind,
    render,
    selector_matches,
)

VLLM_SAMPLE = REPO / "tests" / "data" / "samples" / "vllm.prom"


@pytest.fixture(scope="module")
def objs(kubectl_path: str) -> list[Obj]:
    return render(EXAMPLES)


def _pod_spec(objs: list[Obj]) -> dict[str, Any]:
    spec: dict[str, Any] = find(objs, "Deployment", "vllm", "llm")["spec"]["template"]["spec"]
    return spec


def _prestop(objs: list[Obj]) -> list[str]:
    [container] = _pod_spec(objs)["containers"]
    command: list[str] = container["lifecycle"]["preStop"]["exec"]["command"]
    return command


def test_every_example_object_validates(objs: list[Obj]) -> None:
    how = {o["kind"]: check_object(o) for o in objs}
    assert how == {
        "Namespace": "schema",
        "Deployment": "schema",
        "HorizontalPodAutoscaler": "schema",
        "PodMonitor": "structure",
    }


def test_hpa_behavior_is_exactly_the_design() -> None:
    raw = yaml.safe_load((EXAMPLES / "vllm-hpa.yaml").read_text())
    # Exactly these fields: the design's windows and rates, no selectPolicy that would change their meaning, and
    # the scale-up tolerance that makes the HPA act by the composite's 1.0 (docs/results.md).
    assert raw["spec"]["behavior"] == {
        "scaleUp": {
            "tolerance": 0.02,
            "stabilizationWindowSeconds": 60,
            "policies": [{"type": "Pods", "value": 2, "periodSeconds": 30}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 300,
            "policies": [{"type": "Percent", "value": 20, "periodSeconds": 60}],
        },
    }

    def pods(name: str, value: str) -> dict[str, object]:
        return {
            "type": "Pods",
            "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": value}},
        }

    # The boosted composite at 1, and the SLO guard at 90 % of the default bounds (TTFT 2 s, ITL 100 ms).
    assert raw["spec"]["metrics"] == [
        pods("llm_composite_load_boosted", "1"),
        pods("inference_ttft_p99_guard_seconds_boosted", "1.8"),
        pods("inference_itl_p99_guard_seconds_boosted", "0.09"),
    ]


def test_external_hpa_example_scales_like_the_pods_one() -> None:
    """examples/external/ is the same HPA on the external metric: the same behavior, field for field."""
    pods = yaml.safe_load((EXAMPLES / "vllm-hpa.yaml").read_text())
    external = yaml.safe_load((EXAMPLES / "external" / "vllm-hpa-external.yaml").read_text())
    assert external["spec"]["behavior"] == pods["spec"]["behavior"]
    # The same metrics and targets: the composite and the SLO guard, each read for the Deployment.
    as_pods = [(m["pods"]["metric"]["name"], m["pods"]["target"]["averageValue"]) for m in pods["spec"]["metrics"]]
    as_external = [
        (m["external"]["metric"]["name"], m["external"]["target"]["value"]) for m in external["spec"]["metrics"]
    ]
    assert as_external == as_pods
    for m in external["spec"]["metrics"]:
        assert m["external"]["metric"]["selector"] == {"matchLabels": {"deployment": "vllm"}}
    assert check_object(external) == "schema"


def test_hpa_without_the_tolerance_line_validates_on_the_oldest_minor() -> None:
    """The example tells clusters before 1.33 to delete the tolerance line: what is left is a valid HPA there, and
    the line itself is what the older schema refuses."""
    raw = yaml.safe_load((EXAMPLES / "vllm-hpa.yaml").read_text())
    with pytest.raises(kubernetes_validate.ValidationError, match="tolerance"):
        kubernetes_validate.validate(raw, SCHEMA_VERSIONS[0], strict=True)
    del raw["spec"]["behavior"]["scaleUp"]["tolerance"]
    kubernetes_validate.validate(raw, SCHEMA_VERSIONS[0], strict=True)


def test_hpa_parses_with_the_hpa_model_like_the_design(objs: list[Obj]) -> None:
    example = load_hpa(EXAMPLES / "vllm-hpa.yaml")
    design = load_hpa(yaml.safe_load(DESIGN_HPA))
    assert example.behavior == design.behavior
    assert example.metrics == design.metrics
    metric = example.metrics[0]
    assert metric.type == "Pods" and metric.name == "llm_composite_load_boosted"
    assert metric.target.average_value_milli == 1000
    assert [(m.name, m.target.average_value_milli) for m in example.metrics[1:]] == [
        ("inference_ttft_p99_guard_seconds_boosted", 1800),
        ("inference_itl_p99_guard_seconds_boosted", 90),
    ]
    # The rendered object is the same HPA as the file.
    rendered = load_hpa(find(objs, "HorizontalPodAutoscaler", "vllm", "llm"))
    assert rendered == example


def test_hpa_targets_the_deployment(objs: list[Obj]) -> None:
    hpa = find(objs, "HorizontalPodAutoscaler", "vllm", "llm")
    deployment = find(objs, "Deployment", "vllm", "llm")
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == ("apps/v1", "Deployment", "vllm")
    assert hpa["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]


def test_podmonitor_scrapes_the_vllm_pods(objs: list[Obj]) -> None:
    [monitor] = of_kind(objs, "PodMonitor")
    deployment = find(objs, "Deployment", "vllm", "llm")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert selector_matches(monitor["spec"]["selector"]["matchLabels"], labels)
    ports = {p["name"] for c in _pod_spec(objs)["containers"] for p in c["ports"]}
    assert {e["port"] for e in monitor["spec"]["podMetricsEndpoints"]} <= ports


def test_grace_period_covers_the_drain(objs: list[Obj]) -> None:
    spec = _pod_spec(objs)
    assert spec["terminationGracePeriodSeconds"] == 120
    script = _prestop(objs)[-1]
    defaults = {k: float(v) for k, v in re.findall(r'"(DRAIN_\w+_SECONDS)", "([\d.]+)"', script)}
    # preStop runs inside the grace period; SIGTERM follows it and vLLM needs a few seconds to stop.
    assert defaults["DRAIN_DELAY_SECONDS"] + defaults["DRAIN_TIMEOUT_SECONDS"] <= 120 - 10


class _FakeVllm:
    """Serves the real vLLM sample, with num_requests_running set from a script of values, one per poll."""

    def __init__(self, running: list[float]) -> None:
        self.running = running
        self.polls = 0
        sample = VLLM_SAMPLE.read_text()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                value = fake.running[min(fake.polls, len(fake.running) - 1)]
                fake.polls += 1
                body = re.sub(
                    r"^(vllm:num_requests_running\{[^}]*\}) \S+$", rf"\g<1> {value}", sample, flags=re.MULTILINE
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/metrics"


@pytest.fixture
def fake_vllm() -> Iterator[type[_FakeVllm]]:
    started: list[_FakeVllm] = []

    class Started(_FakeVllm):
        def __init__(self, running: list[float]) -> None:
            super().__init__(running)
            threading.Thread(target=self.server.serve_forever, daemon=True).start()
            started.append(self)

    yield Started
    for fake in started:
        fake.server.shutdown()
        fake.server.server_close()


def _drain(objs: list[Obj], url: str, timeout_s: str = "60") -> subprocess.CompletedProcess[str]:
    command = _prestop(objs)
    assert command[:2] == ["python3", "-c"]
    # The image's python3 runs it in the pod; here our own interpreter runs the very same program.
    env = {
        **os.environ,
        "DRAIN_METRICS_URL": url,
        "DRAIN_DELAY_SECONDS": "0",
        "DRAIN_POLL_SECONDS": "0.01",
        "DRAIN_TIMEOUT_SECONDS": timeout_s,
    }
    return subprocess.run(
        [sys.executable, "-c", command[2]], env=env, check=False, capture_output=True, text=True, timeout=120
    )


def test_sample_is_idle() -> None:
    # The fake relies on the real sample having an idle engine (no request waiting).
    text = VLLM_SAMPLE.read_text()
    assert re.search(r"^vllm:num_requests_waiting\{[^}]*\} 0\.0$", text, re.MULTILINE)
    assert re.search(r"^vllm:num_requests_running\{[^}]*\} 0\.0$", text, re.MULTILINE)


def test_drain_waits_until_no_request_runs(objs: list[Obj], fake_vllm: type[_FakeVllm]) -> None:
    fake = fake_vllm([3.0, 2.0, 1.0, 0.0, 5.0])
    proc = _drain(objs, fake.url)
    assert proc.returncode == 0, proc.stderr
    assert fake.polls == 4, "stops at the first idle answer, not before, not after"


def test_drain_returns_at_once_when_idle(objs: list[Obj], fake_vllm: type[_FakeVllm]) -> None:
    fake = fake_vllm([0.0])
    proc = _drain(objs, fake.url)
    assert proc.returncode == 0, proc.stderr
    assert fake.polls == 1


def test_drain_gives_up_at_its_deadline(objs: list[Obj], fake_vllm: type[_FakeVllm]) -> None:
    fake = fake_vllm([4.0])  # never idle
    proc = _drain(objs, fake.url, timeout_s="0.3")
    assert proc.returncode == 0, proc.stderr
    assert fake.polls >= 1


def test_drain_stops_when_the_engine_is_gone(objs: list[Obj], fake_vllm: type[_FakeVllm]) -> None:
    fake = fake_vllm([1.0])
    url = fake.url
    fake.server.shutdown()
    fake.server.server_close()  # nothing listens there any more: connection refused
    proc = _drain(objs, url)
    assert proc.returncode == 0, proc.stderr
    assert fake.polls == 0


def test_example_files_exist() -> None:
    assert {p.name for p in Path(EXAMPLES).glob("*.yaml")} == {
        "kustomization.yaml",
        "namespace.yaml",
        "vllm-deployment.yaml",
        "vllm-hpa.yaml",
        "vllm-podmonitor.yaml",
    }
