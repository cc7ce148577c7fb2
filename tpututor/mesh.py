"""Meshes, shardings and the collectives XLA inserts, for the SPMD lessons.

* :func:`pick_devices` chooses what to shard over: the accelerators when there
  are enough of them, else the (simulated) CPU devices.
* :func:`make_mesh` wraps ``jax.make_mesh`` with a clear error, naming shapes
  that fit, when a mesh shape does not match the devices.
* :func:`shards` / :func:`shard_table` / :func:`plot_sharding` show which
  device holds which block of an array.
* :func:`collectives` lists the collectives in a compiled program with the
  bytes each moves.
* :func:`collective_seconds` estimates a collective's time along a mesh axis of
  a TPU slice with scaling-book's model (per-axis ICI bandwidth, wraparound or
  not, a latency floor per hop); :func:`data_parallel_threshold` and
  :func:`tensor_parallel_limit` turn it into the two rules of thumb of its
  training chapter. :func:`collective_table` shows a program's collectives with
  their estimated time on a slice of each of several chips.

The cost model (jax-ml/scaling-book, sharding.md "A Deeper Dive into TPU
Communication Primitives", training.md): an all-gather or a reduce-scatter of V
bytes (the whole array) along an axis of X chips takes (X-1)/X * V / W, where
W is what the axis carries per chip: both directions of its two links, 2 x the
one-way link bandwidth, when the axis closes into a ring with a wraparound
link, and one direction only (half) when it does not, the case of small slices
such as a v5e-8 (2x4). For large X that is V / W, independent of X. An
all-reduce is a reduce-scatter plus an all-gather: twice that. An all-to-all
is a quarter of an all-gather: scaling-book derives the quarter for a ring
(each piece travels at most X/2 hops), and it holds on a line too, where the
middle link carries V/4 each way against the V an end chip must receive in an
all-gather. A collective over several mesh axes gets the bandwidth of each.
Small arrays are latency bound instead: about 1 us per hop, X/2 hops around a
ring and X-1 along a line. Nothing here models overlap with compute,
congestion or DCN.

JAX is imported only inside the functions that need it.
"""

from __future__ import annotations

import itertools
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from . import hardware, hlo

__all__ = [
    "pick_devices",
    "suggest_shapes",
    "make_mesh",
    "shards",
    "shard_table",
    "plot_sharding",
    "Collective",
    "collectives",
    "HOP_LATENCY",
    "collective_seconds",
    "data_parallel_threshold",
    "tensor_parallel_limit",
    "collective_table",
]


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


