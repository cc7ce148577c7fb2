"""TensorBoard scalars, written and read without TensorFlow.

A TensorBoard event file (``events.out.tfevents.<time>.<host>``) is a TFRecord file of ``Event``
protocol buffers: a first event naming the format (``file_version: "brain.Event:2"``), then one
event per step holding ``Summary.Value(tag, simple_value)`` scalars. ``tf.summary`` writes the
same records, but importing TensorFlow costs seconds of start-up in every training process that
logs; the few bytes of a scalar are written here by hand instead (the record framing and the
protobuf wire format, both stable public formats). ``tests/test_hosts.py`` reads them back with
TensorFlow's own reader, so TensorBoard (``tensorboard --logdir DIR``) shows them. In use::

    with tblog.Writer("runs/lm") as w:
        w.scalars(step, {"loss": 2.31, "steps_per_second": 4.2})
    tblog.read("runs/lm")  # {"loss": {step: value, ...}, ...}

Local folders only: for ``gs://`` log with ``tf.summary.create_file_writer("gs://...")``, or write
here and copy the folder up (``gcloud storage rsync``). This module imports no framework.
"""

from __future__ import annotations

import os
import socket
import struct
import time
from pathlib import Path
from typing import Iterator, Mapping

__all__ = ["Writer", "read", "events", "event_files"]


# --------------------------------------------------------------------------- CRC-32C (Castagnoli)

def _table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _table()


def _crc32c(data: bytes) -> int:
    try:
        import google_crc32c  # installed with Google Cloud's storage clients; C speed

        return google_crc32c.value(data)
    except ImportError:
        crc = 0xFFFFFFFF
        for b in data:
            crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
        return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    crc = _crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _record(data: bytes) -> bytes:
    """One TFRecord: length, its masked CRC, the data, its masked CRC."""
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", _masked(length)) + data + struct.pack("<I", _masked(data))


# --------------------------------------------------------------------------- protobuf wire format

def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, wire: int, payload: bytes) -> bytes:
    return _varint(number << 3 | wire) + payload


def _bytes_field(number: int, data: bytes) -> bytes:
    return _field(number, 2, _varint(len(data)) + data)


def _event(wall_time: float, step: int = 0, *, file_version: str | None = None,
           scalars: Mapping[str, float] | None = None) -> bytes:
    """Event{wall_time=1 (double), step=2 (int64), file_version=3 (string), summary=5 (Summary)};
    Summary{value=1 (repeated Value)}; Value{tag=1 (string), simple_value=2 (float)}."""
    out = _field(1, 1, struct.pack("<d", wall_time)) + _field(2, 0, _varint(step))
    if file_version is not None:
        out += _bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(_bytes_field(1, _bytes_field(1, tag.encode()) + _field(2, 5, struct.pack("<f", float(v))))
                          for tag, v in scalars.items())
        out += _bytes_field(5, values)
    return out


def _parse(data: bytes) -> Iterator[tuple[int, int, bytes | int | float]]:
    """(field number, wire type, value) for each field of one protobuf message."""
    i = 0
    while i < len(data):
        key, i = _read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _read_varint(data, i)
        elif wire == 1:
            value, i = struct.unpack_from("<d", data, i)[0], i + 8
        elif wire == 2:
            n, i = _read_varint(data, i)
            value, i = data[i:i + n], i + n
        elif wire == 5:
            value, i = struct.unpack_from("<f", data, i)[0], i + 4
        else:
            raise ValueError(f"unexpected protobuf wire type {wire}")
        yield number, wire, value


def _read_varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = data[i]
        i += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return result, i


# --------------------------------------------------------------------------- writing and reading

class Writer:
    """Scalars into a new event file in ``logdir`` (created), one event per :meth:`scalars` call."""

    def __init__(self, logdir: str | os.PathLike, *, flush_every: float = 2.0):
        self.logdir = Path(logdir)
        self.logdir.mkdir(parents=True, exist_ok=True)
        now = time.time()
        self.path = self.logdir / f"events.out.tfevents.{int(now)}.{socket.gethostname()}.{os.getpid()}"
        self._file = open(self.path, "wb")
        self._flush_every, self._flushed = flush_every, now
        self._file.write(_record(_event(now, file_version="brain.Event:2")))
        self.flush()

    def scalars(self, step: int, values: Mapping[str, float], wall_time: float | None = None) -> None:
        now = time.time() if wall_time is None else wall_time
        self._file.write(_record(_event(now, int(step), scalars=values)))
        if now - self._flushed >= self._flush_every:
            self.flush()

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.scalars(step, {tag: value})

    def flush(self) -> None:
        self._file.flush()
        self._flushed = time.time()

    def close(self) -> None:
        if not self._file.closed:
            self._file.flush()
            self._file.close()

    def __enter__(self) -> "Writer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def event_files(logdir: str | os.PathLike) -> list[Path]:
    """The event files under ``logdir`` (any depth), oldest name first."""
    return sorted(p for p in Path(logdir).rglob("events.out.tfevents.*") if p.is_file())


def events(path: str | os.PathLike) -> Iterator[dict]:
    """Each event of one file as ``{"wall_time", "step", "file_version"?, "scalars"?}``; a record whose
    checksum is wrong (a file cut off mid-write) ends the reading, as in TensorBoard."""
    data = Path(path).read_bytes()
    i = 0
    while i + 12 <= len(data):
        length_bytes = data[i:i + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        if struct.unpack("<I", data[i + 8:i + 12])[0] != _masked(length_bytes) or i + 16 + length > len(data):
            return
        body = data[i + 12:i + 12 + length]
        if struct.unpack("<I", data[i + 12 + length:i + 16 + length])[0] != _masked(body):
            return
        i += 16 + length
        event: dict = {"wall_time": 0.0, "step": 0}
        for number, _, value in _parse(body):
            if number == 1:
                event["wall_time"] = value
            elif number == 2:
                event["step"] = value
            elif number == 3:
                event["file_version"] = value.decode()
            elif number == 5:
                scalars = {}
                for vnum, _, v in _parse(value):
                    if vnum == 1:
                        fields = {n: x for n, _, x in _parse(v)}
                        if 1 in fields and 2 in fields:
                            scalars[fields[1].decode()] = fields[2]
                event["scalars"] = scalars
        yield event


def read(logdir: str | os.PathLike) -> dict[str, dict[int, float]]:
    """``{tag: {step: value}}`` of every scalar in the event files under ``logdir`` (a later file's
    value for a step wins, as when a resumed run logs that step again)."""
    files = [list(events(path)) for path in event_files(logdir)]
    out: dict[str, dict[int, float]] = {}
    for file in sorted(files, key=lambda evs: evs[0]["wall_time"] if evs else 0.0):  # in the order they began
        for event in file:
            for tag, value in event.get("scalars", {}).items():
                out.setdefault(tag, {})[event["step"]] = value
    return out
