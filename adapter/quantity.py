"""Kubernetes ``resource.Quantity`` in exact decimals: parse like the apiserver, write like fresh Go does.

Upstream: kubernetes/apimachinery ``pkg/api/resource/quantity.go`` (``ParseQuantity``, ``CanonicalizeBytes``),
``amount.go``, ``suffix.go``, ``math.go``; summarized with vectors in the project's protocol reference §2.
Everything is ``decimal.Decimal``: a float cannot hold ``0.1`` and would leak binary noise into the wire
value the HPA reads.

Deliberate deviations from Go, each where Go would silently produce a wrong number:
* an ``e``/``E`` exponent outside int32 is rejected (Go truncates it to int32 and gets another value);
* DecimalSI values of 1e21 and above are written with the ``E`` suffix and a longer mantissa (``1000E``),
  where Go writes no suffix at all (``"1"``);
* ``milli_value`` raises instead of overflowing int64.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from decimal import (
    MAX_EMAX,
    MAX_PREC,
    MIN_EMIN,
    ROUND_CEILING,
    ROUND_HALF_UP,
    ROUND_UP,
    Context,
    Decimal,
    DivisionByZero,
    Inexact,
    InvalidOperation,
    Overflow,
)

__all__ = ["canonicalize", "format_quantity", "milli_value", "parse_quantity"]


class _Format(enum.Enum):
    """The serialization format a Go Quantity remembers from its input (``resource.Format``)."""

    DECIMAL_SI = "DecimalSI"
    BINARY_SI = "BinarySI"
    DECIMAL_EXPONENT = "DecimalExponent"


@dataclass(frozen=True, slots=True)
class _Parsed:
    """A parsed quantity: its exact (rounded, capped) value and the format it will be written in."""

    value: Decimal
    format: _Format


# suffix.go: decimal table, then binary table, then "e"/"E" + integer exponent.
_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIX_BY_EXPONENT: dict[int, str] = {exp: sfx for sfx, exp in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIX_BY_POWER: tuple[str, ...] = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_LARGEST_DECIMAL_SI_EXPONENT = 18
_SMALLEST_EXPONENT = -9

# The scanner of quantity.go's parseQuantityString as one regular expression: a sign, digits, an optional
# "." with digits, then suffix letters from a fixed set, an optional sign and digits reaching the end.
# Possessive quantifiers forbid backtracking, so the split is the one the left-to-right Go scanner makes.
# [0-9] (not \d) and fullmatch: no Unicode digits and no "$ before a trailing newline".
_QUANTITY_RE = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]*+)(?:\.(?P<frac>[0-9]*+))?+(?P<suffix>[eEinumkKMGTP]*+[+-]?[0-9]*+)",
    re.ASCII,
)
# strconv.ParseInt's grammar for the exponent of an "e"/"E" suffix.
_EXPONENT_RE = re.compile(r"[+-]?[0-9]+", re.ASCII)
# What format_quantity accepts as text: a plain decimal number, as Prometheus and JSON write samples.
_PLAIN_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?", re.ASCII)
_NON_FINITE_RE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.ASCII | re.IGNORECASE)

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_NANO = Decimal("1e-9")
# quantity.go caps BinarySI magnitudes at maxAllowed = 2^63-1 (DecimalSI/DecimalExponent are not capped).
_MAX_BINARY = Decimal(_INT64_MAX)
# Bounds the mantissa format_quantity writes (value / 1e18 digits): far above float64's 1.8e308 and
# anything the HPA can hold, yet small enough that a hostile Decimal cannot make us build a huge string.
_MAX_FORMAT_ADJUSTED_EXPONENT = 1000

# Contexts for exact arithmetic: the default context rounds to 28 digits, which would corrupt long values.
_EXACT = Context(
    prec=MAX_PREC,
    Emax=MAX_EMAX,
    Emin=MIN_EMIN,
    traps=[InvalidOperation, DivisionByZero, Overflow, Inexact],
)
_ROUNDING_UP = Context(
    prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, rounding=ROUND_UP, traps=[InvalidOperation, Overflow]
)


def parse_quantity(text: str) -> Decimal:
    """Parse ``text`` exactly as Kubernetes ``resource.ParseQuantity`` does and return its value.

    Accepts the Quantity grammar (sign, digits, optional fraction, suffix ``n u m k M G T P E``,
    ``Ki … Ei`` or ``e<int>``/``E<int>``) including upstream's quirks (``"."``, ``"-."``, ``"+"``, ``"-"``,
    ``"e3"`` are 0). A non-zero magnitude is rounded up (away from zero) to a multiple of 1e-9; BinarySI
    magnitudes are capped at 2^63-1. Raises ``ValueError`` naming ``text`` on anything upstream rejects
    (empty, whitespace, unknown suffix, ``NaN``/``Inf``, …) and on exponents outside int32.
    """
    return _parse(text).value


def canonicalize(text: str) -> str:
    """Parse ``text`` and return the canonical string a freshly built Go Quantity of it serializes to.

    The format of the input is kept (``3e3`` → ``3e3``, ``1.5Gi`` → ``1536Mi``, ``5e-1`` → ``500e-3``);
    BinarySI values that are not integers or are below 1024 in magnitude are written as DecimalSI.
    Unlike Go, it never echoes the input verbatim (``+1`` → ``1``). Raises ``ValueError`` like
    ``parse_quantity``.
    """
    parsed = _parse(text)
    return _render(parsed.value, parsed.format)


def format_quantity(value: Decimal | int | float | str) -> str:
    """Serialize ``value`` as the canonical DecimalSI Quantity string (``1500m``, ``1k``, ``124n``, ``0``).

    The value is first rounded up (away from zero) to a multiple of 1e-9 as upstream does on parse, so
    ``parse_quantity(format_quantity(x))`` is that rounded value. The mantissa is always an integer.
    Values of 1e21 and more keep the ``E`` suffix with a longer mantissa (``1000E``). Floats are taken
    at their shortest repr (``0.1`` is one tenth); a ``str`` must be a plain decimal number such as
    ``"0.42"`` or ``"1e+21"`` (not a Quantity). Raises ``ValueError`` for NaN, infinities, malformed
    text or magnitudes of 1e1001 and above; ``TypeError`` for other types (``bool`` included).
    """
    number = _to_decimal(value)
    rounded = _round_up_to_nano(number)
    if not rounded.is_zero() and rounded.adjusted() > _MAX_FORMAT_ADJUSTED_EXPONENT:
        raise ValueError(f"cannot format quantity {value!r}: magnitude too large")
    return _render(rounded, _Format.DECIMAL_SI)


def milli_value(value: Decimal) -> int:
    """Return what Go's ``Quantity.MilliValue()`` gives the HPA for ``value``: ``ceil(value * 1000)``.

    ``value`` is first taken as the Quantity the HPA would receive (magnitude rounded up to 1e-9); the
    ceiling rounds toward +inf for negative values too. Raises ``ValueError`` for NaN/infinity and when
    the result does not fit an int64 (where Go would silently overflow), ``TypeError`` for non-Decimals.
    """
    if not isinstance(value, Decimal):
        raise TypeError(f"milli_value needs a decimal.Decimal, got {type(value).__name__}")
    if not value.is_finite():
        raise ValueError(f"milli_value of non-finite {value!r}")
    rounded = _round_up_to_nano(value)
    if rounded.is_zero():
        return 0
    # Checked before scaling so an absurd exponent cannot make us build a giant integer.
    if rounded.adjusted() > 18:
        raise ValueError(f"milli value of {value!r} overflows int64")
    milli = int(rounded.scaleb(3, context=_EXACT).to_integral_value(rounding=ROUND_CEILING, context=_EXACT))
    if not _INT64_MIN <= milli <= _INT64_MAX:
        raise ValueError(f"milli value of {value!r} overflows int64")
    return milli


def _invalid(text: str, reason: str) -> ValueError:
    return ValueError(f"invalid quantity {text!r}: {reason}")


def _parse(text: str) -> _Parsed:
    """Parse like ``ParseQuantity``; the result's format is the one ``CanonicalizeBytes`` starts from."""
    if not isinstance(text, str):
        raise TypeError(f"quantity must be a str, got {type(text).__name__}")
    if not text:
        raise _invalid(text, "empty string")
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise _invalid(
            text, "expected [+-]<digits>[.<digits>]<suffix>, suffix one of n,u,m,k,M,G,T,P,E, Ki..Ei, e<int>"
        )
    num, frac, suffix = match["num"], match["frac"] or "", match["suffix"]
    base, exponent, fmt = _interpret_suffix(text, suffix)

    if not num and not frac and not _digitless_on_fast_path(fmt, exponent):
        # Upstream reads a digit-less number ("", ".", "-.") as 0 only on its int64 fast path; on the
        # big-decimal path inf.Dec.SetString finds no digit and ParseQuantity fails (ErrNumeric).
        raise _invalid(text, "no digits in the numeric part")

    magnitude = Decimal(f"{num or '0'}.{frac}")
    if base == 10:
        magnitude = magnitude.scaleb(exponent, context=_EXACT)
    else:
        magnitude = _EXACT.multiply(magnitude, Decimal(2**exponent))
    magnitude = _round_up_to_nano(magnitude)

    if fmt is _Format.BINARY_SI:
        magnitude = min(magnitude, _MAX_BINARY)
        if 0 < magnitude < 1:
            # quantity.go: a fractional BinarySI value would print as a rounded binary; keep it decimal.
            fmt = _Format.DECIMAL_SI
    if magnitude.is_zero():
        return _Parsed(Decimal(0), fmt)  # Go has no negative zero; never hand out Decimal("-0").
    value = magnitude.copy_negate() if match["sign"] == "-" else magnitude
    return _Parsed(value, fmt)


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, _Format]:
    """Return (base, exponent, format) of a suffix in suffix.go's lookup order, or raise ``ValueError``."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], _Format.DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], _Format.BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT_RE.fullmatch(suffix[1:]):
        digits = suffix[1:].lstrip("+-").lstrip("0")
        # Length check first: int() of thousands of digits is slow and capped by Python itself.
        exponent = int(suffix[1:]) if len(digits) <= 10 else _INT32_MAX + 1
        if not _INT32_MIN <= exponent <= _INT32_MAX:
            raise _invalid(text, "exponent out of int32 range")
        return 10, exponent, _Format.DECIMAL_EXPONENT
    raise _invalid(text, f"unknown suffix {suffix!r}")


def _digitless_on_fast_path(fmt: _Format, exponent: int) -> bool:
    """Whether quantity.go takes its int64 fast path for a number part without digits (counted as "0").

    Fast path: DecimalSI/DecimalExponent need scale >= -9 (precision 18 - 1 is always enough); BinarySI
    needs precision 15 - 1 - int(exponent*3/10) - 1 >= 0, which fails for Pi and Ei.
    """
    if fmt is _Format.BINARY_SI:
        return 13 - (exponent * 3) // 10 >= 0
    return exponent >= _SMALLEST_EXPONENT


def _round_up_to_nano(value: Decimal) -> Decimal:
    """Round a finite value away from zero to a multiple of 1e-9 (``amount.Round(Nano, inf.RoundUp)``)."""
    if value.is_zero():
        return Decimal(0)
    exponent = value.as_tuple().exponent
    if not isinstance(exponent, int):
        raise ValueError(f"non-finite value {value!r}")
    if exponent >= _SMALLEST_EXPONENT:
        return value
    if value.adjusted() < _SMALLEST_EXPONENT:
        # Every digit is below 1n: the answer is ±1n; quantize would work but walks the exponent gap.
        return _NANO.copy_sign(value)
    return value.quantize(_NANO, context=_ROUNDING_UP)


def _to_decimal(value: Decimal | int | float | str) -> Decimal:
    """Convert an input of ``format_quantity`` to a finite Decimal or raise ``ValueError``/``TypeError``."""
    if isinstance(value, bool):
        raise TypeError("cannot format a bool as a quantity")
    if isinstance(value, Decimal):
        number = value
    elif isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        # str() of a float is its shortest round-tripping repr: 0.1 stays one tenth.
        number = Decimal(str(value))
    elif isinstance(value, str):
        if _NON_FINITE_RE.fullmatch(value):
            raise ValueError(f"cannot format non-finite quantity {value!r}")
        if not _PLAIN_NUMBER_RE.fullmatch(value):
            raise ValueError(f"cannot format {value!r}: not a plain decimal number")
        try:
            number = Decimal(value)
        except InvalidOperation:  # exponents beyond what decimal can represent
            raise ValueError(f"cannot format {value!r}: exponent out of range") from None
    else:
        raise TypeError(f"cannot format a {type(value).__name__} as a quantity")
    if not number.is_finite():
        raise ValueError(f"cannot format non-finite quantity {value!r}")
    return number


def _render(value: Decimal, fmt: _Format) -> str:
    """``CanonicalizeBytes`` of a value already rounded to 1e-9, in ``fmt`` (BinarySI may fall back)."""
    if value.is_zero():
        return "0"
    if value.is_signed():
        return "-" + _render(value.copy_abs(), fmt)
    if fmt is _Format.BINARY_SI:
        if value >= 1024 and value.to_integral_value(context=_EXACT) == value:
            return _render_binary(int(value))
        fmt = _Format.DECIMAL_SI
    return _render_decimal(value, fmt)


def _render_binary(number: int) -> str:
    """Positive integer as ``<n><Ki..Ei>``, taking out as many whole factors of 1024 as exist."""
    power = 0
    while power < len(_BINARY_SUFFIX_BY_POWER) - 1 and number % 1024 == 0:
        number //= 1024
        power += 1
    return f"{number}{_BINARY_SUFFIX_BY_POWER[power]}"


def _render_decimal(value: Decimal, fmt: _Format) -> str:
    """Positive value as integer mantissa + suffix for the largest multiple-of-3 exponent (DecimalSI/Exp)."""
    _, digit_tuple, exponent = value.as_tuple()
    if not isinstance(exponent, int):
        raise ValueError(f"non-finite value {value!r}")
    digits = "".join(map(str, digit_tuple))
    mantissa = digits.rstrip("0")
    exponent += len(digits) - len(mantissa)
    # Lower the exponent to a multiple of 3 (Python's % is non-negative here, so this floors).
    shift = exponent % 3
    mantissa += "0" * shift
    exponent -= shift
    if fmt is _Format.DECIMAL_EXPONENT:
        return mantissa + (f"e{exponent}" if exponent else "")
    if exponent > _LARGEST_DECIMAL_SI_EXPONENT:
        # Go emits no suffix here ("1000E" -> "1"); write a longer mantissa with E instead.
        mantissa += "0" * (exponent - _LARGEST_DECIMAL_SI_EXPONENT)
        exponent = _LARGEST_DECIMAL_SI_EXPONENT
    suffix = _DECIMAL_SUFFIX_BY_EXPONENT.get(exponent)
    if suffix is None:
        # Only reachable if a caller skipped _round_up_to_nano: below 1n has no DecimalSI suffix.
        raise ValueError(f"value {value!r} is not a multiple of 1e-9")
    return mantissa + suffix


# -- the served value's Quantity (what the HPA reads) -------------------------------------------------------

_MILLI = Decimal("0.001")
_MILLI_SUFFIXES = ("m", "", "k", "M", "G", "T", "P", "E")


def milli(value: float) -> int:
    """The served value's ``MilliValue()``: rounded half up to a whole number of milli-units (the rule of
    ``quantity``; the what-if simulator feeds its HPA model through it)."""
    return int(Decimal(repr(value)).quantize(_MILLI, rounding=ROUND_HALF_UP).scaleb(3))


def quantity(value: float) -> str:
    """The canonical Quantity for a served value, at milli precision (what the HPA reads: MilliValue).

    Rounds half up to a whole number of milli-units, then writes it as canonical DecimalSI (the same
    string ``format_quantity`` gives, tested against it): the mantissa without trailing zero triples and
    the matching suffix. Direct integer arithmetic: this runs once per item of every list we serve.
    """
    whole = milli(value)
    if whole == 0:
        return "0"
    sign = "-" if whole < 0 else ""
    m, k = abs(whole), 0
    while m % 1000 == 0 and k < len(_MILLI_SUFFIXES) - 1:
        m //= 1000
        k += 1
    if k == len(_MILLI_SUFFIXES) - 1:  # beyond E: keep the E suffix with a longer mantissa
        return format_quantity(Decimal(whole).scaleb(-3))
    return f"{sign}{m}{_MILLI_SUFFIXES[k]}"
