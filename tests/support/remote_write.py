"""A Prometheus remote-write (protocol 0.1.0) request body, encoded by hand: no protobuf, no snappy library.

The message shapes come from prometheus/prometheus ``prompb/remote.proto`` and ``prompb/types.proto``::

    WriteRequest { repeated TimeSeries timeseries = 1; }
    TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
    Label        { string name = 1; string value = 2; }
    Sample       { double value = 1; int64 timestamp = 2; }   // timestamp in milliseconds

Wire format per https://protobuf.dev/programming-guides/encoding/ (varints, tags ``field << 3 | type``).
The body is then wrapped as a snappy *block* (google/snappy ``format_description.txt``): the varint
uncompressed length followed by literal elements only, which every snappy decoder accepts (it is
simply an incompressible-looking encoding).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping

_WIRE_VARINT = 0
_WIRE_FIXED64 = 1
_WIRE_LEN = 2
_UINT64_MASK = (1 << 64) - 1


def varint(value: int) -> bytes:
    """Protobuf base-128 varint; negative numbers are sent as their 64-bit two's complement (int64)."""
    value &= _UINT64_MASK
    out = bytearray()
    while True:
        low = value & 0x7F
        value >>= 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def _len_field(field: int, payload: bytes) -> bytes:
    return _key(field, _WIRE_LEN) + varint(len(payload)) + payload


def encode_label(name: str, value: str) -> bytes:
    """One ``Label`` message."""
    return _len_field(1, name.encode()) + _len_field(2, value.encode())


def encode_sample(timestamp_ms: int, value: float) -> bytes:
    """One ``Sample`` message; NaN and ±Inf pass through as IEEE-754 doubles."""
    return _key(1, _WIRE_FIXED64) + struct.pack("<d", value) + _key(2, _WIRE_VARINT) + varint(timestamp_ms)


def encode_timeseries(labels: Mapping[str, str], samples: Iterable[tuple[int, float]]) -> bytes:
    """One ``TimeSeries``: labels sorted by name (Prometheus requires it), samples in the order given."""
    body = bytearray()
    for name in sorted(labels):
        body += _len_field(1, encode_label(name, labels[name]))
    for timestamp_ms, value in samples:
        body += _len_field(2, encode_sample(timestamp_ms, value))
    return bytes(body)


def encode_write_request(
    timeseries: Iterable[tuple[Mapping[str, str], Iterable[tuple[int, float]]]],
) -> bytes:
    """A ``WriteRequest`` from ``(labels, [(timestamp_ms, value), ...])`` pairs, uncompressed."""
    body = bytearray()
    for labels, samples in timeseries:
        body += _len_field(1, encode_timeseries(labels, samples))
    return bytes(body)


def literal_tag(length: int) -> bytes:
    """The snappy tag (plus 0-4 length bytes) that introduces a literal of ``length`` (1 .. 2**32) bytes.

    Lengths up to 60 fit in the tag's upper six bits as ``length - 1``; longer ones use tag values
    60..63 meaning "1..4 little-endian bytes of ``length - 1`` follow".
    """
    if not 1 <= length <= 1 << 32:
        raise ValueError(f"snappy literal length out of range: {length}")
    n = length - 1
    if n < 60:
        return bytes([n << 2])
    extra = (n.bit_length() + 7) // 8
    return bytes([(59 + extra) << 2]) + n.to_bytes(extra, "little")


def snappy_block_literal(data: bytes) -> bytes:
    """``data`` as a valid snappy block made only of literal elements (no compression happens)."""
    out = bytearray(varint(len(data)))
    # Real encoders emit at most 64 KiB per literal; decoders accept any length, but staying within
    # the same bound keeps us on the most travelled decoder path.
    chunk = 1 << 16
    for start in range(0, len(data), chunk):
        piece = data[start : start + chunk]
        out += literal_tag(len(piece)) + piece
    return bytes(out)


def write_request_body(
    timeseries: Iterable[tuple[Mapping[str, str], Iterable[tuple[int, float]]]],
) -> bytes:
    """The complete HTTP body for ``POST /api/v1/write``: a snappy-wrapped ``WriteRequest``."""
    return snappy_block_literal(encode_write_request(timeseries))


#: The headers remote-write 0.1.0 requires alongside ``write_request_body``.
REMOTE_WRITE_HEADERS: Mapping[str, str] = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
}
