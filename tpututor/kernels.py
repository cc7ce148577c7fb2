"""What a Pallas TPU kernel moves and computes, counted from its grid and BlockSpecs.

Interpret mode runs a kernel on a CPU and says nothing about its speed on a TPU. What a
kernel's grid and BlockSpecs do say exactly is its *schedule*: which block of every operand
each grid step uses. The grid runs as a loop, last axis fastest, and the pipeline copies an
input block from HBM into VMEM when its block index changes from one step to the next
(consecutive steps that use the same block skip the copy); an output block is written back
when the output block index changes. From that schedule this module counts:

* the HBM traffic of every operand (:func:`grid_cost`, and closed forms for the lesson's
  kernels: :func:`elementwise_cost`, :func:`softmax_cost`, :func:`matmul_cost`,
  :func:`attention_cost`);
* the VMEM the pipeline holds: two buffers per blocked operand (the next copy overlaps the
  current step) plus the kernel's scratch;
* the FLOPs, and the kernel's place on a chip's roofline (:meth:`KernelCost.on`, from the
  chip table in :mod:`tpututor.hardware`).

:func:`check_tile` applies the TPU's block-shape rule (last two block dimensions divisible by
8 and 128, or equal to the array's), which interpret mode does not enforce.

Sources: the Pallas TPU guides ("Writing TPU kernels with Pallas", "TPU Pipelining", "Matrix
Multiplication", https://docs.jax.dev/en/latest/pallas/tpu/), and VMEM per TensorCore from
JAX's ``jax/_src/pallas/mosaic/tpu_info.py`` (the table at
https://docs.jax.dev/en/latest/pallas/tpu/hardware.html), read 2026-12-01.

Nothing here imports JAX: index maps are plain Python functions of the grid indices.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterator, Mapping, Sequence

from . import hardware, roofline

__all__ = [
    "VMEM_MIB", "LANES", "SUBLANES", "vmem_capacity", "check_tile", "grid_steps", "block_indices", "copies",
    "Operand", "KernelCost", "Placement", "grid_cost", "elementwise_cost", "softmax_cost", "matmul_cost",
    "attention_cost", "causal_blocks", "plot_on_roofline",
]

# VMEM per TensorCore, MiB (jax/_src/pallas/mosaic/tpu_info.py, read 2026-12-01).
VMEM_MIB: dict[str, int] = {"v4": 16, "v5e": 128, "v5p": 64, "v6e": 128}
LANES, SUBLANES = 128, 8  # a vector register is 8 sublanes x 128 lanes of 32-bit values
SOFTMAX_FLOPS_PER_ELEMENT = 5  # max compare, subtract, exp, add (row sum), divide; exp counted as one


def _positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def _dims(name: str, dims: Sequence[int]) -> tuple[int, ...]:
    dims = tuple(dims)
    if not dims:
        raise ValueError(f"{name} must have at least one dimension")
    for d in dims:
        if not isinstance(d, int) or isinstance(d, bool) or d <= 0:
            raise ValueError(f"every dimension of {name} must be a positive integer, got {dims}")
    return dims


def _prod(dims: Sequence[int]) -> int:
    out = 1
    for d in dims:
        out *= d
    return out


def vmem_capacity(chip: str) -> int:
    """VMEM bytes per TensorCore of a chip in :data:`VMEM_MIB` (table names or JAX device kinds)."""
    found = hardware.find(chip) if isinstance(chip, str) else None
    name = found.name if found is not None else chip
    if name not in VMEM_MIB:
        raise KeyError(f"no VMEM figure for {chip!r}; known: {', '.join(VMEM_MIB)} "
                       "(on a TPU, pltpu.get_tpu_info().vmem_capacity_bytes reads it, JAX 0.8.2 and later)")
    return VMEM_MIB[name] * 2**20


def check_tile(array_shape: Sequence[int], block_shape: Sequence[int]) -> None:
    """Raise a ValueError unless a block shape obeys the TPU's rule for its last two dimensions.

    Each of the last two block dimensions must be a multiple of 8 (second to last) and 128
    (last), or equal the array's dimension. Interpret mode runs blocks that break the rule; a
    TPU compile rejects them.
    """
    array_shape, block_shape = _dims("array_shape", array_shape), _dims("block_shape", block_shape)
    if len(array_shape) != len(block_shape):
        raise ValueError(f"block {block_shape} and array {array_shape} have different numbers of dimensions")
    rules = [(-1, LANES, "last")] + ([(-2, SUBLANES, "second to last")] if len(block_shape) > 1 else [])
    for axis, tile, which in rules:
        b, a = block_shape[axis], array_shape[axis]
        if b % tile and b != a:
            fix = max(tile, b // tile * tile)
            raise ValueError(
                f"block {block_shape}: its {which} dimension {b} is neither a multiple of {tile} nor the array's "
                f"full {a}; use {fix} (a multiple of {tile}) or {a}")


def grid_steps(grid: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """The grid's steps in the order a TensorCore runs them: lexicographic, last axis fastest."""
    grid = _dims("grid", grid)
    return itertools.product(*(range(g) for g in grid))


