"""Tests for adapter.quantity against the protocol reference §2 (apimachinery resource.Quantity).

Vectors come from ../shared/reference/k8s-metrics-protocol.md §2.1-§2.3, which quotes
kubernetes/apimachinery pkg/api/resource/quantity_test.go and results of running that package. Property tests
use ``fractions.Fraction`` as an independent exact oracle.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from adapter.quantity import _parse, canonicalize, format_quantity, milli_value, parse_quantity

# (input, exact value, canonical of a fresh Quantity, remembered format, MilliValue or None for "—")
VECTORS: list[tuple[str, str, str, str, int | None]] = [
    ("0", "0", "0", "DecimalSI", 0),
    ("1", "1", "1", "DecimalSI", 1000),
    ("1.5", "1.5", "1500m", "DecimalSI", 1500),
    ("0.1", "0.1", "100m", "DecimalSI", 100),
    ("0.001", "0.001", "1m", "DecimalSI", 1),
    ("0.1m", "0.0001", "100u", "DecimalSI", 1),
    ("10.5", "10.5", "10500m", "DecimalSI", 10500),
    ("100m", "0.1", "100m", "DecimalSI", 100),
    ("1000m", "1", "1", "DecimalSI", 1000),
    ("1.08", "1.08", "1080m", "DecimalSI", 1080),
    ("1000", "1000", "1k", "DecimalSI", 1000000),
    ("1000M", "1000000000", "1G", "DecimalSI", 1000000000000),
    ("5000k", "5000000", "5M", "DecimalSI", 5000000000),
    ("3e3", "3000", "3e3", "DecimalExponent", 3000000),
    ("1E3", "1000", "1e3", "DecimalExponent", 1000000),
    ("1.2e3", "1200", "1200", "DecimalExponent", 1200000),
    ("5e-1", "0.5", "500e-3", "DecimalExponent", 500),
    ("1.5e-3", "0.0015", "1500e-6", "DecimalExponent", 2),
    ("0.001e0", "0.001", "1e-3", "DecimalExponent", 1),
    ("1000e-12", "0.000000001", "1e-9", "DecimalExponent", 1),
    ("1024", "1024", "1024", "DecimalSI", 1024000),
    ("1Ki", "1024", "1Ki", "BinarySI", 1024000),
    ("1024Mi", "1073741824", "1Gi", "BinarySI", 1073741824000),
    ("1.5Gi", "1610612736", "1536Mi", "BinarySI", 1610612736000),
    ("307200Ki", "314572800", "300Mi", "BinarySI", 314572800000),
    ("0.5Ki", "512", "512", "BinarySI", 512000),
    ("1.1Ki", "1126.4", "1126400m", "BinarySI", 1126400),
    (".001Ki", "1.024", "1024m", "BinarySI", 1024),
    (".000000000001Ki", "0.000000002", "2n", "DecimalSI", 1),
    ("100.035k", "100035", "100035", "DecimalSI", 100035000),
    ("10.035M", "10035000", "10035k", "DecimalSI", 10035000000),
    ("3.001n", "0.000000004", "4n", "DecimalSI", 1),
    ("0.00000012345", "0.000000124", "124n", "DecimalSI", 1),
    ("0.5e-9", "0.000000001", "1e-9", "DecimalExponent", 1),
    ("9Ei", "9223372036854775807", "9223372036854775807", "BinarySI", None),
    ("12E", "12000000000000000000", "12E", "DecimalSI", None),
    ("1000000000000000000", "1000000000000000000", "1E", "DecimalSI", None),
    ("10000000000000000000000m", "10000000000000000000", "10E", "DecimalSI", None),
    ("999999999999999999.1", "999999999999999999.1", "999999999999999999100m", "DecimalSI", None),
    ("+1", "1", "1", "DecimalSI", 1000),
    ("01", "1", "1", "DecimalSI", 1000),
    ("5.", "5", "5", "DecimalSI", 5000),
    ("-0.0000000001", "-0.000000001", "-1n", "DecimalSI", None),
]

# §2.1: quantity_test.go TestQuantityParse invalid list plus the reference's extras.
INVALID = [
    "",
    "1.1.M",
    "1+1.0M",
    "0.1mi",
    "0.1am",
    "aoeu",
    ".5i",
    "1i",
    "-3.01i",
    "-3.01e-",
    " 1",
    "1 ",
    "1e",
    "1e-",
    "1e+",
    "1Ki1",
    "1E3k",
    "Inf",
    "NaN",
    "0x10",
    "1_000",
    "1.2.3",
    "\uff11",  # FULLWIDTH DIGIT ONE
    "1\uff10",
    # Beyond the reference list: a trailing newline must not slip through a "$" anchor, and suffixes are
    # case-sensitive (suffix.go has "k" and "Ki" but no "K").
    "1\n",
    "1K",
    "1ki",
    "-Inf",
    "+NaN",
]


@pytest.mark.parametrize(("text", "value", "canonical", "fmt", "milli"), VECTORS)
def test_reference_vectors(text: str, value: str, canonical: str, fmt: str, milli: int | None) -> None:
    parsed = parse_quantity(text)
    assert parsed == Decimal(value)
    assert canonicalize(text) == canonical
    assert _parse(text).format.value == fmt
    if milli is None:
        return
    assert milli_value(parsed) == milli


@pytest.mark.parametrize(("text", "value", "canonical", "fmt", "milli"), VECTORS)
def test_canonical_string_parses_back_to_the_same_quantity(
    text: str, value: str, canonical: str, fmt: str, milli: int | None
) -> None:
    assert parse_quantity(canonical) == parse_quantity(text)
    assert canonicalize(canonical) == canonical


@pytest.mark.parametrize("text", ["12E", "1000000000000000000", "10000000000000000000000m"])
def test_milli_value_beyond_int64_raises(text: str) -> None:
    with pytest.raises(ValueError, match="overflows int64"):
        milli_value(parse_quantity(text))


@pytest.mark.parametrize("text", INVALID)
def test_invalid_inputs_are_rejected_naming_the_input(text: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_quantity(text)
    assert repr(text) in str(info.value)
    with pytest.raises(ValueError):
        canonicalize(text)


@pytest.mark.parametrize("text", [".", "-.", "+", "-", "e3"])
def test_upstream_quirks_parse_as_zero(text: str) -> None:
    assert parse_quantity(text) == 0
    assert canonicalize(text) == "0"
    assert not parse_quantity(text).is_signed()


def test_e3_quirk_remembers_decimal_exponent() -> None:
    assert _parse("e3").format.value == "DecimalExponent"


# Derived from quantity.go's control flow rather than quoted vectors: a number part without digits is
# read as 0 only on ParseQuantity's int64 fast path (scale >= -9; for BinarySI, enough "precision", which
# Pi and Ei lack); on the inf.Dec path SetString finds no digit and the parse fails with ErrNumeric.
@pytest.mark.parametrize("text", ["m", "n", "-Ki", ".Ti", "e-9", "-.E"])
def test_digitless_numbers_on_the_fast_path_are_zero(text: str) -> None:
    assert parse_quantity(text) == 0


@pytest.mark.parametrize("text", ["e-10", ".e-10", "-e-12", "Pi", ".Ei", "-Pi"])
def test_digitless_numbers_off_the_fast_path_are_rejected(text: str) -> None:
    with pytest.raises(ValueError, match="no digits"):
        parse_quantity(text)


def test_zero_with_a_digit_is_fine_where_digitless_is_not() -> None:
    assert parse_quantity("0e-10") == 0
    assert parse_quantity("0Pi") == 0


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1.1E-9", "2e-9"),  # §2.1 rounding example
        ("-3.001n", "-4n"),  # rounding is away from zero for negatives
        ("9223372036854775807Ki", "9223372036854775807"),  # §2.1 BinarySI cap
        ("-9Ei", "-9223372036854775807"),
        ("-1Ki", "-1Ki"),  # |x| >= 1024 stays binary
        ("-1023", "-1023"),
        ("7Ei", "7Ei"),  # largest whole Ei under the cap
        ("1.G", "1G"),  # §2.2 item 5: "1.G" is accepted
        ("1e+3", "1e3"),
        ("0.0000000000000000000001", "1n"),
        ("1e-2147483648", "1e-9"),  # int32 minimum exponent, evaluated exactly
        ("1e2147483647", "10e2147483646"),  # exponent lowered to a multiple of 3
        ("0Ki", "0"),
        ("-0", "0"),
    ],
)
def test_more_canonical_forms(text: str, canonical: str) -> None:
    assert canonicalize(text) == canonical


def test_exponent_outside_int32_is_rejected() -> None:
    for text in ["1e2147483648", "1e-2147483649", "1e" + "9" * 5000]:
        with pytest.raises(ValueError, match="int32"):
            parse_quantity(text)


def test_long_mantissa_is_exact() -> None:
    digits = "1" * 5000  # longer than Python's default int-from-str limit
    assert parse_quantity(digits) == Decimal(digits)
    assert canonicalize(digits + ".5") == digits + "500m"


def test_non_str_input_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_quantity(1)  # type: ignore[arg-type]


# §2.3 constructor examples (quantity_constructor_vectors.json). NewMilliQuantity(v, DecimalSI) is v/1000.
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (Decimal(1).scaleb(-3), "1m"),  # NewMilliQuantity(1, DecimalSI)
        (Decimal(1000).scaleb(-3), "1"),  # NewMilliQuantity(1000, DecimalSI)
        (Decimal(1234000).scaleb(-3), "1234"),  # NewMilliQuantity(1234000, DecimalSI)
        (1000, "1k"),  # NewQuantity(1000, DecimalSI)
        (Decimal(108).scaleb(-2), "1080m"),  # mantissa 108 x 10^-2
        (Decimal(1234567).scaleb(6), "1234567M"),  # mantissa 1234567 x 10^6
        (Decimal(-901).scaleb(-2), "-9010m"),  # mantissa -901 x 10^-2
    ],
)
def test_constructor_examples_decimal_si(value: Decimal | int, expected: str) -> None:
    assert format_quantity(value) == expected


def test_constructor_examples_binary_and_exponent_via_canonicalize() -> None:
    # NewMilliQuantity(1024, BinarySI) = 1.024 -> "1024m"; NewMilliQuantity(1048576, BinarySI) = 1048.576 ->
    # "1048576m" (a non-integer BinarySI is written as DecimalSI); NewQuantity(1024, BinarySI) -> "1Ki";
    # 80 x 10^-3 DecimalExponent -> "80e-3".
    assert canonicalize("1.024") == "1024m"
    assert canonicalize("1.024Ki") == "1048576m"
    assert canonicalize("1Ki") == "1Ki"
    assert canonicalize("80e-3") == "80e-3"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (0.1, "100m"),  # repr-exact: one tenth, not the binary float's expansion
        (0.5, "500m"),
        (1.08, "1080m"),
        (-0.0, "0"),
        (1e21, "1000E"),  # §2.2 item 6: Go would print "1"
        (Decimal("1000000000000000000000"), "1000E"),
        (Decimal("1.5e21"), "1500E"),
        (Decimal("1e18"), "1E"),
        (5e-324, "1n"),  # rounded up to 1n, never to 0
        (-5e-324, "-1n"),
        (Decimal("0.00000012345"), "124n"),
        ("0.42", "420m"),
        ("1e+21", "1000E"),
        ("-.5", "-500m"),
        ("7.", "7"),
        (Decimal("1.50"), "1500m"),
        (2**70, "1180591620717411303424"),
    ],
)
def test_format_quantity(value: Decimal | int | float | str, expected: str) -> None:
    assert format_quantity(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        float("nan"),
        float("inf"),
        float("-inf"),
        Decimal("NaN"),
        Decimal("sNaN"),
        Decimal("Infinity"),
        Decimal("-Infinity"),
        "NaN",
        "+Inf",
        "-Inf",
        "inf",
    ],
)
def test_format_quantity_rejects_non_finite(value: Decimal | float | str) -> None:
    with pytest.raises(ValueError, match="non-finite"):
        format_quantity(value)


@pytest.mark.parametrize("value", ["", " 1", "1 ", "1_000", "1.5Gi", "100m", "0x10", "1e", "\uff11"])
def test_format_quantity_rejects_text_that_is_not_a_plain_number(value: str) -> None:
    with pytest.raises(ValueError):
        format_quantity(value)


def test_format_quantity_rejects_absurd_magnitudes() -> None:
    with pytest.raises(ValueError, match="too large"):
        format_quantity(Decimal("1e1001"))
    with pytest.raises(ValueError):
        format_quantity("1e999999999999999999999")
    assert format_quantity(Decimal("1e1000")).endswith("E")


@pytest.mark.parametrize("value", [True, None, [1], Fraction(1, 2)])
def test_format_quantity_rejects_other_types(value: object) -> None:
    with pytest.raises(TypeError):
        format_quantity(value)  # type: ignore[arg-type]


def test_milli_value_examples() -> None:
    assert milli_value(Decimal("0.0001")) == 1  # §2.2 item 7: 100u is 1 milli to the HPA
    assert milli_value(Decimal("0")) == 0
    assert milli_value(Decimal("-1.5")) == -1500
    assert milli_value(Decimal("-0.0015")) == -1  # ceiling: toward +inf
    assert milli_value(Decimal("9223372036854775.807")) == 2**63 - 1
    with pytest.raises(ValueError, match="overflows int64"):
        milli_value(Decimal("9223372036854775.808"))
    with pytest.raises(ValueError, match="overflows int64"):
        milli_value(Decimal("1e2147483647"))
    assert milli_value(Decimal("1e-2147483648")) == 1


def test_milli_value_rejects_non_finite_and_non_decimal() -> None:
    with pytest.raises(ValueError):
        milli_value(Decimal("NaN"))
    with pytest.raises(ValueError):
        milli_value(Decimal("Infinity"))
    with pytest.raises(TypeError):
        milli_value(0.5)  # type: ignore[arg-type]


# ---- properties ---------------------------------------------------------------------------------------

_DECIMAL_SI_RE = re.compile(r"0|-?[1-9][0-9]*[numkMGTPE]?")
_NANO = Fraction(1, 10**9)


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Oracle: magnitude rounded up to a multiple of 1e-9, sign kept."""
    magnitude = math.ceil(abs(value) / _NANO) * _NANO
    return magnitude if value >= 0 else -magnitude


