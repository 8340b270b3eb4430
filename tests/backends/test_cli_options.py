"""The backend flags reach every command that talks to the backend: ``serve`` (as a real child process),
``explain`` and ``backtest`` -- all through the nginx gateway (mTLS + bearer token + a secret header), and
no secret shows in their output, their logs or ``/metrics``."""

from __future__ import annotations

import contextlib
import io
import json
import math
import secrets
from pathlib import Path

import httpx
import pytest

from adapter.__main__ import build_parser, main
from adapter.demo.adapter_process import AdapterProcess
from adapter.quantity import parse_quantity
from tests.backends.conftest import PODS, World
from tests.support.fleet_data import expected

HEADER_SECRET = "hdr-" + secrets.token_hex(12)


def flags(world: World, token: str | None = None) -> list[str]:
    return [
        "--backend-ca-file",
        world.gw.ca_file,
        "--backend-cert-file",
        world.gw.client_cert,
        "--backend-key-file",
        world.gw.client_key,
        "--backend-token-file",
        world.file("cli-token", (token or world.gw.token) + "\n"),
        "--backend-header",
        f"X-Api-Key={HEADER_SECRET}",
    ]


def secrets_of(world: World) -> tuple[str, ...]:
    return world.gw.token, HEADER_SECRET


def test_serve_flags_reach_the_backend_and_no_secret_leaks(world: World, tmp_path: Path) -> None:
    proc = AdapterProcess(world.gw.mtls_url, tmp_path, extra_args=flags(world))
    proc.start()
    try:
        r = httpx.get(proc.url + world.path(), timeout=30)
        assert r.status_code == 200, r.text
        got = {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}
        for p in PODS:
            assert math.isclose(got[p.name], expected(p, "gpu_utilization_p90"), abs_tol=0.0006)
        metrics = httpx.get(proc.url + "/metrics", timeout=30).text
        assert 'outcome="ok"' in metrics
    finally:
        proc.stop()
    log = proc.log_path.read_text()
    for secret in secrets_of(world):
        assert secret not in metrics and secret not in log


def test_serve_with_a_wrong_token_logs_clearly_without_the_secret(world: World, tmp_path: Path) -> None:
    wrong = "tok-" + secrets.token_hex(16)
    proc = AdapterProcess(world.gw.mtls_url, tmp_path, extra_args=flags(world, token=wrong))
    proc.start()
    try:
        r = httpx.get(proc.url + world.path(), timeout=30)
        metrics = httpx.get(proc.url + "/metrics", timeout=30).text
    finally:
        proc.stop()
    assert r.status_code == 503 and r.json()["reason"] == "ServiceUnavailable"
    assert world.gw.mtls_url not in r.text
    assert 'outcome="http_401"' in metrics
    log = proc.log_path.read_text()
    assert "HTTP 401" in log and world.gw.mtls_url in log and "--backend-token-file" in log
    for secret in (wrong, *secrets_of(world)):
        assert secret not in log and secret not in metrics


def test_serve_refuses_bad_options_at_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        [
            "serve",
            "--prometheus-url",
            "http://127.0.0.1:9",
            "--insecure-plain-http",
            "--backend",
            "victoriametrics-cluster",
        ]
    )
    assert code == 2
    assert "/select/<accountID>/prometheus" in capsys.readouterr().err


def test_explain_through_the_gateway(world: World) -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(
            [
                "explain",
                "--prometheus-url",
                world.gw.mtls_url,
                *flags(world),
                "--namespace",
                world.ns,
                "--selector",
                "app=web",
                "--metric",
                "gpu_utilization_p90",
                "--json",
            ]
        )
    assert code == 0
    doc = json.loads(out.getvalue())
    served = {p["pod"]: p["served"] for p in doc["pods"]}
    for p in PODS:
        assert math.isclose(served[p.name], expected(p, "gpu_utilization_p90"), abs_tol=0.0006)
    for secret in secrets_of(world):
        assert secret not in out.getvalue()


def test_backtest_through_the_gateway(world: World, tmp_path: Path) -> None:
    """backtest pulls its history the same way (here through the vmselect layout, which also checks the
    flavour's deny_partial_response=1)."""
    out = tmp_path / "bt.json"
    query = f'sum(DCGM_FI_DEV_GPU_UTIL{{namespace="{world.ns}"}})'
    code = main(
        [
            "backtest",
            "--prometheus-url",
            world.gw.mtls_url + "/select/0/prometheus",
            "--backend",
            "victoriametrics-cluster",
            *flags(world),
            "--query",
            query,
            "--since",
            "9m",
            "--step",
            "15s",
            "--horizon",
            "15s",
            "--history",
            "8",
            "--train-fraction",
            "0.3",
            "--model",
            "persistence",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["source"]["kind"] == "prometheus" and doc["points_tested"] > 0
    for secret in secrets_of(world):
        assert secret not in out.read_text()


def test_configuration_page_and_help_document_every_backend_flag(capsys: pytest.CaptureFixture[str]) -> None:
    # The command-line reference lives in docs/configuration.md (the README links it).
    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    parser = build_parser()
    serve = parser._subparsers._group_actions[0].choices["serve"]  # type: ignore[union-attr]
    group = next(g for g in serve._action_groups if g.title and g.title.startswith("metrics backend"))
    flags_ = [opt for action in group._group_actions for opt in action.option_strings]
    assert len(flags_) >= 12
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = capsys.readouterr().out
    for flag in flags_:
        assert f"`{flag}" in readme, f"docs/configuration.md does not document {flag}"
        assert flag in help_text
