"""Issue 26 row 9: a backend's error is a 503 with a fixed message, never a 500 and never the backend's words.

A real backend behind ``FaultProxy``: a 400 ``bad_data`` answer whose error text names an internal address and a
tenant, and an answer labelled ``Content-Encoding: gzip`` that is not gzip. Both reach the HPA as a
``ServiceUnavailable`` Status that carries neither the text nor the backend's address; the detail is in the
adapter's log. When the backend behaves again the real values are served.
"""

from __future__ import annotations

import logging

import pytest

from tests.faults.test_backend_faults import adapter, assert_real_values, get
from tests.hardening.test_upstream_pool_recovers import fleet
from tests.support.backends import TestBackend
from tests.support.fault_proxy import SECRET_ERROR_TEXT, FaultProxy


@pytest.mark.parametrize(("mode", "logged"), [("bad_data", SECRET_ERROR_TEXT), ("bad_gzip", "does not decode")])
def test_backend_error_is_a_503_without_its_text(
    backend: TestBackend, mode: str, logged: str, caplog: pytest.LogCaptureFixture, unique_ns: str
) -> None:
    now, path = fleet(backend, unique_ns)
    with FaultProxy(backend.url) as proxy, adapter(proxy.url, backend.kind, now) as url:
        assert_real_values(get(url + path))
        proxy.mode = mode
        with caplog.at_level(logging.WARNING, logger="adapter.query.client"):
            r = get(url + path)
        assert r.status_code == 503, r.text
        doc = r.json()
        assert doc["kind"] == "Status" and doc["reason"] == "ServiceUnavailable", doc
        for leaked in (SECRET_ERROR_TEXT, "10.9.8.7", "acme-internal", proxy.url, "127.0.0.1"):
            assert leaked not in r.text, (leaked, r.text)
        assert "see the adapter's log" in doc["message"], doc
        assert any(logged in rec.getMessage() for rec in caplog.records), [rec.getMessage() for rec in caplog.records]
        proxy.mode = "pass"
        assert_real_values(get(url + path))
