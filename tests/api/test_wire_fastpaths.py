"""The request-path fast paths give exactly what the general code gives."""

from __future__ import annotations

import urllib.parse
from decimal import ROUND_HALF_UP, Decimal

from hypothesis import given
from hypothesis import strategies as st

from adapter.api.quantity import format_quantity
from adapter.api.wire import quantity
from adapter.query.client import form_encode


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e20, max_value=1e20))
def test_quantity_fast_path_equals_format_quantity(x: float) -> None:
    want = format_quantity(Decimal(repr(x)).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP))
    assert quantity(x) == want


def test_quantity_examples() -> None:
    assert [quantity(v) for v in (0.0, 1.0, 0.5, 1000.0, 38.8, 1.2345, 0.0004, -2.5, 2e18, 1e21)] == [
        "0", "1", "500m", "1k", "38800m", "1235m", "0", "-2500m", "2E", "1000E"]


@given(st.dictionaries(st.text(), st.text(), max_size=4))
def test_form_encode_equals_urlencode(form: dict[str, str]) -> None:
    assert form_encode(form) == urllib.parse.urlencode(form).encode("ascii")
