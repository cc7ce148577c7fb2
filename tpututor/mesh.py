"""Meshes, shardings and the collectives XLA inserts, for the SPMD lessons.

* :func:`pick_devices` chooses what to shard over: the accelerators when there
  are enough of them, else the (simulated) CPU devices.
* :func:`make_mesh` wraps ``jax.make_mesh`` with a clear error, naming shapes
  that fit, when a mesh shape does not match the devices.
* :func:`shards` / :func:`shard_table` / :func:`plot_sharding` show which
  device holds which block of an array.
* :func:`collectives` lists the collectives in a compiled program with the
  bytes each moves; :func:`comm_seconds` estimates their time on a chip from
  the hardware table (ICI bandwidth): a communication roofline beside the
  compute one.

JAX is imported only inside the functions that need it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from . import hardware, hlo

__all__ = ["pick_devices", "suggest_shapes", "make_mesh", "shards", "shard_table", "plot_sharding",
           "Collective", "collectives", "comm_seconds", "collective_table"]


def pick_devices(n: int, platform: str | None = None) -> list:
    """``n`` devices to build a mesh from: accelerators if there are at least ``n``, else CPU devices.

    Raises a ValueError naming the fix when neither has ``n`` devices.
    """
    import jax

    if n < 1:
        raise ValueError(f"need at least one device, asked for {n}")
    if platform is not None:
        found = jax.devices(platform)
    else:
        found = jax.devices()
        if len(found) < n:
            found = jax.devices("cpu")
    if len(found) < n:
        raise ValueError(
            f"{n} devices are needed but only {len(found)} {found[0].platform.upper()} device(s) exist. "
            f"Simulate them on the CPU before JAX starts: jax.config.update('jax_num_cpu_devices', {n}) "
            f"right after `import jax`, or XLA_FLAGS=--xla_force_host_platform_device_count={n}"
        )
    return list(found[:n])


def suggest_shapes(count: int, ndim: int = 2) -> list[tuple[int, ...]]:
    """Every mesh shape with ``ndim`` axes whose sizes multiply to ``count``."""
    if ndim == 1:
        return [(count,)]
    out = []
    for d in range(1, count + 1):
        if count % d == 0:
            out += [(d, *rest) for rest in suggest_shapes(count // d, ndim - 1)]
    return out


def make_mesh(shape: Sequence[int], names: Sequence[str], *, devices: Sequence | None = None,
              explicit: bool = False):
    """A ``jax.sharding.Mesh`` of ``shape`` over ``devices`` (default: :func:`pick_devices`).

    ``explicit=False`` gives Auto axes (the compiler propagates shardings; the
    default before JAX 0.9); ``explicit=True`` gives Explicit axes, where
    shardings are part of each array's type.
    """
    import jax

    shape, names = tuple(shape), tuple(names)
    if len(shape) != len(names):
        raise ValueError(f"mesh shape {shape} has {len(shape)} axes but {len(names)} names {names}")
    if any(not isinstance(s, int) or s < 1 for s in shape):
        raise ValueError(f"mesh axis sizes must be positive integers, got {shape}")
    needed = math.prod(shape)
    if devices is None:
        try:
            devices = pick_devices(needed)
        except ValueError:
            have = max(len(jax.devices()), len(jax.devices("cpu")))
            fits = ", ".join(map(str, suggest_shapes(have, len(shape))))
            raise ValueError(
                f"mesh shape {shape} needs {needed} devices but {have} are present. Shapes that fit "
                f"{have} devices: {fits}; or simulate {needed} CPU devices before JAX starts "
                f"(jax.config.update('jax_num_cpu_devices', {needed}))"
            ) from None
    devices = list(devices)
    if len(devices) != needed:
        fits = ", ".join(map(str, suggest_shapes(len(devices), len(shape))))
        raise ValueError(f"mesh shape {shape} needs {needed} devices but {len(devices)} were given; "
                         f"shapes that fit {len(devices)}: {fits}")
    kind = jax.sharding.AxisType.Explicit if explicit else jax.sharding.AxisType.Auto
    return jax.make_mesh(shape, names, axis_types=(kind,) * len(shape), devices=devices)


def shards(array) -> list[dict[str, Any]]:
    """Which block of ``array`` each device holds: device id, index (as slices) and shard shape."""
    out = []
    for shard in array.addressable_shards:
        index = tuple(_fmt_slice(s, n) for s, n in zip(shard.index, array.shape))
        out.append({"device": shard.device.id, "index": index, "shape": tuple(shard.data.shape)})
    return sorted(out, key=lambda r: r["device"])


def _fmt_slice(s: slice, n: int) -> str:
    start, stop = s.start or 0, n if s.stop is None else s.stop
    return ":" if (start, stop) == (0, n) else f"{start}:{stop}"


def shard_table(array) -> str:
    """A Markdown table of :func:`shards`, with the array's PartitionSpec in the header."""
    spec = getattr(array.sharding, "spec", None)
    rows = [f"| device | block of the {tuple(array.shape)} array | shard shape |", "|---|---|---|"]
    rows += [f"| {r['device']} | [{', '.join(r['index'])}] | {r['shape']} |" for r in shards(array)]
    return (f"`{spec}`\n\n" if spec is not None else "") + "\n".join(rows)


