"""``python -m adapter demo`` end to end: real Prometheus (backfilled by the real promtool), the real adapter,
the printed kubectl paths answer through the real kubectl, every metric of the catalog and the forecast included.

Needs the Debian ``prometheus`` package (prometheus and promtool) and kubectl.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue
from typing import Any

import httpx
import pytest

from adapter.catalog import parse_catalog
from adapter.demo.catalogs import catalog_document
from adapter.quantity import parse_quantity

pytestmark = pytest.mark.binary("prometheus", "promtool")

REPO = Path(__file__).resolve().parents[2]
KUBECTL_LINE = re.compile(r"kubectl --server=(\S+) get --raw '([^']+)'")
N_COMMANDS = 9  # discovery, 4 Pods metrics, 4 Deployment metrics


def _default_sigint() -> None:
    """The demo as a terminal starts it: Ctrl-C at its default. A test run started in the background of a
    non-interactive shell (``nohup .ci/run &``) ignores SIGINT, and an ignored signal is inherited: the demo
    would never see the Ctrl-C this file sends (measured: the Ctrl-C test timed out in exactly such runs)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Demo:
    """The demo as a child process whose stdout is read line by line on a thread."""

    def __init__(self, *args: str) -> None:
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "adapter", "demo", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=_default_sigint,
        )
        self.lines: list[str] = []
        self._queue: Queue[str | None] = Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def wait_for(self, pattern: str, timeout: float = 90.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.5)
            except Empty:
                continue
            if line is None:
                break
            self.lines.append(line)
            if re.search(pattern, line):
                return line
        raise AssertionError(f"no line matching {pattern!r}; output so far:\n" + "\n".join(self.lines))

    def commands(self) -> list[tuple[str, str]]:
        self.wait_for(r"^Ready\. Try:")
        found: list[tuple[str, str]] = []
        while len(found) < N_COMMANDS:
            match = KUBECTL_LINE.search(self.wait_for(KUBECTL_LINE.pattern))
            assert match is not None
            found.append((match.group(1), match.group(2)))
        return found

    def urls(self) -> list[str]:
        out = []
        for line in self.lines:
            match = re.match(r"^(?:fleet exporter|prometheus|adapter)\s+(http://127\.0\.0\.1:\d+)", line)
            if match:
                out.append(match.group(1))
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def _closed(url: str) -> bool:
    try:
        httpx.get(url, timeout=2.0, trust_env=False)
    except httpx.ConnectError:
        return True
    except httpx.HTTPError:
        return False
    return False


class Kubectl:
    """The real kubectl against the demo's plain-HTTP adapter (``get --raw``), with a throwaway HOME."""

    def __init__(self, server: str, home: Path) -> None:
        self.server = server
        self.env = {**os.environ, "HOME": str(home)}  # keep ~/.kube/cache out of the real home

    def get(self, path: str) -> tuple[int, dict[str, Any] | None, str]:
        out = subprocess.run(
            ["kubectl", f"--server={self.server}", "get", "--raw", path],
            check=False, capture_output=True, text=True, env=self.env, timeout=60,
        )  # fmt: skip
        return out.returncode, (json.loads(out.stdout) if out.returncode == 0 else None), out.stderr

    def items(self, path: str, until: float) -> list[dict[str, Any]]:
        """The first non-empty item list (a metric may need a scrape or two), polling until ``until``."""
        while True:
            code, body, err = self.get(path)
            if code == 0 and body is not None and body.get("items"):
                items: list[dict[str, Any]] = body["items"]
                return items
            if time.monotonic() > until:
                raise AssertionError(f"{path}: no items before the deadline (last: {code} {body} {err.strip()})")
            time.sleep(0.5)


def _value(item: dict[str, Any]) -> float:
    return float(parse_quantity(str(item["value"])))