def _index(index_map: Callable[..., Sequence[int]], step: tuple[int, ...], ndim: int | None) -> tuple[int, ...]:
    got = index_map(*step)
    got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
    if ndim is not None and len(got) != ndim:
        raise ValueError(f"index_map returned {len(got)} block indices {got} for a {ndim}-dimensional block")
    return tuple(int(g) for g in got)


def block_indices(grid: Sequence[int], index_map: Callable[..., Sequence[int]],
                  ndim: int | None = None) -> list[tuple[int, ...]]:
    """The block index an operand uses at every grid step, in step order."""
    return [_index(index_map, step, ndim) for step in grid_steps(grid)]


def copies(grid: Sequence[int], index_map: Callable[..., Sequence[int]], ndim: int | None = None) -> int:
    """How many times the pipeline moves this operand's block: once per change of block index.

    For an input that is a copy HBM -> VMEM; for an output, a write-back VMEM -> HBM (one per
    run of consecutive steps on the same output block).
    """
    count, previous = 0, None
    for index in block_indices(grid, index_map, ndim):
        if index != previous:
            count += 1
            previous = index
    return count


@dataclass(frozen=True)
class Operand:
    """One ``pl.BlockSpec``: the array it slices, its block shape, its index map, its dtype."""

    name: str
    shape: tuple[int, ...]
    block: tuple[int, ...]
    index_map: Callable[..., Sequence[int]]
    dtype: str = "float32"
    output: bool = False

    def __post_init__(self) -> None:
        shape, block = _dims(f"{self.name}'s shape", self.shape), _dims(f"{self.name}'s block", self.block)
        if len(shape) != len(block):
            raise ValueError(f"{self.name}: block {block} and array {shape} have different numbers of dimensions")
        for a, b in zip(shape, block):
            if a % b:
                raise ValueError(f"{self.name}: block {block} does not divide the array {shape}; "
                                 "choose block sizes that divide each dimension (or pad the array)")
        roofline.itemsize(self.dtype)  # a clear error for an unknown dtype
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "block", block)

    @property
    def block_bytes(self) -> int:
        return _prod(self.block) * roofline.itemsize(self.dtype)

    @property
    def array_bytes(self) -> int:
        return _prod(self.shape) * roofline.itemsize(self.dtype)


@dataclass(frozen=True)
class Placement:
    """A kernel on one chip's roofline: a lower bound on its time, and what bounds it."""

    chip: str
    intensity: float
    ridge: float
    bound: str  # "memory" or "compute"
    attainable_flops: float
    seconds: float  # max(FLOPs / peak, HBM bytes / bandwidth): no overlap loss, no overheads
    fraction_of_peak: float


@dataclass(frozen=True)
class KernelCost:
    """A kernel's FLOPs, HBM bytes per operand and VMEM, counted from its grid and BlockSpecs."""

    name: str
    grid: tuple[int, ...]
    flops: int
    reads: Mapping[str, int]
    writes: Mapping[str, int]
    vmem: int
    blocks_computed: int

    @property
    def hbm_bytes(self) -> int:
        return sum(self.reads.values()) + sum(self.writes.values())

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte."""
        return self.flops / self.hbm_bytes

    def fits(self, budget_bytes: int) -> bool:
        """Whether the pipeline's VMEM (double-buffered blocks and scratch) fits ``budget_bytes``."""
        return self.vmem <= budget_bytes

    def on(self, chip: str | hardware.Chip) -> Placement:
        """Where this kernel sits on ``chip``'s bf16 roofline."""
        roof = roofline.Roofline.of(chip, "bfloat16")
        seconds = max(self.flops / roof.peak_flops, self.hbm_bytes / roof.bandwidth)
        attainable = roof.attainable(self.intensity)
        return Placement(roof.label, self.intensity, roof.ridge_point, roof.bound(self.intensity), attainable,
                         seconds, attainable / roof.peak_flops)