_decimals = st.decimals(allow_nan=False, allow_infinity=False, min_value=Decimal("-1e30"), max_value=Decimal("1e30"))
_small_decimals = st.decimals(
    allow_nan=False, allow_infinity=False, min_value=Decimal("-1e-6"), max_value=Decimal("1e-6")
)


@given(st.one_of(_decimals, _small_decimals))
@example(Decimal("1e21"))
@example(Decimal("-0.0000000001"))
@example(Decimal("123.0000000001"))
def test_format_round_trip(value: Decimal) -> None:
    text = format_quantity(value)
    assert _DECIMAL_SI_RE.fullmatch(text), text
    parsed = parse_quantity(text)
    assert Fraction(parsed) == _round_up_to_nano(Fraction(value))
    assert format_quantity(parsed) == text
    assert canonicalize(text) == text


@given(st.one_of(_decimals, _small_decimals))
def test_format_is_minimal(value: Decimal) -> None:
    # Every factor of 1000 is absorbed by the suffix unless the suffix is already the largest (E).
    text = format_quantity(value).lstrip("-")
    mantissa = text.rstrip("numkMGTPE")
    if text != "0" and not text.endswith("E"):
        assert not mantissa.endswith("000"), text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_is_formatted_at_its_repr(value: float) -> None:
    assert format_quantity(value) == format_quantity(Decimal(repr(value)))