@pytest.mark.binary("kubectl")
def test_demo_serves_every_metric_and_the_forecast_through_kubectl_within_a_minute(tmp_path: Path) -> None:
    plot = tmp_path / "run.png"
    demo = Demo("--duration", "75", "--pods", "3", "--exported-layout-node", "gpu-node-1", "--plot", str(plot))
    try:
        commands = demo.commands()
        servers = {server for server, _ in commands}
        assert len(servers) == 1
        kubectl = Kubectl(servers.pop(), tmp_path)
        minute = demo.started + 60.0
        paths = [path for _, path in commands]
        assert paths[0] == "/apis/custom.metrics.k8s.io/v1beta2"
        code, discovery, err = kubectl.get(paths[0])
        assert code == 0 and discovery is not None, err
        resources = {r["name"] for r in discovery["resources"]}
        catalog = parse_catalog(catalog_document(None))
        names = [*catalog.names(), *catalog.forecast_names()]
        assert {f"pods/{n}" for n in (*catalog.names(), "llm_composite_load_boosted")} <= resources
        assert {f"deployments.apps/{n}" for n in names} <= resources

        # The printed commands answer, the forecast ones included (the backfilled history makes them work
        # at once; without it llm_load_forecast answers 404 insufficient_history for hours).
        pod_names: set[str] = set()
        for path in paths[1:5]:
            items = kubectl.items(path, until=minute)
            assert len(items) == 3, items  # one per pod
            pod_names |= {item["describedObject"]["name"] for item in items}
        assert len(pod_names) == 3 and all(n.startswith("llama-3-8b-") for n in pod_names)
        deployment = {path.rsplit("/", 1)[1]: kubectl.items(path, until=minute) for path in paths[5:]}
        for metric, items in deployment.items():
            assert items[0]["describedObject"]["kind"] == "Deployment", metric
            assert items[0]["metric"]["name"] == metric
        assert _value(deployment["llm_load_forecast"][0]) > 0
        assert 1.0 <= _value(deployment["llm_load_boost"][0]) <= catalog.forecast.max_boost  # type: ignore[union-attr]

        # Every other metric of the catalog, for the pods and for the Deployment.
        api = paths[0]
        for name in catalog.names():
            items = kubectl.items(f"{api}/namespaces/llm-demo/pods/*/{name}?labelSelector=app%3Dllama-3-8b", minute)
            assert {item["describedObject"]["name"] for item in items} == pod_names, name
            kubectl.items(f"{api}/namespaces/llm-demo/deployments.apps/llama-3-8b/{name}", minute)
        # On this stretch of the trace the forecast peak is above the current load: the boost shows.
        boosts = []
        while time.monotonic() < minute:
            boosts.append(_value(kubectl.items(paths[7], minute)[0]))
            if boosts[-1] > 1.05:
                break
            time.sleep(1.0)
        assert boosts and max(boosts) > 1.05, boosts
        assert time.monotonic() < minute, "the forecast metrics took more than a minute"

        line = demo.wait_for(r"composite \d+\.\d\d, boost \d+\.\d\d: boosted \d+\.\d\d \| forecast \d", timeout=30)
        assert "replicas 3 (ready 3" in line
        assert demo.proc.wait(timeout=90) == 0
        written = demo.wait_for(r"^plot written: ", timeout=30)
        assert written == f"plot written: {plot}"
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        for url in demo.urls():
            assert _closed(url), f"{url} still answers after the demo exited"
    finally:
        demo.kill()


def test_demo_stops_every_child_on_ctrl_c_and_writes_its_plot(tmp_path: Path) -> None:
    plot = tmp_path / "stopped.png"
    demo = Demo("--pods", "1", "--plot", str(plot))
    try:
        demo.commands()
        urls = demo.urls()
        assert len(urls) == 3
        for _ in range(2):  # two status lines: the timeline has samples to plot
            demo.wait_for(r"^\[day \d+ \d\d:\d\d\] arrivals .* replicas 1 \(ready 1")
        demo.proc.send_signal(signal.SIGINT)
        assert demo.proc.wait(timeout=60) == 0
        demo.wait_for(r"^plot written: ", timeout=30)
        assert plot.is_file()
        for url in urls:
            assert _closed(url), f"{url} still answers after the demo exited"
    finally:
        demo.kill()


