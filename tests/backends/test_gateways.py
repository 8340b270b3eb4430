"""The adapter through a real nginx gateway in front of the real Prometheus and VictoriaMetrics (issue 14).

The gateway enforces HTTPS with its own CA, mTLS, a bearer token, basic auth, a Mimir tenant header and the
Mimir / vmselect path layouts (tests/support/gateway.py). Through each, the adapter serves the same values as
the fleet's independently computed expectations; a wrong or missing credential is a 503 Status whose message
names neither the backend's address nor the secret, with a clear log line that has no secret either; a rotated
token file is picked up without a restart.
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
from pathlib import Path

import httpx
import pytest

from adapter.catalog import load_catalog
from adapter.errors import ConfigError
from adapter.quantity import parse_quantity
from adapter.query.backend import BackendAccess, check_access
from adapter.settings import Settings
from tests.backends.conftest import PODS, World
from tests.support.adapter_server import running_adapter
from tests.support.fleet_data import expected
from tests.support.gateway import TENANT


def adapter(world: World, url: str, flavour: str, access: BackendAccess, timeout: float = 5.0):  # type: ignore[no-untyped-def]
    # Answer cache and value store off: every request reaches the gateway, so a credential change shows at once
    # (behind the store, stored values are served up to max_staleness: tests/test_store.py).
    catalog = dataclasses.replace(load_catalog(None), cache_ttl_seconds=0.0, store=None)
    check_access(url, flavour, access)  # what serve does at start-up
    settings = Settings(
        prometheus_url=url,
        backend=flavour,
        pod_source="prometheus",  # type: ignore[arg-type]
        query_timeout_s=timeout,
        catalog=catalog,
        backend_access=access,
    )
    return running_adapter(settings, clock=lambda: world.now)


def assert_real_values(r: httpx.Response) -> None:
    assert r.status_code == 200, r.text
    got = {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in r.json()["items"]}
    assert set(got) == {p.name for p in PODS}
    for p in PODS:
        assert math.isclose(got[p.name], expected(p, "gpu_utilization_p90"), abs_tol=0.0006), (p.name, got)


def assert_clean_503(r: httpx.Response, world: World, words: str) -> None:
    """A 503 Status that says what failed, without the backend's address or any secret."""
    assert r.status_code == 503, r.text
    doc = r.json()
    assert doc["kind"] == "Status" and doc["reason"] == "ServiceUnavailable"
    assert words in doc["message"], doc["message"]
    for leak in (
        "127.0.0.1",
        str(world.gw.mtls_port),
        str(world.gw.basic_port),
        world.gw.token,
        world.gw.basic_password,
    ):
        assert leak not in r.text


def get(url: str) -> httpx.Response:
    return httpx.get(url, timeout=30)


# -- correct values through every gateway layout ------------------------------------------------------------------


def test_prometheus_behind_mtls_and_bearer_token(world: World) -> None:
    with adapter(world, world.gw.mtls_url, "prometheus", world.tls()) as url:
        assert_real_values(get(url + world.path()))
    # The gateway saw the adapter's queries (not a side door to the backend).
    assert 'POST /api/v1/query HTTP/1.1" 200' in world.gw.access_log()


def test_mimir_layout_with_tenant_header(world: World) -> None:
    with adapter(world, world.gw.mtls_url + "/prometheus", "mimir", world.tls(tenant=TENANT)) as url:
        assert_real_values(get(url + world.path()))
    # The same tenant as a plain --backend-header works too.
    access = world.tls(headers=(("X-Scope-OrgID", TENANT),))
    with adapter(world, world.gw.mtls_url + "/prometheus", "mimir", access) as url:
        assert_real_values(get(url + world.path()))


def test_mimir_without_the_tenant_is_a_clean_503(world: World, caplog: pytest.LogCaptureFixture) -> None:
    with (
        caplog.at_level(logging.WARNING),
        adapter(world, world.gw.mtls_url + "/prometheus", "mimir", world.tls()) as url,
    ):
        assert_clean_503(get(url + world.path()), world, "HTTP 401")
    assert "check --backend-token-file" in caplog.text and world.gw.token not in caplog.text


