"""Which connections get the front-proxy pool (``Authenticator.is_front_proxy``): exactly those whose client
certificate could vouch for ``X-Remote-*`` headers, never a client-CA user's, another CN's or an expired one."""

from __future__ import annotations

import datetime as dt

from cryptography.hazmat.primitives.serialization import Encoding

from adapter.auth.authn import Authenticator, RequestHeaderConfig
from adapter.certs import make_ca, make_client_cert


def _der(pair) -> bytes:  # type: ignore[no-untyped-def]
    return bytes(pair.cert.public_bytes(Encoding.DER))


def test_only_a_valid_front_proxy_certificate_gets_the_pool() -> None:
    fp_ca, client_ca = make_ca("front-proxy-ca"), make_ca("client-ca")
    auth = Authenticator(
        request_header=RequestHeaderConfig(client_cas=[fp_ca.cert], allowed_names=("front-proxy-client",)),
        client_cas=[client_ca.cert],
    )
    assert auth.is_front_proxy(_der(make_client_cert(fp_ca, "front-proxy-client")))
    assert not auth.is_front_proxy(_der(make_client_cert(fp_ca, "someone-else")))  # CN not allowed
    assert not auth.is_front_proxy(_der(make_client_cert(client_ca, "front-proxy-client")))  # the other CA
    old = dt.datetime.now(dt.UTC) - dt.timedelta(days=30)
    assert not auth.is_front_proxy(_der(make_client_cert(fp_ca, "front-proxy-client", days=1, now=old)))
    assert not auth.is_front_proxy(b"not a certificate")
    assert not Authenticator(client_cas=[client_ca.cert]).is_front_proxy(_der(make_client_cert(fp_ca, "x")))
    any_cn = Authenticator(request_header=RequestHeaderConfig(client_cas=[fp_ca.cert]))  # no allowed names: any CN
    assert any_cn.is_front_proxy(_der(make_client_cert(fp_ca, "someone-else")))