def make_mesh(shape: Sequence[int], names: Sequence[str], *, devices: Sequence | None = None, explicit: bool = False):
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
        raise ValueError(
            f"mesh shape {shape} needs {needed} devices but {len(devices)} were given; "
            f"shapes that fit {len(devices)}: {fits}"
        )
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
        ax.add_patch(
            plt.Rectangle((c0, r0), c1 - c0, r1 - r0, facecolor=cmap(min(ids) % 10), alpha=0.55, edgecolor="black")
        )
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
    moved: float | None  # bytes each device sends in a one-way ring
    parameter: int | None = None  # the program's parameter number the operand is, through layout-only ops
    updates: int | None = None  # the parameter number the result is combined with, same size: a gradient

    @property
    def result(self) -> str:
        """The result's shape without its layout (``f32[256,512]``), or ``N buffers, combined``."""
        buffers = [m.group(0) for m in hlo.ARRAY_SHAPE.finditer(self.shape)]
        return buffers[0] if len(buffers) == 1 else f"{len(buffers)} buffers, combined"

    @property
    def volume(self) -> float:
        """V, the bytes of the whole array in scaling-book's cost model: the gathered result of an
        all-gather, the unreduced input of a reduce-scatter (its result times the group), the whole
        array an all-to-all reshuffles (each device's buffer times the group), the buffer of an
        all-reduce or a permute."""
        if self.kind in ("reduce-scatter", "all-to-all", "ragged-all-to-all") and self.group_size:
            return float(self.bytes * self.group_size)
        return float(self.bytes)


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
                shape = "(" + ", ".join(parts[len(parts) // 2 :]) + ")"
            nbytes = hlo.shape_bytes(shape)  # a combined collective's tuple counts every buffer
            n = _group_size(inst.text, devices)
            by_name = {i.name: i for i in comp.instructions}
            first = _OPERAND.match(inst.text.strip())
            out.append(
                Collective(
                    kind,
                    inst.name,
                    shape,
                    nbytes,
                    n,
                    _moved(kind, nbytes, n),
                    _trace_parameter(first.group(1), by_name) if first and comp.entry else None,
                    _updated_parameter(inst, comp, by_name) if comp.entry else None,
                )
            )
    return out


# Ops that only move, retype or relabel a value: what they read is still the same tensor.
_LAYOUT_OPS = frozenset(
    {
        "bitcast",
        "copy",
        "reshape",
        "transpose",
        "convert",
        "copy-start",
        "copy-done",
        "get-tuple-element",
        "optimization-barrier",
    }
)
_OPERAND = re.compile(r"^\(?\s*(?:[a-z]\w*\[[^\]]*\](?:\{[^}]*\})?\s+)?%?([\w.\-]+)")  # text after the opcode
_NAMES = re.compile(r"%?([A-Za-z_][\w.\-]*)")


def _trace_parameter(name: str, by_name: dict) -> int | None:
    """The entry parameter number the value ``name`` is, through layout-only ops (None when computed)."""
    for _ in range(50):
        source = by_name.get(name)
        if source is None:
            return None
        if source.opcode == "parameter":
            number = re.match(r"\s*\(?\s*(\d+)\s*\)", source.text)
            return int(number.group(1)) if number else None
        m = _OPERAND.match(source.text.strip())
        if source.opcode not in _LAYOUT_OPS or not m:
            return None
        name = m.group(1)
    return None


def _operands(inst: Any, by_name: dict) -> list:
    """The instructions ``inst`` reads (names in its operand list that name an instruction)."""
    depth, end = 0, len(inst.text)
    for i, ch in enumerate(inst.text):  # the operand list ends at the parenthesis that closes it
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                end = i
                break
            depth -= 1
    names = _NAMES.findall(re.sub(r"[a-z]\w*\[[^\]]*\](\{[^}]*\})?", " ", inst.text[:end]))
    return [by_name[n] for n in names if n in by_name]


def _elements(shape: str) -> int:
    m = hlo.ARRAY_SHAPE.search(shape)
    return math.prod(int(d) for d in m.group(2).split(",") if d.strip()) if m else 0


def _updated_parameter(inst: Any, comp: Any, by_name: dict) -> int | None:
    """The entry parameter a collective's result is applied to, as a gradient is in an optimizer update:
    the first op that reads the result (through layout-only ops) and also reads a parameter with as many
    elements. None for an activation."""
    size = _elements(inst.shape)
    users: dict[str, list] = {}
    for other in comp.instructions:
        for operand in _operands(other, by_name):
            users.setdefault(operand.name, []).append(other)
    todo, seen = [inst.name], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for user in users.get(name, []):
            if user.opcode in _LAYOUT_OPS or user.opcode.endswith("-done"):
                todo.append(user.name)
                continue
            for operand in _operands(user, by_name):
                number = _trace_parameter(operand.name, by_name)
                if number is not None and _elements(operand.shape) == size:
                    return number
    return None


HOP_LATENCY = 1e-6  # seconds per ICI hop: "typically around 1us" (scaling-book, sharding.md)

_KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")


def _ici_chip(chip: str | hardware.Chip) -> hardware.Chip:
    chip = hardware.lookup(chip) if isinstance(chip, str) else chip
    if chip.ici_link_bandwidth is None:
        with_figures = ", ".join(c.name for c in hardware.chips() if c.ici_link_bandwidth)
        why = (
            f"it connects over {chip.interconnect}, not an ICI torus"
            if chip.kind == "gpu"
            else "the chip table has no per-link ICI figure for it"
        )
        raise ValueError(f"no ICI cost model for {chip.label}: {why}. Chips with per-axis figures: {with_figures}")
    return chip


def collective_seconds(
    kind: str,
    nbytes: float,
    axis_size: int | Sequence[int],
    chip: str | hardware.Chip,
    *,
    wraparound: bool | Sequence[bool],
    hop_latency: float = HOP_LATENCY,
) -> float:
    """Estimated seconds for one collective along a mesh axis of a TPU slice (scaling-book's model).

    ``nbytes`` is V, the whole array: an all-gather's gathered result, a
    reduce-scatter's unreduced input, the buffer of an all-reduce, all-to-all or
    permute (:attr:`Collective.volume` for one read from HLO). ``axis_size`` is
    the chips along the axis, or a tuple of sizes for a collective over several
    mesh axes. ``wraparound`` says whether that axis closes into a ring (one
    bool per axis for a tuple); ``chip.wraparound(slice_shape)`` gives it.

    all-gather, reduce-scatter: max(hops x hop_latency, (X-1)/X x V / W), with
    W = 2 x the one-way link bandwidth per wrapped axis, 1 x per axis without
    wraparound, summed over the axes; hops = X//2 around a ring, X-1 along a
    line. all-reduce: twice that. all-to-all: a quarter of the bandwidth term,
    ring or line.
    collective-permute: V over one link to a neighbour. A lower bound in the
    same sense as a roofline: no congestion, no overlap with compute.
    """
    if kind not in _KINDS:
        raise ValueError(f"unknown collective {kind!r}; the model knows {', '.join(_KINDS)}")
    sizes = tuple(axis_size) if isinstance(axis_size, (tuple, list)) else (axis_size,)
    if not sizes or any(not isinstance(n, numbers.Integral) or isinstance(n, bool) or n < 1 for n in sizes):
        raise ValueError(f"axis_size must be a positive integer or a tuple of them, got {axis_size!r}")
    sizes = tuple(int(n) for n in sizes)
    if isinstance(wraparound, bool):
        wraps = (wraparound,) * len(sizes)
    else:
        wraps = tuple(wraparound) if isinstance(wraparound, (tuple, list)) else ()
    if len(wraps) != len(sizes) or not all(isinstance(w, bool) for w in wraps):
        raise ValueError(f"wraparound must be one bool, or one per axis of {sizes}; got {wraparound!r}")
    if nbytes < 0 or hop_latency < 0:
        raise ValueError(f"bytes and hop_latency must not be negative, got {nbytes} and {hop_latency}")
    link = _ici_chip(chip).ici_link_bandwidth
    x = math.prod(sizes)
    if x == 1:
        return 0.0
    if kind == "collective-permute":
        return max(hop_latency, nbytes / link)
    bandwidth = sum(link * (2 if w else 1) for w in wraps)
    hops = sum(n // 2 if w else n - 1 for n, w in zip(sizes, wraps))
    moving = (x - 1) / x * nbytes / bandwidth
    if kind == "all-to-all":
        moving /= 4
    factor = 2 if kind == "all-reduce" else 1
    return factor * max(hops * hop_latency, moving)


def data_parallel_threshold(
    chip: str | hardware.Chip, axis_size: int | Sequence[int], *, wraparound: bool | Sequence[bool], grad_bytes: int = 2
) -> float:
    """Tokens per chip above which a data-parallel step stays compute bound.

    For a weight of P parameters the backward pass does 4 FLOPs per parameter
    per token (the weight gradient and the input gradient, 2 each), and the
    gradients (``grad_bytes`` each, bf16) are all-reduced along the data axis
    while it runs. Compute hides the all-reduce when tokens per chip exceed
    T_all-reduce(2P bytes) / (4P / C): C / W in the large-axis limit
    (scaling-book, training.md, "Data Parallelism": 2,550 on v5p). Latency
    is left out: P is large.
    """
    chip = _ici_chip(chip)
    per_param = collective_seconds("all-reduce", grad_bytes, axis_size, chip, wraparound=wraparound, hop_latency=0)
    return per_param / (4 / chip.peak_flops)


def tensor_parallel_limit(d_ff: int, chip: str | hardware.Chip, *, wraparound: bool, act_bytes: int = 2) -> int:
    """The largest tensor-parallel degree Y that keeps an MLP block compute bound along one axis.

    scaling-book's 1D tensor parallelism (training.md, "Tensor Parallelism"):
    each block all-gathers its [B, D] input and reduce-scatters its [B, D]
    output over Y chips, and does 4 B D F / Y FLOPs per chip in between. B and
    D cancel: compute bound while F / Y >= C x T_gather-plus-scatter per byte,
    about Y < F x W / C (F / 2,550 on v5p).
    """
    chip = _ici_chip(chip)
    if d_ff < 1:
        raise ValueError(f"d_ff must be a positive integer, got {d_ff}")

    def compute_bound(y: int) -> bool:
        comms = sum(
            collective_seconds(k, act_bytes, y, chip, wraparound=wraparound, hop_latency=0)
            for k in ("all-gather", "reduce-scatter")
        )
        return 4 * d_ff / (y * chip.peak_flops) >= comms

    y = 1
    while y < d_ff and compute_bound(y + 1):
        y += 1
    return y


def collective_table(
    found: Sequence[Collective],
    chips: Sequence[str] = ("v5e", "v5p", "v6e"),
    *,
    slices: Mapping[str, Sequence[int]] | None = None,
    devices: int | None = None,
) -> str:
    """Markdown: each collective, its bytes, and its estimated time on each chip.

    Each chip runs the program on a slice: ``slices[name]`` (``{"v5p": (2, 2, 2)}``),
    else the most compact slice of ``devices`` chips (``devices`` defaults to the
    largest group in ``found``): 2x4 for eight v5e or v6e chips, 2x2x2 for eight
    v5p chips, as Cloud TPU shapes them. A group of n chips is placed on whole
    axes of that slice (one axis of n if there is one, else the fewest axes whose
    sizes multiply to n), each with the wraparound ``Chip.wraparound`` gives the
    slice; a group smaller than an axis is a stretch of it, a line. "?" marks a
    group the slice cannot hold.
    """
    rows = [_ici_chip(c) for c in chips]  # a chip without an ICI model is a clear error here
    if devices is None:
        devices = max((c.group_size or 1 for c in found), default=1)
    head = ["collective", "result", "group", "V bytes", *[f"{c.label} µs" for c in rows]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    shapes = {c.name: tuple((slices or {}).get(c.name) or _compact_slice(c, devices)) for c in rows}
    if any(c.ici_wrap_at is None for c in rows):
        raise ValueError(
            f"no wraparound rule for {', '.join(c.label for c in rows if c.ici_wrap_at is None)} in the "
            "chip table; time its collectives with collective_seconds(..., wraparound=True or False)"
        )
    wraps_of = {c.name: c.wraparound(shapes[c.name]) for c in rows}
    for c in found:
        times = []
        for chip in rows:
            shape = shapes[chip.name]
            placed = _group_axes(c.group_size, shape, wraps_of[chip.name]) if c.group_size else None
            if placed is None:
                times.append("?")
                continue
            sizes, wraps = placed
            times.append(f"{collective_seconds(c.kind, c.volume, sizes, chip, wraparound=wraps) * 1e6:.2f}")
        lines.append(f"| {c.kind} | {c.result} | {c.group_size or '?'} | {c.volume:,.0f} | " + " | ".join(times) + " |")
    return "\n".join(lines)


def _compact_slice(chip: hardware.Chip, n: int) -> tuple[int, ...]:
    """The most compact slice of n chips (a power of two) on a chip's torus: (2, 4), (2, 2, 2), (4, 4, 8)."""
    dims = {"2D torus": 2, "3D torus": 3}.get(chip.ici_topology)
    if dims is None or n < 1 or n & (n - 1):
        raise ValueError(
            f"no standard {chip.label} slice of {n} chips to assume; pass slices={{{chip.name!r}: "
            f"shape}} with the slice's topology"
        )
    shape = [1] * dims
    for i in range(n.bit_length() - 1):
        shape[dims - 1 - i % dims] *= 2  # double the axes in turn, the last first
    return tuple(shape)


def _group_axes(n: int, shape: tuple[int, ...], wraps: tuple[bool, ...]):
    """The axes of a slice a group of n chips spans, as (sizes, wraparounds), or None if it cannot hold it."""
    axes = range(len(shape))
    for k in range(1, len(shape) + 1):
        fits = [combo for combo in itertools.combinations(axes, k) if math.prod(shape[i] for i in combo) == n]
        if fits:
            best = max(fits, key=lambda combo: sum(wraps[i] for i in combo))  # the best-connected placement
            return tuple(shape[i] for i in best), tuple(wraps[i] for i in best)
    if any(size % n == 0 for size in shape):  # part of one axis: a line, whatever the axis's wraparound
        return (n,), (False,)
    return None
