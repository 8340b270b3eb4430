"""Issue 26 row 10: no credential reaches the adapter's log, whichever logger writes the line.

The real adapter (``python -m adapter serve`` in a child process) reads a real Prometheus through a URL with a
password in its userinfo, a bearer-token file and a secret extra header, at ``--log-level debug`` and
``info``. It serves HPA-shaped requests (which query the backend through httpx, whose own INFO line prints
every request's URL) and one whose backend is unreachable (the adapter's warning path). Neither the password,
the token nor the header value may appear anywhere in its stdout/stderr; the log must still show that the
queries happened (so the test would see a leak if there were one).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from adapter.demo.adapter_process import serve_command
from adapter.demo.servers import free_port
from tests.hardening.test_upstream_pool_recovers import fleet
from tests.support.backends import TestBackend

PASSWORD = "pw-Zq8v1Lx9"
TOKEN = "tok-Rm4Yc7Wd2Kp5"
HEADER_SECRET = "hdr-Jn3Bs6Tf0"


def run_adapter(prometheus_url: str, level: str, tmp: Path, token_file: Path, path: str) -> tuple[str, str]:
    """Start the adapter, make its queries, stop it; (its whole stdout+stderr, its URL)."""
    port = free_port()
    command = serve_command(
        prometheus_url,
        port,
        "--insecure-plain-http",
        "--backend-token-file",
        str(token_file),
        "--backend-header",
        f"X-Api-Key={HEADER_SECRET}",
    )
    command[command.index("--log-level") + 1] = level
    log_path = tmp / f"adapter-{level}-{port}.log"
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                if httpx.get(url + "/livez", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        for _ in range(3):
            httpx.get(url + path, timeout=30)
        httpx.get(url + "/metrics", timeout=30)
    finally:
        proc.terminate()
        proc.wait(15)
    return log_path.read_text(errors="replace"), url


@pytest.mark.parametrize("level", ["debug", "info"])
def test_no_secret_in_any_log_line(prometheus: TestBackend, tmp_path: Path, level: str, unique_ns: str) -> None:
    _, path = fleet(prometheus, unique_ns)
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    host = prometheus.url.removeprefix("http://")
    text, _ = run_adapter(f"http://scraper:{PASSWORD}@{host}", level, tmp_path, token_file, path)
    assert "/api/v1/query" in text or level == "info", text[-3000:]  # debug: httpx's request lines are there
    assert "metrics backend: http://scraper:***@" in text, text[-3000:]  # the start-up line, redacted
    for secret in (PASSWORD, TOKEN, HEADER_SECRET):
        assert secret not in text, (secret, [line for line in text.splitlines() if secret in line][:5])

    # The warning path: the same credentials towards a port where nothing listens.
    dead = f"http://scraper:{PASSWORD}@127.0.0.1:{free_port()}"
    text, _ = run_adapter(dead, level, tmp_path, token_file, path)
    assert "unreachable" in text, text[-3000:]
    for secret in (PASSWORD, TOKEN, HEADER_SECRET):
        assert secret not in text, (secret, [line for line in text.splitlines() if secret in line][:5])


def test_redaction_covers_loggers_with_their_own_handlers() -> None:
    """uvicorn's loggers write through handlers of their own, not the root's: the record itself is redacted."""
    import io
    import logging

    from adapter import log_redaction

    log_redaction.install("INFO")
    log_redaction.register_secret("reg-Secret-77")
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    logger = logging.getLogger("uvicorn.error.redaction-test")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("GET %s auth=%s", "https://u:pw-123456@h/x", "Bearer abc.DEF-123")
        logger.warning("header value %s; basic auth file /etc/x; Basic authentication", "reg-Secret-77")
        try:
            raise ValueError("https://u:pw-123456@h/boom")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    text = out.getvalue()
    for secret in ("pw-123456", "abc.DEF-123", "reg-Secret-77"):
        assert secret not in text, text
    assert "https://u:***@h/x" in text and "basic auth file /etc/x; Basic authentication" in text, text