@given(st.one_of(_decimals, _small_decimals))
def test_milli_value_is_ceiling_of_thousandfold(value: Decimal) -> None:
    expected = math.ceil(_round_up_to_nano(Fraction(value)) * 1000)
    if -(2**63) <= expected < 2**63:
        assert milli_value(value) == expected
    else:
        with pytest.raises(ValueError):
            milli_value(value)


_SUFFIX_VALUES: dict[str, Fraction] = {
    **{s: Fraction(10) ** e for s, e in [("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3), ("M", 6)]},
    **{s: Fraction(10) ** e for s, e in [("G", 9), ("T", 12), ("P", 15), ("E", 18)]},
    **{s: Fraction(2) ** (10 * (i + 1)) for i, s in enumerate(["Ki", "Mi", "Gi", "Ti", "Pi", "Ei"])},
}


@st.composite
def _quantity_texts(draw: st.DrawFn) -> tuple[str, Fraction, bool]:
    """A grammatical quantity with at least one digit, its unrounded value and whether it is BinarySI."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    num = draw(st.text("0123456789", max_size=25))
    frac = draw(st.none() | st.text("0123456789", max_size=25))
    if not num and not frac:
        num = "0"
    number = f"{num}.{frac}" if frac is not None else num
    magnitude = Fraction(Decimal(f"{num or '0'}.{frac or ''}"))
    if draw(st.booleans()):
        suffix = draw(st.sampled_from(sorted(_SUFFIX_VALUES)))
        scale, binary = _SUFFIX_VALUES[suffix], suffix.endswith("i")
    else:
        exponent = draw(st.integers(-40, 40))
        letter = draw(st.sampled_from(["e", "E"]))
        plus = "+" if exponent >= 0 and draw(st.booleans()) else ""
        suffix, scale, binary = f"{letter}{plus}{exponent}", Fraction(10) ** exponent, False
    value = magnitude * scale
    return sign + number + suffix, -value if sign == "-" else value, binary


@given(_quantity_texts())
def test_parse_matches_exact_oracle(case: tuple[str, Fraction, bool]) -> None:
    text, exact, binary = case
    expected = _round_up_to_nano(exact)
    if binary and abs(expected) > 2**63 - 1:
        expected = Fraction(2**63 - 1) * (1 if expected > 0 else -1)
    assert Fraction(parse_quantity(text)) == expected


@given(_quantity_texts())
def test_canonicalize_is_idempotent_and_value_preserving(case: tuple[str, Fraction, bool]) -> None:
    text = case[0]
    canonical = canonicalize(text)
    assert canonicalize(canonical) == canonical
    assert parse_quantity(canonical) == parse_quantity(text)
    assert " " not in canonical and "." not in canonical