def grid_cost(name: str, grid: Sequence[int], operands: Sequence[Operand], *, flops_per_step: int,
              scratch_bytes: int = 0, computes: Callable[..., bool] | None = None, buffers: int = 2) -> KernelCost:
    """Count a kernel's traffic by walking its grid, as the TPU pipeline does.

    ``flops_per_step`` is what one grid step computes; ``computes(*step)``, if given, says which
    steps compute at all (a causal kernel skips blocks above the diagonal). ``buffers`` is how
    many VMEM buffers each blocked operand gets (2: double buffering).
    """
    grid = _dims("grid", grid)
    _positive(buffers=buffers)
    if not isinstance(flops_per_step, int) or flops_per_step < 0:
        raise ValueError(f"flops_per_step must be a non-negative integer, got {flops_per_step!r}")
    if scratch_bytes < 0:
        raise ValueError(f"scratch_bytes must be non-negative, got {scratch_bytes!r}")
    names = [op.name for op in operands]
    if len(set(names)) != len(names):
        raise ValueError(f"operand names must be unique, got {names}")
    reads, writes = {}, {}
    for op in operands:
        moved = copies(grid, op.index_map, len(op.block)) * op.block_bytes
        (writes if op.output else reads)[op.name] = moved
    computed = sum(1 for step in grid_steps(grid) if computes is None or computes(*step))
    vmem = buffers * sum(op.block_bytes for op in operands) + scratch_bytes
    return KernelCost(name, grid, flops_per_step * computed, reads, writes, vmem, computed)


def _divides(what: str, size: int, block: int) -> int:
    _positive(**{what: size, f"block for {what}": block})
    if size % block:
        raise ValueError(f"block {block} does not divide {what}={size}; choose a block size that divides it")
    return size // block


def elementwise_cost(shape: Sequence[int], block: Sequence[int], *, inputs: int = 2, dtype: str = "float32",
                     flops_per_element: int = 1) -> KernelCost:
    """An elementwise kernel on 2-D blocks: every input read once, the output written once."""
    shape, block = _dims("shape", shape), _dims("block", block)
    _positive(inputs=inputs, flops_per_element=flops_per_element)
    if len(shape) != 2 or len(block) != 2:
        raise ValueError(f"elementwise_cost takes 2-D shapes, got {shape} and {block}")
    grid = (_divides("rows", shape[0], block[0]), _divides("cols", shape[1], block[1]))
    ops = [Operand(f"x{i}", shape, block, lambda i, j: (i, j), dtype) for i in range(inputs)]
    ops.append(Operand("out", shape, block, lambda i, j: (i, j), dtype, output=True))
    return grid_cost("elementwise", grid, ops, flops_per_step=_prod(block) * flops_per_element)


def softmax_cost(rows: int, cols: int, block_rows: int, dtype: str = "float32") -> KernelCost:
    """A row softmax with whole rows per block: x read once, the result written once."""
    grid = (_divides("rows", rows, block_rows),)
    ops = [Operand("x", (rows, cols), (block_rows, cols), lambda i: (i, 0), dtype),
           Operand("out", (rows, cols), (block_rows, cols), lambda i: (i, 0), dtype, output=True)]
    return grid_cost("row softmax", grid, ops, flops_per_step=SOFTMAX_FLOPS_PER_ELEMENT * block_rows * cols)


