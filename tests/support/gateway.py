"""nginx (the Debian binary) as the production gateway in front of the real Prometheus and VictoriaMetrics.

It enforces what kube-rbac-proxy, an OpenShift Thanos Querier route, a Mimir gateway or a vmauth in front of
vmselect enforce, each on its own loopback port with a throwaway prefix directory:

- ``mtls_url``: HTTPS with the gateway's own CA, a client certificate from ``client_ca`` required, and
  ``Authorization: Bearer <token>``; behind it
  ``/api/v1/...`` -> Prometheus, ``/prometheus/api/v1/...`` -> Prometheus only with ``X-Scope-OrgID: team-a``
  (the Mimir layout), ``/select/0/prometheus/api/v1/...`` -> VictoriaMetrics only with
  ``deny_partial_response=1`` in the URL (the vmselect layout).
- ``basic_url``: HTTPS with the gateway CA and basic auth -> VictoriaMetrics.

``set_token()`` changes the accepted token and reloads nginx (SIGHUP), as rotating a token would on the
gateway's side. Certificates come from ``adapter.certs``.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
from pathlib import Path

import httpx

from adapter import certs
from adapter.demo.servers import LOOPBACK, DevServerError, free_port
from tests.support.binaries import require_binary
from tests.support.procs import children

TENANT = "team-a"


def _write_pair(pair: certs.KeyPair, directory: Path, name: str) -> tuple[str, str]:
    crt, key = directory / f"{name}.crt", directory / f"{name}.key"
    crt.write_bytes(pair.cert_pem())
    key.write_bytes(pair.key_pem())
    return str(crt), str(key)


class NginxGateway:
    """One nginx master process (started by ``start()``, stopped by ``close()``); see the module doc."""

    def __init__(self, prometheus_url: str, vm_url: str) -> None:
        self.prometheus_url = prometheus_url
        self.vm_url = vm_url
        self.dir = Path(tempfile.mkdtemp(prefix="llm-hpa-nginx-"))
        self.mtls_port = free_port()
        self.basic_port = free_port()
        self.token = "tok-" + secrets.token_hex(16)
        self.basic_user, self.basic_password = "adapter", "pw-" + secrets.token_hex(12)
        pki = self.dir / "pki"
        pki.mkdir()
        ca = certs.make_ca("test-gateway-ca")
        client_ca = certs.make_ca("test-gateway-client-ca")
        other_ca = certs.make_ca("some-other-ca")
        self.ca_file = str(pki / "ca.crt")
        Path(self.ca_file).write_bytes(ca.cert_pem())
        self.client_ca_file = str(pki / "client-ca.crt")
        Path(self.client_ca_file).write_bytes(client_ca.cert_pem())
        self.other_ca_file = str(pki / "other-ca.crt")
        Path(self.other_ca_file).write_bytes(other_ca.cert_pem())
        self.server_cert, self.server_key = _write_pair(certs.make_serving_cert(ca, "gateway", "test"), pki, "server")
        self.client_cert, self.client_key = _write_pair(
            certs.make_client_cert(client_ca, "llm-hpa-adapter"), pki, "client"
        )
        # A well-formed client certificate the gateway does not trust.
        self.stranger_cert, self.stranger_key = _write_pair(
            certs.make_client_cert(other_ca, "stranger"), pki, "stranger"
        )
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def mtls_url(self) -> str:
        return f"https://{LOOPBACK}:{self.mtls_port}"

    @property
    def basic_url(self) -> str:
        return f"https://{LOOPBACK}:{self.basic_port}"

    def _config(self) -> str:
        d = self.dir
        user = "user root;\n" if os.geteuid() == 0 else ""
        tls = (
            f"ssl_certificate {self.server_cert}; ssl_certificate_key {self.server_key}; ssl_protocols TLSv1.2 TLSv1.3;"
        )
        proxy = 'proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering off;'
        return f"""{user}daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log info;
