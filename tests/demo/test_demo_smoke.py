"""``python -m adapter demo`` end to end: real Prometheus, the real adapter, the printed kubectl paths answer.

Needs the ``prometheus`` binary (Debian package); kubectl is used too when it is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from queue import Empty, Queue

import httpx
import pytest

pytestmark = pytest.mark.binary("prometheus")

REPO = Path(__file__).resolve().parents[2]
KUBECTL_LINE = re.compile(r"kubectl --server=(\S+) get --raw '([^']+)'")


class Demo:
    """The demo as a child process whose stdout is read line by line on a thread."""

    def __init__(self, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "adapter", "demo", *args],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
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
        while len(found) < 5:
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


def _get_with_items(server: str, path: str) -> dict[str, object]:
    """The first answer with items (the adapter may need a scrape or two of history for some metrics)."""
    deadline = time.monotonic() + 30
    while True:
        response = httpx.get(server + path, timeout=10.0, trust_env=False)
        assert response.status_code == 200, response.text
        body: dict[str, object] = response.json()
        if body.get("items") or time.monotonic() > deadline:
            return body
        time.sleep(1.0)


def test_demo_prints_working_kubectl_commands_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    demo = Demo("--pods", "3", "--exported-layout-node", "gpu-node-1")
    try:
        commands = demo.commands()
        servers = {server for server, _ in commands}
        assert len(servers) == 1
        server = servers.pop()
        paths = [path for _, path in commands]
        assert paths[0] == "/apis/custom.metrics.k8s.io/v1beta2"
        discovery = httpx.get(server + paths[0], timeout=10.0, trust_env=False).json()
        names = {r["name"] for r in discovery["resources"]}
        assert {"pods/llm_composite_load", "pods/gpu_utilization_p90", "pods/inference_queue_depth"} <= names
        pod_names: set[str] = set()
        for path in paths[1:4]:
            body = _get_with_items(server, path)
            items = body["items"]
            assert isinstance(items, list) and len(items) == 3, body  # one per pod
            pod_names |= {item["describedObject"]["name"] for item in items}
        assert len(pod_names) == 3 and all(n.startswith("llama-3-8b-") for n in pod_names)
        deployment = _get_with_items(server, paths[4])
        assert deployment["items"][0]["describedObject"]["kind"] == "Deployment"  # type: ignore[index]
        if shutil.which("kubectl"):
            env = {**os.environ, "HOME": str(tmp_path)}  # keep ~/.kube/cache out of the real home
            out = subprocess.run(
                ["kubectl", f"--server={server}", "get", "--raw", paths[2]],
                check=False, capture_output=True, text=True, env=env, timeout=60,
            )  # fmt: skip
            assert out.returncode == 0, out.stderr
            assert '"kind":"MetricValueList"' in out.stdout
        demo.wait_for(r"^\[day \d+ \d\d:\d\d\] arrivals .* replicas 3 \(ready 3")
        demo.proc.send_signal(signal.SIGINT)
        assert demo.proc.wait(timeout=60) == 0
        for url in demo.urls():
            assert _closed(url), f"{url} still answers after the demo exited"
    finally:
        demo.kill()


def test_demo_runs_for_its_duration_then_exits_cleanly() -> None:
    demo = Demo("--duration", "3", "--pods", "1", "--gpus-per-pod", "1")
    try:
        demo.commands()
        urls = demo.urls()
        assert len(urls) == 3
        assert demo.proc.wait(timeout=60) == 0
        for url in urls:
            assert _closed(url), f"{url} still answers after the demo exited"
    finally:
        demo.kill()


def test_demo_stops_every_child_on_sigterm() -> None:
    demo = Demo("--duration", "600", "--pods", "2", "--gpus-per-pod", "8")
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