def plot_sharding(array, ax=None, title: str | None = None):
    """Colour each block of a 1-D or 2-D array by the device(s) holding it. Returns the Axes."""
    import matplotlib.pyplot as plt

    if array.ndim not in (1, 2):
        raise ValueError(f"plot_sharding draws 1-D and 2-D arrays; this one has {array.ndim} dimensions")
    rows, cols = (1, array.shape[0]) if array.ndim == 1 else array.shape
    owners: dict[tuple, list[int]] = {}
    for device, index in array.sharding.devices_indices_map(array.shape).items():
        key = tuple((s.start or 0, dim if s.stop is None else s.stop) for s, dim in zip(index, array.shape))
        owners.setdefault(key, []).append(device.id)
    if ax is None:
        _, ax = plt.subplots(figsize=(4, 3))
    cmap = plt.get_cmap("tab10")
    for key, ids in owners.items():
        (r0, r1), (c0, c1) = ((0, 1), key[0]) if array.ndim == 1 else key
        ax.add_patch(plt.Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=cmap(min(ids) % 10), alpha=0.55,
                                   edgecolor="black"))
        label = ",".join(map(str, sorted(ids))) if len(ids) <= 4 else f"{len(ids)} devices"
        ax.text((c0 + c1) / 2, (r0 + r1) / 2, label, ha="center", va="center", fontsize=8)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title or f"{tuple(array.shape)}: {getattr(array.sharding, 'spec', '')}", fontsize=9)
    return ax


# --------------------------------------------------------------------------- collectives

# The collectives themselves; their async halves (-start / -done) are folded into them below.
_BASE = frozenset(c for c in hlo.COLLECTIVES if not c.endswith(("-start", "-done")))


@dataclass(frozen=True)
class Collective:
    """One collective in a compiled program."""

    kind: str  # all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute
    name: str
    shape: str  # the result's HLO shape
    bytes: int  # the result's size on each device
    group_size: int | None  # devices taking part in each group
    moved: float | None  # bytes each device sends (ring algorithms), the figure for timing


def _group_size(text: str, default: int | None) -> int | None:
    m = re.search(r"replica_groups=mesh\[([^\]]*)\]\s*\{([^}]*)\}", text)  # mesh['a'=4,'b'=2] {'b'}
    if m:
        sizes = {k: int(v) for k, v in re.findall(r"'([^']+)'=(\d+)", m.group(1))}
        return math.prod(sizes.get(k, 1) for k in re.findall(r"'([^']+)'", m.group(2)))
    m = re.search(r"replica_groups=\[([\d,]+)\]<=", text)  # iota form: [groups, size]<=[...]
    if m:
        return int(m.group(1).split(",")[-1])
    m = re.search(r"replica_groups=\{\{([\d,\s]*)\}", text)  # explicit form: {{0,1},{2,3}}
    if m:
        return len([x for x in m.group(1).split(",") if x.strip()]) or default
    return default


def _moved(kind: str, nbytes: int, n: int | None) -> float | None:
    if n is None or n < 1:
        return None
    if kind == "all-reduce":
        return 2 * (n - 1) / n * nbytes  # reduce-scatter then all-gather
    if kind in ("all-gather", "all-to-all", "ragged-all-to-all"):
        return (n - 1) / n * nbytes  # receive every other device's part of the result
    if kind == "reduce-scatter":
        return (n - 1) * nbytes  # result is 1/n of the input: send the other n-1 parts
    return float(nbytes)  # collective-permute / broadcast: the whole buffer once


def collectives(program: Any, devices: int | None = None) -> list[Collective]:
    """The collectives in a compiled program (a ``Compiled``, or its HLO text), in program order.

    ``devices`` is the group size to assume when the HLO does not spell its
    groups out. Async pairs (``all-reduce-start`` / ``-done``) count once.
    """
    text = program if isinstance(program, str) else program.as_text()
    module = hlo.parse(text)
    out = []
    for comp in [module.entry] + [c for c in module.computations.values() if not c.entry]:
        for inst in comp.instructions:
            kind = inst.opcode.removesuffix("-start")
            if kind not in _BASE or inst.opcode.endswith("-done"):
                continue
            shape = inst.shape
            if inst.opcode.endswith("-start") and shape.startswith("("):
                # async start: (operands..., results...); count the results
                parts = [m.group(0) for m in hlo.ARRAY_SHAPE.finditer(shape)]
                shape = "(" + ", ".join(parts[len(parts) // 2:]) + ")"
            nbytes = hlo.shape_bytes(shape)  # a combined collective's tuple counts every buffer
            n = _group_size(inst.text, devices)
            out.append(Collective(kind, inst.name, shape, nbytes, n, _moved(kind, nbytes, n)))
    return out


def comm_seconds(moved_bytes: float, chip: str | hardware.Chip) -> float:
    """Estimated time to move ``moved_bytes`` per device over a chip's ICI/NVLink.

    bytes / (the table's bidirectional per-chip interconnect bandwidth): a lower
    bound that assumes every link of the chip is busy with this collective.
    """
    chip = hardware.lookup(chip) if isinstance(chip, str) else chip
    if not chip.interconnect_gbps:
        raise ValueError(f"{chip.label} has no chip-to-chip bandwidth in the table ({chip.interconnect or 'none'})")
    return moved_bytes / (chip.interconnect_gbps * 1e9)


def collective_table(found: Sequence[Collective], chips: Sequence[str] = ("v5e", "v5p", "v6e")) -> str:
    """Markdown: each collective, its bytes, and its estimated time on each chip."""
    head = ["collective", "result", "group", "bytes moved per device", *[f"{hardware.lookup(c).label} µs" for c in chips]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in found:
        times = [f"{comm_seconds(c.moved, chip) * 1e6:.2f}" if c.moved is not None else "?" for chip in chips]
        buffers = [m.group(0) for m in hlo.ARRAY_SHAPE.finditer(c.shape)]
        shape = buffers[0] if len(buffers) == 1 else f"{len(buffers)} buffers, combined"
        lines.append(f"| {c.kind} | {shape} | {c.group_size or '?'} | "
                     f"{'?' if c.moved is None else f'{c.moved:,.0f}'} | " + " | ".join(times) + " |")
    return "\n".join(lines)
