"""The protocol-buffer wire format, read and written with the standard library.

Two files the course reads are protocol buffers without a schema package at hand: TensorBoard's
event files (``tblog``) and the device memory profile JAX writes in pprof's format (``pprof``).
The wire format is small and stable (protobuf.dev/programming-guides/encoding): each field is a
varint key ``number << 3 | wire type`` and then its value, a varint (type 0), eight bytes (1),
a length and that many bytes (2, also nested messages and packed repeated numbers) or four bytes
(5). This module imports no framework.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["read_varint", "fields", "packed", "varint", "field", "bytes_field"]


def read_varint(buf: bytes, i: int) -> tuple[int, int]:
    """The varint starting at ``buf[i]`` and the index just after it."""
    out = shift = 0
    while True:
        if i >= len(buf):
            raise ValueError("truncated protobuf varint")
        byte = buf[i]
        i += 1
        out |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return out, i


def fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """``(field number, wire type, value)`` of each field of one message: an int for a varint, the
    raw bytes otherwise (eight for a double, four for a float, the payload of a length-delimited)."""
    i = 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, i = read_varint(buf, i)
        elif wire == 1:
            value, i = buf[i : i + 8], i + 8
        elif wire == 2:
            size, i = read_varint(buf, i)
            value, i = buf[i : i + size], i + size
        elif wire == 5:
            value, i = buf[i : i + 4], i + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if i > len(buf):
            raise ValueError("truncated protobuf field")
        yield number, wire, value


def packed(value: int | bytes) -> list[int]:
    """A repeated integer field: packed (bytes of varints) or a single varint."""
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = read_varint(value, i)
        out.append(v)
    return out


def varint(n: int) -> bytes:
    """``n`` as a varint (negative numbers as their 64-bit two's complement, as protobuf does)."""
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(number: int, wire: int, payload: bytes) -> bytes:
    """One field: its key, then ``payload`` already encoded for ``wire``."""
    return varint(number << 3 | wire) + payload


def bytes_field(number: int, data: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a nested message)."""
    return field(number, 2, varint(len(data)) + data)
