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
from collections.abc import Iterator, Mapping
from pathlib import Path

from .protowire import bytes_field, field, fields, varint

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


def _event(
    wall_time: float, step: int = 0, *, file_version: str | None = None, scalars: Mapping[str, float] | None = None
) -> bytes:
    """Event{wall_time=1 (double), step=2 (int64), file_version=3 (string), summary=5 (Summary)};
    Summary{value=1 (repeated Value)}; Value{tag=1 (string), simple_value=2 (float)}."""
    out = field(1, 1, struct.pack("<d", wall_time)) + field(2, 0, varint(step))
    if file_version is not None:
        out += bytes_field(3, file_version.encode())
    if scalars:
        values = b"".join(
            bytes_field(1, bytes_field(1, tag.encode()) + field(2, 5, struct.pack("<f", float(v))))
            for tag, v in scalars.items()
        )
        out += bytes_field(5, values)
    return out


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

    def __enter__(self) -> Writer:
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
        length_bytes = data[i : i + 8]
        (length,) = struct.unpack("<Q", length_bytes)
        if struct.unpack("<I", data[i + 8 : i + 12])[0] != _masked(length_bytes) or i + 16 + length > len(data):
            return
        body = data[i + 12 : i + 12 + length]
        if struct.unpack("<I", data[i + 12 + length : i + 16 + length])[0] != _masked(body):
            return
        i += 16 + length
        event: dict = {"wall_time": 0.0, "step": 0}
        for number, _, value in fields(body):
            if number == 1:
                event["wall_time"] = struct.unpack("<d", value)[0]
            elif number == 2:
                event["step"] = value
            elif number == 3:
                event["file_version"] = value.decode()
            elif number == 5:
                scalars = {}
                for vnum, _, v in fields(value):
                    if vnum == 1:
                        tag_value = {n: x for n, _, x in fields(v)}
                        if 1 in tag_value and 2 in tag_value:
                            scalars[tag_value[1].decode()] = struct.unpack("<f", tag_value[2])[0]
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