def test_demo_stops_every_child_on_sigterm() -> None:
    demo = Demo("--duration", "600", "--pods", "2", "--profile", "llama3-70b-h100-tp4")
    try:
        demo.commands()
        urls = demo.urls()
        assert len(urls) == 3
        demo.proc.send_signal(signal.SIGTERM)
        demo.proc.wait(timeout=60)
        for url in urls:
            assert _closed(url), f"{url} still answers after SIGTERM"
    finally:
        demo.kill()


DASHBOARD = REPO / "dashboards" / "llm-hpa-adapter.json"
DASHBOARD_VARS = {"$namespace": "llm-demo", "$workload": ".*", "$p99_slo": "0.8", "$__rate_interval": "5s"}


def _query(prom: str, expr: str) -> list[dict[str, Any]]:
    body = httpx.get(f"{prom}/api/v1/query", params={"query": expr}, timeout=10.0, trust_env=False).json()
    assert body["status"] == "success", (expr, body)
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _check_dashboard(prom: str) -> None:
    """Every target of the "Is the HPA keeping up?" row has data, and every panel of the workload rows has some."""
    dash = json.loads(DASHBOARD.read_text())
    row = ""
    for panel in dash["panels"]:
        if panel["type"] == "row":
            row = panel["title"]
            continue
        if row not in ("Is the HPA keeping up?", "Workload: what the HPA sees", "Forecast"):
            continue
        if row == "Forecast" and panel["title"] != "Load vs forecast vs boost":
            continue  # scored errors need a full horizon of history; fit durations are adapter internals
        found = {}
        for target in panel["targets"]:
            expr = target["expr"]
            for name, value in DASHBOARD_VARS.items():
                expr = expr.replace(name, value)
            found[target["legendFormat"]] = bool(_query(prom, expr))
        if row == "Is the HPA keeping up?":
            assert all(found.values()), (panel["title"], found)
        else:
            assert any(found.values()), (panel["title"], found)


def test_demo_autoscale_closes_the_loop_and_plots_it(tmp_path: Path) -> None:
    plot = tmp_path / "autoscale.png"
    timeline = tmp_path / "autoscale.json"
    # The dashboard's ITL P99 panels read the embedded composite's latency term; the closed loop's SLO and replicas
    # are judged in test_closed_loop.py.
    # The trace's peak at three times the two pods' knee: the morning's load is past it, so the HPA adds pods.
    demo = Demo("--autoscale", "--duration", "40", "--pods", "2", "--load", "3", "--plot", str(plot),
                "--json", str(timeline))  # fmt: skip
    try:
        demo.commands()
        prom = demo.urls()[1]
        demo.wait_for(r"^Autoscaling: the HPA model reads llm_composite_load_boosted")
        replicas = set()
        while demo.proc.poll() is None or not demo._queue.empty():
            try:
                line = demo.wait_for(r"^\[day |^plot written: ", timeout=60)
            except AssertionError:
                break
            match = re.search(r"\| replicas (\d+) ", line)
            if match:
                replicas.add(int(match.group(1)))
                if len(replicas) == 2:
                    # The HPA's kube-state-metrics series reach Prometheus while the loop runs ...
                    (series,) = _query(prom, "kube_horizontalpodautoscaler_status_desired_replicas")
                    assert series["metric"]["horizontalpodautoscaler"] == "llama-3-8b"
                    # ... and every panel of the dashboard's first rows has data in the demo's Prometheus.
                    _check_dashboard(prom)
            if line.startswith("plot written: "):
                break
        assert len(replicas) >= 2, f"replicas never changed: {demo.lines}"
        assert demo.proc.wait(timeout=60) == 0
        assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        # The timeline the plot shows, as JSON: the replica changes the status lines reported are in it.
        samples = json.loads(timeline.read_text())["samples"]
        assert len(samples) >= 10
        times = [s["sim_time_s"] for s in samples]
        assert times == sorted(times)
        assert len({s["desired"] for s in samples}) >= 2
        assert all(s["arrivals_rps"] > 0 and 1 <= s["ready"] for s in samples)
    finally:
        demo.kill()