def matmul_cost(m: int, k: int, n: int, bm: int, bk: int, bn: int, *, dtype: str = "bfloat16",
                out_dtype: str | None = None, epilogue_flops_per_element: int = 0) -> KernelCost:
    """The tiled matmul: grid (m/bm, n/bn, k/bk), k last, an f32 (bm, bn) accumulator in VMEM.

    Closed form of what :func:`grid_cost` counts (the tests check they agree): x's (bm, bk)
    block changes every step unless k fits one block, so x is read n/bn times; y is read m/bm
    times unless it is a single block column; the output is written once.
    """
    gm, gn, gk = _divides("m", m, bm), _divides("n", n, bn), _divides("k", k, bk)
    size, out_size = roofline.itemsize(dtype), roofline.itemsize(out_dtype or dtype)
    x_reads = m * k * size * (gn if gk > 1 else 1)
    y_reads = k * n * size * (gm if gk > 1 or gn > 1 else 1)
    epilogue = epilogue_flops_per_element * m * n
    vmem = 2 * (bm * bk * size + bk * bn * size + bm * bn * out_size) + bm * bn * 4
    return KernelCost("tiled matmul", (gm, gn, gk), 2 * m * k * n + epilogue, {"x": x_reads, "y": y_reads},
                      {"out": m * n * out_size}, vmem, gm * gn * gk)


def causal_blocks(seq_q: int, seq_k: int, bq: int, bk: int) -> int:
    """How many (query block, key block) pairs hold at least one unmasked score (key <= query)."""
    gq, gk = _divides("seq_q", seq_q, bq), _divides("seq_k", seq_k, bk)
    return sum(min(gk, ((i + 1) * bq - 1) // bk + 1) for i in range(gq))


def attention_cost(seq_q: int, seq_k: int, d: int, bq: int, bk: int, *, dtype: str = "float32",
                   causal: bool = False) -> KernelCost:
    """Flash attention blocked over keys: grid (seq_q/bq, seq_k/bk), keys last.

    Q's block stays for a whole row of the grid (read once); K and V are read once per query
    block. FLOPs are the two matmuls' (4 bq bk d per block computed). With ``causal``, blocks
    above the diagonal are skipped and K/V's index map is clamped to the last needed block, so
    skipped steps neither compute nor copy.
    """
    gq, gk = _divides("seq_q", seq_q, bq), _divides("seq_k", seq_k, bk)
    _positive(d=d)

    def last_needed(i: int) -> int:
        return min(gk - 1, ((i + 1) * bq - 1) // bk)

    kv_map = (lambda i, j: (min(j, last_needed(i)), 0)) if causal else (lambda i, j: (j, 0))
    ops = [Operand("q", (seq_q, d), (bq, d), lambda i, j: (i, 0), dtype),
           Operand("k", (seq_k, d), (bk, d), kv_map, dtype),
           Operand("v", (seq_k, d), (bk, d), kv_map, dtype),
           Operand("out", (seq_q, d), (bq, d), lambda i, j: (i, 0), dtype, output=True)]
    scratch = 4 * (2 * bq * LANES + bq * d)  # running max and sum (lane-replicated) and the accumulator, f32
    computes = (lambda i, j: j <= last_needed(i)) if causal else None
    return grid_cost("causal flash attention" if causal else "flash attention", (gq, gk), ops,
                     flops_per_step=4 * bq * bk * d, scratch_bytes=scratch, computes=computes)


def plot_on_roofline(costs: Mapping[str, KernelCost], chips: Sequence[str] = ("v5e", "v6e"), *, ax=None):
    """The chips' bf16 roofs and each kernel at its intensity and attainable FLOP/s (estimates)."""
    import matplotlib.pyplot as plt

    if not costs:
        raise ValueError("nothing to plot: pass {label: KernelCost}")
    roofs = [roofline.Roofline.of(c, "bfloat16") for c in chips]
    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.5))
    lo = min(c.intensity for c in costs.values()) / 4
    hi = max([c.intensity for c in costs.values()] + [r.ridge_point for r in roofs]) * 3
    roofline.plot(roofs, ax=ax, intensity_range=(lo, hi))
    for label, cost in costs.items():
        ys = [r.attainable(cost.intensity) for r in roofs]
        ax.scatter([cost.intensity] * len(ys), ys, marker="D", s=30, zorder=3, label=f"{label} (estimate)")
    ax.set_title("Kernels on the roofline: estimates from their BlockSpecs, not measurements")
    ax.legend(fontsize=7, loc="lower right")
    return ax
