"""torch_xla's metrics and counters as records, not as a printed report.

``torch_xla.debug.metrics`` keeps running totals: how many graphs were
compiled and executed and how long that took, how much data crossed between
host and device, and a counter per ``aten::`` operator that fell back to the
CPU. :func:`snapshot` reads them into a :class:`Metrics` record;
:func:`measure` gives the difference over a ``with`` block, so a lesson can
assert "this loop compiled once" without clearing anyone's totals.

torch_xla is imported only when a function is called; every function takes the
metrics module as ``met`` so tests can pass a fake.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["Metrics", "snapshot", "measure", "table", "EXPECTED_FALLBACKS"]

# Fallbacks the torch_xla docs call normal: reading a scalar to Python, and nonzero's dynamic shape.
EXPECTED_FALLBACKS = frozenset({"aten::_local_scalar_dense", "aten::nonzero"})


def _met(met: Any = None):
    if met is not None:
        return met
    import torch_xla.debug.metrics as met_module

    return met_module


@dataclass
class Metrics:
    """Totals read from torch_xla (or their difference over a block, from :func:`measure`)."""

    compiles: int = 0  # graphs compiled (CompileTime samples)
    compile_seconds: float = 0.0
    executions: int = 0  # graphs executed (ExecuteTime samples)
    execute_seconds: float = 0.0
    cached_compiles: int = 0  # a graph seen before: its executable came from the cache
    transfers_to_device: int = 0
    transfer_to_device_seconds: float = 0.0
    transfers_from_device: int = 0
    transfer_from_device_seconds: float = 0.0
    syncs: int = 0  # MarkStep counter: torch_xla.sync() / xm.mark_step() calls
    fallbacks: dict[str, int] = field(default_factory=dict)  # aten:: op -> times it ran on the CPU

    @property
    def unexpected_fallbacks(self) -> dict[str, int]:
        """Fallbacks other than the usual scalar reads and nonzero: a missing lowering."""
        return {k: v for k, v in self.fallbacks.items() if k not in EXPECTED_FALLBACKS}

    @property
    def host_reads(self) -> int:
        """Scalars read to Python (``.item()``, ``bool(tensor)``, ``if tensor:``): each one waits for the device."""
        return self.fallbacks.get("aten::_local_scalar_dense", 0)

    def __sub__(self, other: Metrics) -> Metrics:
        out = Metrics()
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, dict):
                diff = {k: a.get(k, 0) - b.get(k, 0) for k in a}
                setattr(out, f.name, {k: v for k, v in diff.items() if v})
            else:
                setattr(out, f.name, a - b)
        return out

    def row(self) -> dict[str, Any]:
        return {
            "compiles": self.compiles,
            "compile s": round(self.compile_seconds, 3),
            "executions": self.executions,
            "execute s": round(self.execute_seconds, 3),
            "cached": self.cached_compiles,
            "to device": self.transfers_to_device,
            "from device": self.transfers_from_device,
            "fallbacks": ", ".join(f"{k} x{v}" for k, v in self.fallbacks.items()) or "-",
        }


def _metric(met, name: str) -> tuple[int, float]:
    """(samples, accumulated seconds) of a time metric; (0, 0.0) when it has no data yet."""
    try:
        data = met.metric_data(name)
    except Exception:  # unknown metric name in this torch_xla version
        return 0, 0.0
    if not data:
        return 0, 0.0
    samples, accumulator = data[0], data[1]
    return int(samples), float(accumulator) / 1e9  # time metrics accumulate nanoseconds


def _counter(met, name: str) -> int:
    try:
        return int(met.counter_value(name) or 0)
    except Exception:
        return 0


def snapshot(met: Any = None) -> Metrics:
    """The current torch_xla totals as a :class:`Metrics` record."""
    met = _met(met)
    compiles, compile_s = _metric(met, "CompileTime")
    executions, execute_s = _metric(met, "ExecuteTime")
    to_dev, to_dev_s = _metric(met, "TransferToDeviceTime")
    from_dev, from_dev_s = _metric(met, "TransferFromDeviceTime")
    names = list(met.counter_names())
    return Metrics(
        compiles=compiles,
        compile_seconds=compile_s,
        executions=executions,
        execute_seconds=execute_s,
        cached_compiles=_counter(met, "CachedCompile"),
        transfers_to_device=to_dev,
        transfer_to_device_seconds=to_dev_s,
        transfers_from_device=from_dev,
        transfer_from_device_seconds=from_dev_s,
        syncs=_counter(met, "MarkStep"),
        fallbacks={n: _counter(met, n) for n in names if n.startswith("aten::")},
    )


@contextlib.contextmanager
def measure(met: Any = None) -> Iterator[Metrics]:
    """What happened inside the block: ``with measure() as m: ...`` then ``m.compiles``.

    Execution is asynchronous (``torch_xla.sync()`` returns before the device
    finishes, and the execution is counted when it finishes), so this waits for
    the device before its first reading (work queued earlier stays out of the
    block) and again on leaving the block, before the second.
    """
    real = met is None
    met = _met(met)
    result = Metrics()
    if real:  # work queued before the block must not be counted in it
        import torch_xla.core.xla_model as xm

        xm.wait_device_ops()
    before = snapshot(met)
    try:
        yield result
    finally:
        if real:
            import torch_xla.core.xla_model as xm

            xm.wait_device_ops()
        diff = snapshot(met) - before
        for f in fields(diff):
            setattr(result, f.name, getattr(diff, f.name))


def table(rows: dict[str, Metrics]) -> str:
    """Labelled records as a Markdown table."""
    if not rows:
        return ""
    head = ["run", *next(iter(rows.values())).row()]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, m in rows.items():
        lines.append("| " + " | ".join([label, *map(str, m.row().values())]) + " |")
    return "\n".join(lines)