events {{ worker_connections 512; }}
http {{
  access_log {d}/access.log;
  client_body_temp_path {d}/tmp-body; proxy_temp_path {d}/tmp-proxy; fastcgi_temp_path {d}/tmp-fcgi;
  uwsgi_temp_path {d}/tmp-uwsgi; scgi_temp_path {d}/tmp-scgi;
  client_max_body_size 16m; client_body_buffer_size 1m;
  map $http_authorization $bearer_ok {{ "Bearer {self.token}" 1; default 0; }}
  server {{
    listen {LOOPBACK}:{self.mtls_port} ssl;
    {tls}
    ssl_client_certificate {self.client_ca_file}; ssl_verify_client on;
    if ($bearer_ok = 0) {{ return 401 "unauthorized\\n"; }}
    location /prometheus/api/v1/ {{
      if ($http_x_scope_orgid != "{TENANT}") {{ return 401 "no org id\\n"; }}
      {proxy} proxy_pass {self.prometheus_url}/api/v1/;
    }}
    location /select/0/prometheus/api/v1/ {{
      if ($arg_deny_partial_response != "1") {{ return 400 "partial responses must be denied\\n"; }}
      {proxy} proxy_pass {self.vm_url}/api/v1/;
    }}
    location /api/v1/ {{ {proxy} proxy_pass {self.prometheus_url}/api/v1/; }}
    location / {{ return 404 "not here\\n"; }}
  }}
  server {{
    listen {LOOPBACK}:{self.basic_port} ssl;
    {tls}
    auth_basic "metrics"; auth_basic_user_file {d}/htpasswd;
    location /api/v1/ {{ {proxy} proxy_pass {self.vm_url}/api/v1/; }}
    location / {{ return 404 "not here\\n"; }}
  }}
}}
"""

    def _write(self) -> None:
        (self.dir / "nginx.conf").write_text(self._config())
        # nginx reads "{PLAIN}" passwords (ngx_http_auth_basic_module docs: "{scheme}data" syntax).
        (self.dir / "htpasswd").write_text(f"{self.basic_user}:{{PLAIN}}{self.basic_password}\n")

    def start(self) -> NginxGateway:
        exe = require_binary("nginx")  # Debian's nginx-light (make sysdeps); missing: skipped, or failed in CI
        self._write()
        log = (self.dir / "nginx.out").open("ab")
        self._proc = subprocess.Popen(
            [exe, "-p", str(self.dir), "-c", str(self.dir / "nginx.conf"), "-e", str(self.dir / "error.log")],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + 20
        for port in (self.mtls_port, self.basic_port):
            while True:
                if self._proc.poll() is not None:
                    raise DevServerError(f"nginx exited: {(self.dir / 'error.log').read_text()[-2000:]}")
                try:
                    socket.create_connection((LOOPBACK, port), timeout=0.5).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise DevServerError("nginx did not listen") from None
                    time.sleep(0.05)
        return self

    def set_token(self, token: str) -> None:
        """Accept only ``token`` from now on (config rewrite + SIGHUP); returns once the new config answers."""
        assert self._proc is not None
        self.token = token
        self._write()
        self._proc.send_signal(signal.SIGHUP)
        ctx = ssl.create_default_context(cafile=self.ca_file)
        ctx.load_cert_chain(self.client_cert, self.client_key)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with httpx.Client(verify=ctx, trust_env=False, timeout=5) as http:  # a fresh connection each time
                r = http.get(self.mtls_url + "/api/v1/status/buildinfo", headers={"Authorization": f"Bearer {token}"})
            # Old workers keep serving their open keep-alive connections with the old config until they exit.
            if r.status_code == 200 and len(self._workers()) == 1:
                return
            time.sleep(0.1)
        raise DevServerError("nginx did not take the new token")

    def _workers(self) -> list[int]:
        """Pids of the master's children (the workers, old ones still draining included)."""
        assert self._proc is not None
        return children(self._proc.pid)

    def access_log(self) -> str:
        return (self.dir / "access.log").read_text()

    def close(self) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # graceful
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self._proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