@pytest.mark.parametrize("how", ["full-url", "root-plus-tenant"])
def test_victoriametrics_cluster_layout(world: World, how: str) -> None:
    """vmselect's /select/<accountID>/prometheus layout; the gateway refuses queries without
    deny_partial_response=1, so this also proves the flavour sends it."""
    if how == "full-url":
        target, access = world.gw.mtls_url + "/select/0/prometheus", world.tls()
    else:
        target, access = world.gw.mtls_url, world.tls(tenant="0")
    with adapter(world, target, "victoriametrics-cluster", access) as url:
        assert_real_values(get(url + world.path()))


def test_plain_prometheus_flavour_does_not_pass_the_vmselect_gate(world: World) -> None:
    """The counter-proof: the same URL as ``--backend prometheus`` lacks deny_partial_response and is refused
    (a gateway 400 with a non-JSON body is the backend's fault: 503)."""
    with adapter(world, world.gw.mtls_url + "/select/0/prometheus", "prometheus", world.tls()) as url:
        assert_clean_503(get(url + world.path()), world, "HTTP 400")


def test_victoriametrics_behind_basic_auth(world: World) -> None:
    access = BackendAccess(
        ca_file=world.gw.ca_file,
        basic_auth_file=world.file("basic", f"{world.gw.basic_user}:{world.gw.basic_password}\n"),
    )
    with adapter(world, world.gw.basic_url, "victoriametrics", access) as url:
        assert_real_values(get(url + world.path()))


# -- wrong or missing credentials ---------------------------------------------------------------------------------


def _wrong(world: World, case: str) -> tuple[str, BackendAccess, str]:
    gw = world.gw
    if case == "no-token":
        return gw.mtls_url, world.tls(token_file=None), "HTTP 401"
    if case == "wrong-token":
        return gw.mtls_url, world.tls(token_file=world.file("bad-token", "tok-wrong-" + gw.token[4:])), "HTTP 401"
    if case == "no-client-cert":  # nginx answers 400 "No required SSL certificate was sent"
        return gw.mtls_url, world.tls(cert_file=None, key_file=None), "HTTP 400"
    if case == "untrusted-client-cert":
        return gw.mtls_url, world.tls(cert_file=gw.stranger_cert, key_file=gw.stranger_key), "HTTP 400"
    if case == "wrong-ca":  # the adapter does not trust the gateway's certificate
        return gw.mtls_url, world.tls(ca_file=gw.other_ca_file), "certificate did not verify"
    if case == "system-cas":  # no --backend-ca-file: the system store does not know the gateway's CA
        return gw.mtls_url, world.tls(ca_file=None), "certificate did not verify"
    if case == "wrong-password":
        return (
            gw.basic_url,
            BackendAccess(
                ca_file=gw.ca_file, basic_auth_file=world.file("bad-basic", f"{gw.basic_user}:not-{gw.basic_password}")
            ),
            "HTTP 401",
        )
    raise AssertionError(case)


@pytest.mark.parametrize(
    "case",
    ["no-token", "wrong-token", "no-client-cert", "untrusted-client-cert", "wrong-ca", "system-cas", "wrong-password"],
)
def test_wrong_or_missing_credential_is_a_503_and_a_clear_log_line(
    world: World, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    target, access, words = _wrong(world, case)
    flavour = "victoriametrics" if target == world.gw.basic_url else "prometheus"
    with caplog.at_level(logging.WARNING, logger="adapter"), adapter(world, target, flavour, access) as url:
        assert_clean_503(get(url + world.path()), world, words)
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("adapter.query")]
    assert lines, "no log line about the failing backend"
    # The log names the backend (operators need it) and never a secret.
    assert any(target in line for line in lines), lines
    text = caplog.text
    for secret in (world.gw.token, world.gw.basic_password, world.gw.token[4:]):
        assert secret not in text


def test_rotated_token_file_is_picked_up_without_a_restart(world: World, caplog: pytest.LogCaptureFixture) -> None:
    old = world.gw.token
    token_file = world.file("rotating-token", old)
    access = world.tls(token_file=token_file)
    try:
        with adapter(world, world.gw.mtls_url, "prometheus", access) as url:
            assert_real_values(get(url + world.path()))
            new = "tok-" + os.urandom(16).hex()
            world.gw.set_token(new)  # the gateway now wants the new token only ...
            assert_clean_503(get(url + world.path()), world, "HTTP 401")
            # ... and the kubelet swaps the projected token file atomically (a rename, as its ..data symlink).
            tmp = Path(token_file + ".new")
            tmp.write_text(new + "\n")
            os.replace(tmp, token_file)
            assert_real_values(get(url + world.path()))
        assert new not in caplog.text and old not in caplog.text
    finally:
        world.gw.set_token(old)


