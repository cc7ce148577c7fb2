"""Read a device memory profile: which live buffers, made where, hold the device's memory.

``jax.profiler.save_device_memory_profile(path)`` (or ``jax.profiler.device_memory_profile()``)
writes pprof's format: a gzipped ``profile.proto`` message. :func:`read_memory_profile` decodes it
with the standard library (through :mod:`tpututor.protowire`) into :class:`Allocation` records,
and :func:`memory_table` lists the largest with the call site in your code. This module imports
no framework.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import protowire

__all__ = ["Allocation", "MemoryProfile", "read_memory_profile", "memory_table"]


@dataclass(frozen=True)
class Allocation:
    """One sample of a device memory profile: live buffers (or executables) made at one call site."""

    kind: str  # "buffer" or "executable"
    device: str  # e.g. "cpu:0", "tpu:0"
    count: int
    bytes: int
    stack: tuple[str, ...]  # innermost frame first: "function (file:line)"

    def site(self, skip: Sequence[str] = ("/jax/", "/jaxlib/", "site-packages", "<frozen")) -> str:
        """The innermost frame outside JAX and the libraries: where your code asked for the memory."""
        return next((f for f in self.stack if not any(s in f for s in skip)), self.stack[0] if self.stack else "?")


@dataclass
class MemoryProfile:
    sample_types: list[tuple[str, str]]  # (type, unit) of each value: ("allocations", "count"), ("space", "bytes")
    allocations: list[Allocation]

    def total(self, kind: str = "buffer") -> int:
        return sum(a.bytes for a in self.allocations if a.kind == kind)


def _fields_of(buf: bytes):
    """(field number, value) of each field of a protobuf message, wire types dropped."""
    return ((number, value) for number, _, value in protowire.fields(buf))


def read_memory_profile(source: str | os.PathLike | bytes) -> MemoryProfile:
    """Decode a device memory profile (``jax.profiler.save_device_memory_profile``'s file, or
    ``device_memory_profile()``'s bytes): gzip, then pprof's ``profile.proto``, read with the standard library.

    Fields used (github.com/google/pprof, proto/profile.proto): Profile 1 sample_type, 2 sample, 4 location,
    5 function, 6 string_table; Sample 1 location_id, 2 value, 3 label; Label 1 key, 2 str;
    Location 1 id, 4 line; Line 1 function_id, 2 line; Function 1 id, 2 name, 4 filename."""
    raw = bytes(source) if isinstance(source, (bytes, bytearray)) else Path(source).read_bytes()
    try:
        data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        top: dict[int, list] = {}
        for number, value in _fields_of(data):
            top.setdefault(number, []).append(value)
        strings = [s.decode("utf-8", "replace") for s in top.get(6, [])]
        functions, locations = {}, {}
        for msg in top.get(5, []):
            f = dict(_fields_of(msg))
            functions[f.get(1, 0)] = (strings[f.get(2, 0)], strings[f.get(4, 0)])
        for msg in top.get(4, []):
            loc_id, frames = 0, []
            for number, value in _fields_of(msg):
                if number == 1:
                    loc_id = value
                elif number == 4:
                    line = dict(_fields_of(value))
                    name, file = functions.get(line.get(1, 0), ("?", "?"))
                    frames.append(f"{name} ({file}:{line.get(2, 0)})")
            locations[loc_id] = frames
        types = [(strings[t.get(1, 0)], strings[t.get(2, 0)]) for t in (dict(_fields_of(m)) for m in top.get(1, []))]
        allocations = []
        for msg in top.get(2, []):
            loc_ids, values, labels = [], [], {}
            for number, value in _fields_of(msg):
                if number == 1:
                    loc_ids += protowire.packed(value)
                elif number == 2:
                    values += protowire.packed(value)
                elif number == 3:
                    label = dict(_fields_of(value))
                    labels[strings[label.get(1, 0)]] = strings[label.get(2, 0)]
            by_type = dict(zip((t for t, _ in types), values))
            stack = tuple(frame for i in loc_ids for frame in locations.get(i, []))
            allocations.append(
                Allocation(
                    labels.get("kind", "?"),
                    labels.get("device", "?"),
                    int(by_type.get("allocations", 0)),
                    int(by_type.get("space", 0)),
                    stack,
                )
            )
    except (ValueError, IndexError, EOFError, OSError) as exc:
        raise ValueError(
            f"not a pprof memory profile ({type(exc).__name__}: {exc}); write one with "
            "jax.profiler.save_device_memory_profile(path)"
        ) from exc
    return MemoryProfile(types, allocations)


def memory_table(profile: MemoryProfile, n: int = 8) -> str:
    """The largest allocations: kind, device, count, MiB and the call site in your code."""
    lines = ["| kind | device | count | MiB | where (innermost frame outside JAX) |", "|---|---|---|---|---|"]
    for a in sorted(profile.allocations, key=lambda a: -a.bytes)[:n]:
        device = a.device if a.device != "?" else "-"
        lines.append(f"| {a.kind} | {device} | {a.count} | {a.bytes / 2**20:.2f} | `{a.site()}` |")
    return "\n".join(lines)
