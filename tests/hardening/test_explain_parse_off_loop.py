"""Issue 26 row 8: ``POST /explain`` parsed its YAML body on the event loop.

``yaml.safe_load`` of a 2.8 MB body (under the 3 MiB body bound) ran for 66-69 s on the event loop, and the
HPA controller's requests and ``/livez`` waited as long (long enough for the liveness probe to kill the
pod). Against the real adapter process over TLS (values from a real Prometheus): while such a body is being
parsed, in a child process of the adapter, the front-proxied HPA controller gets its own values and
``/livez`` answers; the body gets a 400 Status, never a 500; an alias bomb is refused the same way.
"""

from __future__ import annotations

import threading
import time

import httpx

from tests.hardening.conftest import SecureAdapter
from tests.hardening.victim_support import Victim, front_proxy_args
from tests.support.procs import children

EXPLAIN = "/explain?namespace=a&metric=llm_composite_load&selector=app%3Dweb"
# A flat list of 1.4 million items: libyaml itself needs seconds to build it (pure-Python PyYAML a minute).
SLOW_BODY = b"apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nspec: [" + b"1," * 1_400_000 + b"1]\n"
ALIAS_BOMB = b"a: &a [x,x,x,x,x,x,x,x,x]\n" + b"".join(
    b"%s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n" % ((chr(98 + i).encode(),) * 2 + (chr(97 + i).encode(),) * 9)
    for i in range(9)
)


def _post(adapter: SecureAdapter, pki, body: bytes, answers: list[httpx.Response]) -> None:  # type: ignore[no-untyped-def]
    with httpx.Client(verify=pki.context(pki.admin), timeout=120) as client:
        answers.append(client.post(adapter.url + EXPLAIN, content=body, headers={"Content-Type": "application/yaml"}))


def test_a_slow_manifest_parses_off_the_event_loop(secure_adapter, pki, kube, prometheus) -> None:
    policy, kubeconfig = kube
    victim = Victim.load(prometheus)
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig))
    victim.assert_served(adapter, pki)
    assert len(SLOW_BODY) < 3 * 1024 * 1024
    answers: list[httpx.Response] = []
    poster = threading.Thread(target=_post, args=(adapter, pki, SLOW_BODY, answers))
    poster.start()
    try:
        deadline = time.monotonic() + 60
        while not children(adapter.pid):  # the body has arrived and its parse has started, off the loop
            assert not answers, f"answered without a parser process (parsed on the event loop): {answers[0].text[:200]}"
            assert time.monotonic() < deadline, "no parser process was started for the manifest"
            time.sleep(0.02)
        served_during_parse = 0
        for _ in range(20):  # bounded by count; each is answered while the parse goes on
            if answers:
                break
            victim.assert_served(adapter, pki)
            assert adapter.get("/livez", timeout=30).status_code == 200
            served_during_parse += 1 if not answers else 0
        assert served_during_parse >= 1, "the parse ended before the HPA controller's request could be made"
    finally:
        poster.join(120)
    assert len(answers) == 1
    r = answers[0]
    assert r.status_code == 400 and r.json()["kind"] == "Status", (r.status_code, r.text[:300])
    assert not children(adapter.pid)  # the parser was stopped, not left running
    victim.assert_served(adapter, pki)


def test_an_alias_bomb_is_refused_without_blowing_up_the_adapter(secure_adapter, pki, kube, prometheus) -> None:
    policy, kubeconfig = kube
    victim = Victim.load(prometheus)
    adapter = secure_adapter(*front_proxy_args(pki, kubeconfig))
    rss_before = adapter.status_kib("VmRSS")
    answers: list[httpx.Response] = []
    _post(adapter, pki, ALIAS_BOMB, answers)
    r = answers[0]
    assert r.status_code == 400 and r.json()["reason"] == "BadRequest", (r.status_code, r.text[:300])
    # 9^10 leaves were never expanded in the adapter: its memory grew by less than 100 MB
    assert adapter.status_kib("VmRSS") - rss_before < 100 * 1024
    victim.assert_served(adapter, pki)