# -- start-up checks ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url,flavour,access,words",
    [
        ("http://127.0.0.1:9/select/0/prometheus", "victoriametrics-cluster", BackendAccess(tenant="1"), "contradicts"),
        ("http://127.0.0.1:9", "victoriametrics-cluster", BackendAccess(), "/select/<accountID>/prometheus"),
        ("http://127.0.0.1:9", "victoriametrics-cluster", BackendAccess(tenant="team-a"), "numbers"),
        ("http://127.0.0.1:9", "prometheus", BackendAccess(tenant="x"), "--backend-tenant applies"),
        ("http://127.0.0.1:9", "prometheus", BackendAccess(ca_file="/nonexistent"), "need an https://"),
        ("https://127.0.0.1:9", "prometheus", BackendAccess(ca_file="/nonexistent/ca.crt"), "backend TLS files"),
        ("https://127.0.0.1:9", "prometheus", BackendAccess(cert_file="/x.crt"), "go together"),
        ("http://127.0.0.1:9", "prometheus", BackendAccess(token_file="/nonexistent/token"), "cannot read"),
        ("http://127.0.0.1:9", "prometheus", BackendAccess(token_file="/a", basic_auth_file="/b"), "not both"),
        ("ftp://127.0.0.1:9", "prometheus", BackendAccess(), "http:// or https://"),
    ],
)
def test_bad_options_are_config_errors_at_start(url: str, flavour: str, access: BackendAccess, words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("?", r"\?")):
        check_access(url, flavour, access)


def test_insecure_skip_verify_works_and_is_loud(world: World, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        access = world.tls(ca_file=None, insecure_skip_verify=True)
        with adapter(world, world.gw.mtls_url, "prometheus", access) as url:
            assert_real_values(get(url + world.path()))
    assert "VERIFICATION IS OFF" in caplog.text


def test_rotated_client_certificate_is_picked_up_without_a_restart(world: World) -> None:
    """The client certificate files start as a pair the gateway does not trust and are then rotated (renamed
    over, as the kubelet swaps a Secret volume) to the good pair: the next request uses the new certificate."""
    cert, key = (
        world.file("rot.crt", Path(world.gw.stranger_cert).read_text()),
        world.file("rot.key", Path(world.gw.stranger_key).read_text()),
    )
    with adapter(world, world.gw.mtls_url, "prometheus", world.tls(cert_file=cert, key_file=key)) as url:
        assert_clean_503(get(url + world.path()), world, "HTTP 400")
        for src, dst in ((world.gw.client_key, key), (world.gw.client_cert, cert)):
            tmp = Path(dst + ".new")
            tmp.write_text(Path(src).read_text())
            os.replace(tmp, dst)
        assert_real_values(get(url + world.path()))


def test_credentials_in_the_url_still_work_and_are_not_logged(world: World, caplog: pytest.LogCaptureFixture) -> None:
    """``https://user:password@host`` worked before the connection flags existed; it still does, and the password
    is redacted wherever the URL is logged."""
    gw = world.gw
    target = f"https://{gw.basic_user}:{gw.basic_password}@127.0.0.1:{gw.basic_port}"
    with caplog.at_level(logging.INFO, logger="adapter"):
        with adapter(world, target, "victoriametrics", BackendAccess(ca_file=gw.ca_file)) as url:
            assert_real_values(get(url + world.path()))
        bad = f"https://{gw.basic_user}:wrong-{gw.basic_password}@127.0.0.1:{gw.basic_port}"
        with adapter(world, bad, "victoriametrics", BackendAccess(ca_file=gw.ca_file)) as url:
            assert_clean_503(get(url + world.path()), world, "HTTP 401")
    assert f"{gw.basic_user}:***@127.0.0.1:{gw.basic_port}" in caplog.text
    assert gw.basic_password not in caplog.text
