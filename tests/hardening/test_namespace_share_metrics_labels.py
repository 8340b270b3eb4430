"""Issue 26 row 5: /metrics is no payload a tenant can fill: no selector text in any label value.

Against a real Prometheus and the real adapter. An attacker sends requests whose ``metricLabelSelector``
is ~4 KiB of its own text (64 distinct values of 60 characters, each request different); each registers a
store key. Today every key is exported as three series labelled with that text, so each request adds
~12 KiB to every scrape. After: the ``selector`` label is a 12-hex digest, the text appears nowhere in the
scrape, what a key adds is a few hundred bytes and the attacker's series are capped by its key share. The
victim's HPA keeps getting its own values and its series stay in the scrape.
"""

from __future__ import annotations

import hashlib
import re

import httpx

from adapter.labels import parse_selector
from adapter.observability import Observability
from tests.hardening.test_namespace_share_store import PODS, adapter_with_clock, catalog, load, served, url_for
from tests.support.backends import TestBackend

REQUESTS = 80


def selector_text(i: int) -> str:
    values = [f"{i:04d}-{j:02d}-" + hashlib.sha256(f"{i}/{j}".encode()).hexdigest()[:52] for j in range(64)]
    return f"engine notin ({','.join(values)})"


def digest(text: str) -> str:
    """The label the contract promises (computed_series.selector_id): SHA-256 of the selector as parsed, 12 hex."""
    return hashlib.sha256(str(parse_selector(text)).encode()).hexdigest()[:12]


def test_store_series_carry_no_selector_text(prometheus: TestBackend, unique_ns: str) -> None:
    victim, attacker = f"{unique_ns}-victim", f"{unique_ns}-attacker"
    want = load(prometheus, victim, 2.0)
    load(prometheus, attacker, 9.0)
    with adapter_with_clock(prometheus, catalog()) as (url, store, _), httpx.Client(timeout=30) as client:
        assert served(client.get(url + url_for(victim))) == want
        before = len(client.get(url + "/metrics").content)
        for i in range(REQUESTS):
            text = selector_text(i)
            assert len(text) > 3900
            assert served(client.get(url + url_for(attacker, text))) == {PODS[0]: 9.0, PODS[1]: 10.0}
            assert served(client.get(url + url_for(victim))) == want
        assert len(store) == REQUESTS + 1  # every one is a key of its own (and the victim's)
        scrape = client.get(url + "/metrics").text
        grown = len(scrape.encode()) - before
        assert grown < REQUESTS * 1024, grown  # today: > 3 x 4 KiB per key
        for i in range(REQUESTS):
            assert f"{i:04d}-00-" not in scrape  # none of the attacker's text
        store_series = [
            line for line in scrape.splitlines() if line.startswith("llm_hpa_adapter_store_") and "selector=" in line
        ]
        selectors = {re.search(r'selector="([^"]*)"', line).group(1) for line in store_series}  # type: ignore[union-attr]
        assert selectors <= {""} | {digest(selector_text(i)) for i in range(REQUESTS)}
        assert all(s == "" or re.fullmatch(r"[0-9a-f]{12}", s) for s in selectors)
        assert len(selectors - {""}) == REQUESTS
        # The victim's own key is still exported.
        assert (
            f'llm_hpa_adapter_store_data_age_seconds{{namespace="{victim}",metric="inference_queue_depth",selector=""}}'
            in scrape
        )


def test_a_long_unknown_metric_name_is_no_label() -> None:
    """The other client-chosen text that reached a label: an unknown metric's name (the first 50 are kept)."""
    obs = Observability()
    obs.unknown_metric("m" * 8000, "pods")
    obs.unknown_metric("typo_metric", "pods")
    text = obs.exposition().decode()
    assert "m" * 200 not in text
    assert 'llm_hpa_adapter_unknown_metric_requests_total{metric="other",resource="pods"} 1.0' in text
    assert 'llm_hpa_adapter_unknown_metric_requests_total{metric="typo_metric",resource="pods"} 1.0' in text
