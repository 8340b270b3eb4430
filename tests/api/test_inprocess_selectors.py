"""Selector parsing at the HTTP edge, in-process: ``labelSelector`` and ``metricLabelSelector`` arrive
percent-encoded, are parsed once (``adapter/labels.py``, the ``labels.Parse`` syntax) and reach the provider as
``Selector`` values; malformed ones are a 400 naming the parameter, the text and the parser's reason, and never
reach the provider. The parser itself is tested against upstream cases in ``test_selectors.py``. Runs without
binaries.
"""

from __future__ import annotations

import httpx
import pytest

from adapter.api.params import MAX_SELECTOR_CHARS
from adapter.labels import EVERYTHING, Selector
from tests.support.api_table import NS
from tests.support.provider_double import ProviderDouble

pytestmark = pytest.mark.anyio
PODS_URL = f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/{NS}/pods/*/gpu_utilization_p90"


def selectors_asked(provider: ProviderDouble) -> list[tuple[str, str]]:
    """(labelSelector, metricLabelSelector) of each list call, as the parsed selectors print (String())."""
    return [(str(args[1]), str(args[3])) for kind, args in provider.calls if kind == "by_selector"]


@pytest.mark.parametrize(
    ("text", "canonical", "pods"),
    [
        ("app=llama", "app=llama", ["llama-0", "llama-1"]),
        ("app==llama", "app=llama", ["llama-0", "llama-1"]),
        ("app in (other,llama),tier!=serve", "app in (llama,other),tier!=serve", ["llama-1", "other-0"]),
        ("tier", "tier", ["llama-0", "llama-1"]),
        ("!tier", "!tier", ["other-0"]),
        ("app notin (llama)", "app notin (llama)", ["other-0"]),
        (" app = llama , tier in ( canary ) ", "app=llama,tier in (canary)", ["llama-1"]),
    ],
)
async def test_label_selector_is_parsed_and_passed_on(
    client: httpx.AsyncClient, provider: ProviderDouble, text: str, canonical: str, pods: list[str]
) -> None:
    r = await client.get(PODS_URL, params={"labelSelector": text})
    assert r.status_code == 200, r.text
    assert [i["describedObject"]["name"] for i in r.json()["items"]] == pods
    assert selectors_asked(provider) == [(canonical, "")]


@pytest.mark.parametrize("query", ["", "?labelSelector=", "?labelSelector=&metricLabelSelector="])
async def test_absent_or_empty_selectors_select_everything(
    client: httpx.AsyncClient, provider: ProviderDouble, query: str
) -> None:
    r = await client.get(PODS_URL + query)
    assert [i["describedObject"]["name"] for i in r.json()["items"]] == ["llama-0", "llama-1", "other-0"]
    ((_, (_, selector, _, metric_selector)),) = provider.calls
    assert selector is EVERYTHING and metric_selector is EVERYTHING


async def test_percent_encoding_is_decoded_once(client: httpx.AsyncClient, provider: ProviderDouble) -> None:
    # As kubectl and client-go send it: '=' as %3D, ',' as %2C, spaces as %20 or '+'.
    r = await client.get(
        PODS_URL + "?labelSelector=app%3Dllama%2Ctier+in+%28canary%29&metricLabelSelector=gpu%20notin%20(7)"
    )
    assert r.status_code == 200, r.text
    assert selectors_asked(provider) == [("app=llama,tier in (canary)", "gpu notin (7)")]


async def test_metric_label_selector_reaches_both_provider_calls(
    client: httpx.AsyncClient, provider: ProviderDouble
) -> None:
    await client.get(PODS_URL, params={"metricLabelSelector": "gpu in (0,1)"})
    await client.get(PODS_URL.replace("/*/", "/llama-0/"), params={"metricLabelSelector": "gpu in (0,1)"})
    by_selector, by_name = provider.calls
    assert isinstance(by_selector[1][3], Selector) and str(by_selector[1][3]) == "gpu in (0,1)"
    assert isinstance(by_name[1][2], Selector) and str(by_name[1][2]) == "gpu in (0,1)"


# Messages are kubectl v1.32's for the same text (apimachinery selector.go), as test_selectors.py pins them.
@pytest.mark.parametrize(
    ("param", "text", "reason"),
    [
        ("labelSelector", "x==a==b", "found '==', expected: ',' or 'end of string'"),
        ("labelSelector", "a,", "found '', expected: identifier after ','"),
        ("labelSelector", "(", "found '(', expected: !, identifier, or 'end of string'"),
        ("labelSelector", "a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("labelSelector", "a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("metricLabelSelector", "a notin", "unable to parse requirement: found '' expected: '('"),
        ("metricLabelSelector", "!x=a", "found '=', expected: ',' or 'end of string'"),
    ],
)
async def test_malformed_selectors_are_400_and_never_reach_the_provider(
    client: httpx.AsyncClient, provider: ProviderDouble, param: str, text: str, reason: str
) -> None:
    r = await client.get(PODS_URL, params={param: text})
    assert r.status_code == 400
    doc = r.json()
    assert (doc["kind"], doc["reason"], doc["code"]) == ("Status", "BadRequest", 400)
    assert doc["message"] == f"invalid {param} {text!r}: {reason}"
    assert provider.calls == []


def valid_selector(length: int) -> str:
    """A valid selector of exactly ``length`` characters: ``k00000=vvvvvvvv,k00001=...`` with a longer last value."""
    clauses = [f"k{i:05d}=vvvvvvvv" for i in range(length // 16)]
    text = ",".join(clauses)
    return text[:-1] + "v" * (length - len(text) + 1)


@pytest.mark.parametrize("param", ["labelSelector", "metricLabelSelector"])
async def test_overlong_selector_is_400_without_echoing_it(
    client: httpx.AsyncClient, provider: ProviderDouble, param: str
) -> None:
    at_limit = valid_selector(MAX_SELECTOR_CHARS)
    assert len(at_limit) == MAX_SELECTOR_CHARS
    r = await client.get(PODS_URL, params={param: at_limit})
    assert r.status_code == 200, r.text[:200]
    provider.calls.clear()
    r = await client.get(PODS_URL, params={param: at_limit + "v"})
    assert r.status_code == 400
    assert r.json()["message"] == f"invalid {param}: longer than {MAX_SELECTOR_CHARS} characters"
    assert provider.calls == []
