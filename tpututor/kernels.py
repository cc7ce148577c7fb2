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
* the FLOPs, and the kernel's place on the roofline of one JAX device (:meth:`KernelCost.on`,
  from the chip table in :mod:`tpututor.hardware`; on TPU7x a device is one of the chip's two
  TensorCores, so it gets half the chip's figures);
* a fixed cost per grid step, fitted to the Pallas matmul guide's published v5e measurements
  (:data:`GUIDE_V5E_MATMUL`, :func:`guide_overheads`), which the roofline alone misses.

The VMEM figure is a lower bound: Mosaic's own scratch and any intermediate values the compiler
keeps in VMEM (the f32 result of a ``jnp.dot`` before it is added to the accumulator) come on top.

:func:`check_tile` applies Mosaic's block-shape rule (the check ``_check_block_mappings`` in
``jax/_src/pallas/mosaic/lowering.py`` runs when a kernel is lowered for a TPU), which
interpret mode does not enforce.

Sources: the Pallas TPU guides ("Writing TPU kernels with Pallas", "TPU Pipelining", "Matrix
Multiplication", https://docs.jax.dev/en/latest/pallas/tpu/), the block-shape note of "Grids and
BlockSpecs" (https://docs.jax.dev/en/latest/pallas/grid_blockspec.html), and VMEM per TensorCore
from JAX's ``jax/_src/pallas/mosaic/tpu_info.py`` (JAX 0.10.2; the table at
https://docs.jax.dev/en/latest/pallas/tpu/hardware.html), read 2026-12-01.

Nothing here imports JAX: index maps are plain Python functions of the grid indices.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from . import hardware, roofline
from .validate import positive_ints

__all__ = [
    "VMEM_MIB",
    "LANES",
    "SUBLANES",
    "vmem_capacity",
    "check_tile",
    "tile_ok",
    "suggest_blocks",
    "grid_steps",
    "block_indices",
    "copies",
    "Operand",
    "KernelCost",
    "Placement",
    "device_roofline",
    "grid_cost",
    "elementwise_cost",
    "softmax_cost",
    "matmul_cost",
    "attention_cost",
    "causal_blocks",
    "GuideRun",
    "GUIDE_V5E_MATMUL",
    "GUIDE_SOURCE",
    "guide_cost",
    "guide_overheads",
    "plot_on_roofline",
]

# VMEM per TensorCore, MiB (jax/_src/pallas/mosaic/tpu_info.py in JAX 0.10.2, read 2026-12-01).
VMEM_MIB: dict[str, int] = {"v2": 16, "v3": 16, "v4": 16, "v5e": 128, "v5p": 64, "v6e": 128, "7x": 64}
LANES, SUBLANES = 128, 8  # a vector register is 8 sublanes x 128 lanes of 32-bit values
SOFTMAX_FLOPS_PER_ELEMENT = 5  # max compare, subtract, exp, add (row sum), divide; exp counted as one


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
        raise KeyError(
            f"no VMEM figure for {chip!r}; known: {', '.join(VMEM_MIB)} "
            "(on a TPU, pltpu.get_tpu_info().vmem_capacity_bytes gives it: JAX 0.8.1 and later, "
            "a table lookup by device kind)"
        )
    return VMEM_MIB[name] * 2**20


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _rank1_ok(b: int, a: int, packing: int) -> bool:
    # lowering.py, JAX 0.10.2: the whole array, a multiple of 8 x 128, or a power of two of at
    # least 128 x packing. JAX 0.7.2 accepts any multiple of 128 x packing, a superset of these.
    return b == a or b % (SUBLANES * LANES) == 0 or (_is_pow2(b) and b >= LANES * packing)


def _packing(dtype: str) -> int:
    bits = 32 if str(dtype) in ("bool", "bool_") else 8 * roofline.itemsize(dtype)
    return max(1, 32 // bits)


def _fits(array_shape: tuple[int, ...], block_shape: tuple[int, ...], dtype: str) -> list[str]:
    """What breaks Mosaic's rule, one phrase per broken dimension (empty: the block is allowed)."""
    if len(block_shape) == 1:
        b, a, packing = block_shape[0], array_shape[0], _packing(dtype)
        if _rank1_ok(b, a, packing):
            return []
        return [
            f"its only dimension {b} is not the array's full {a}, a multiple of {SUBLANES * LANES}, "
            f"or a power of two of at least {LANES * packing} (128 x {packing}: {dtype} packs {packing} "
            f"value{'s' if packing > 1 else ''} per 32 bits)"
        ]
    broken = []
    for axis, tile, which in ((-2, SUBLANES, "second to last"), (-1, LANES, "last")):
        b, a = block_shape[axis], array_shape[axis]
        if b % tile and b != a:
            broken.append(f"its {which} dimension {b} is neither a multiple of {tile} nor the array's full {a}")
    return broken


def _divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def _dim_rules(array_shape: tuple[int, ...], dtype: str) -> dict[int, tuple[Callable[[int], bool], int]]:
    """For each checked axis: the rule a block size must obey there, and its smallest tile."""
    if len(array_shape) == 1:
        a, packing = array_shape[0], _packing(dtype)
        return {0: (lambda d: _rank1_ok(d, a, packing), LANES * packing)}
    nd = len(array_shape)
    return {
        nd - 2: (lambda d, a=array_shape[-2]: d % SUBLANES == 0 or d == a, SUBLANES),
        nd - 1: (lambda d, a=array_shape[-1]: d % LANES == 0 or d == a, LANES),
    }


def suggest_blocks(
    array_shape: Sequence[int], block_shape: Sequence[int], dtype: str = "float32"
) -> dict[int, list[int]]:
    """For each axis where ``block_shape`` breaks Mosaic's rule, block sizes that obey it and
    divide the array's dimension, nearest to the given one first; the full dimension is always
    among them (last). Empty when the block is allowed."""
    array_shape, block_shape = _dims("array_shape", array_shape), _dims("block_shape", block_shape)
    if len(array_shape) != len(block_shape):
        raise ValueError(f"block {block_shape} and array {array_shape} have different numbers of dimensions")
    out = {}
    for axis, (ok, _) in _dim_rules(array_shape, dtype).items():
        b, a = block_shape[axis], array_shape[axis]
        if ok(b):
            continue
        dividing = [d for d in _divisors(a) if ok(d) and d != a]
        out[axis] = sorted(dividing, key=lambda d: (abs(d - b), -d))[:1] + [a]
    return out


def _suggest(a: int, choices: list[int], tile: int) -> str:
    text = "use " + " or ".join([f"{d} (divides {a})" for d in choices[:-1]] + [f"the full {a}"])
    if len(choices) == 1:  # no smaller block divides the array
        text += (
            f"; or pad the array to {-(-a // tile) * tile}, or keep a block of {tile} with a grid of "
            f"pl.cdiv({a}, {tile}) = {-(-a // tile)} steps (the last block partial: its padding is "
            "garbage on input and dropped on output)"
        )
    return text


def tile_ok(array_shape: Sequence[int], block_shape: Sequence[int], dtype: str = "float32") -> bool:
    """Whether Mosaic accepts this block shape for a VMEM operand (see :func:`check_tile`)."""
    try:
        check_tile(array_shape, block_shape, dtype)
    except ValueError as err:
        if "different numbers of dimensions" in str(err) or "positive integer" in str(err):
            raise
        return False
    return True


def check_tile(array_shape: Sequence[int], block_shape: Sequence[int], dtype: str = "float32") -> None:
    """Raise a ValueError, naming block sizes that work, unless Mosaic accepts the block shape.

    The rule Mosaic checks when it lowers a kernel for a TPU (``_check_block_mappings``):

    * rank 2 and more: the last block dimension a multiple of 128 or the array's, the second to
      last a multiple of 8 or the array's (for every dtype);
    * rank 1: the array's whole dimension, a multiple of 1024, or a power of two of at least
      ``128 * (32 // bits)`` (256 for bf16). This is JAX 0.10's rule; JAX 0.7.2 accepts any
      multiple of ``128 * (32 // bits)``, so a block that passes here passes on both.

    Suggested fixes divide the array's dimension (a kernel whose grid is ``shape // block``
    would silently skip the rest otherwise). Interpret mode runs blocks that break the rule; a
    TPU compile rejects them. Blocks of whole arrays in SMEM or HBM (``pl.ANY``) are not blocked
    operands and are not checked here.
    """
    array_shape, block_shape = _dims("array_shape", array_shape), _dims("block_shape", block_shape)
    if len(array_shape) != len(block_shape):
        raise ValueError(f"block {block_shape} and array {array_shape} have different numbers of dimensions")
    broken = _fits(array_shape, block_shape, dtype)
    if not broken:
        return
    rules, fixes = _dim_rules(array_shape, dtype), suggest_blocks(array_shape, block_shape, dtype)
    text = [
        f"{why}: {_suggest(array_shape[axis], choices, rules[axis][1])}"
        for why, (axis, choices) in zip(broken, sorted(fixes.items()))
    ]
    raise ValueError(f"block {block_shape} of a {dtype} array {array_shape}: " + "; ".join(text))


def grid_steps(grid: Sequence[int]) -> Iterator[tuple[int, ...]]:
    """The grid's steps in lexicographic order, last axis fastest: the order of the Pallas TPU
    guides' model of one TensorCore, and what the pipeline's copy counts assume.

    TPU interpret mode does not keep it on ``"parallel"`` axes: it visits them in a random
    permutation (``InterpretParams.random_seed``; the seed ``None`` is the same as 0)."""
    grid = _dims("grid", grid)
    return itertools.product(*(range(g) for g in grid))


def _index(index_map: Callable[..., Sequence[int]], step: tuple[int, ...], ndim: int | None) -> tuple[int, ...]:
    got = index_map(*step)
    got = tuple(got) if isinstance(got, (tuple, list)) else (got,)
    if ndim is not None and len(got) != ndim:
        raise ValueError(f"index_map returned {len(got)} block indices {got} for a {ndim}-dimensional block")
    return tuple(int(g) for g in got)


def block_indices(
    grid: Sequence[int], index_map: Callable[..., Sequence[int]], ndim: int | None = None
) -> list[tuple[int, ...]]:
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
                raise ValueError(
                    f"{self.name}: block {block} does not divide the array {shape}; "
                    "choose block sizes that divide each dimension (or pad the array)"
                )
        roofline.itemsize(self.dtype)  # a clear error for an unknown dtype
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "block", block)

    @property
    def block_bytes(self) -> int:
        return _prod(self.block) * roofline.itemsize(self.dtype)

    @property
    def array_bytes(self) -> int:
        return _prod(self.shape) * roofline.itemsize(self.dtype)


def device_roofline(chip: str | hardware.Chip, dtype: str = "bfloat16") -> roofline.Roofline:
    """The bf16 roofline of one JAX device of ``chip``: the one a ``pallas_call`` runs on.

    The chip table's figures are per chip. Where a chip shows its TensorCores as separate JAX
    devices (two per chip on TPU7x, and on v2 and v3), a kernel gets one core's share: half the
    peak and half the bandwidth (the ridge point is unchanged). Megacore chips (v4, v5p) are one
    device of two cores.
    """
    found = hardware.lookup(chip) if isinstance(chip, str) else chip
    roof = roofline.Roofline.of(found, dtype)
    per = found.jax_devices_per_chip or 1
    if per == 1:
        return roof
    return roofline.Roofline(
        f"{roof.label}, per JAX device (1/{per} chip)", roof.peak_flops / per, roof.bandwidth / per
    )


@dataclass(frozen=True)
class Placement:
    """A kernel on one JAX device's roofline: a lower bound on its time, what bounds it, and an
    estimate with a fixed cost per grid step added."""

    chip: str
    intensity: float
    ridge: float
    bound: str  # "memory" or "compute"
    attainable_flops: float
    seconds: float  # max(FLOPs / peak, HBM bytes / bandwidth): no overlap loss, no overheads
    fraction_of_peak: float
    steps: int = 0  # grid steps the kernel runs
    step_overhead: float = 0.0  # seconds per grid step assumed (0: the pure roofline)

    @property
    def overhead_seconds(self) -> float:
        return self.steps * self.step_overhead

    @property
    def estimate(self) -> float:
        """The roofline bound plus ``steps x step_overhead``: the model :func:`guide_overheads` fits."""
        return self.seconds + self.overhead_seconds


@dataclass(frozen=True)
class KernelCost:
    """A kernel's FLOPs, HBM bytes per operand and VMEM, counted from its grid and BlockSpecs."""

    name: str
    grid: tuple[int, ...]
    flops: int
    reads: Mapping[str, int]
    writes: Mapping[str, int]
    vmem: int  # a lower bound: double-buffered blocks and declared scratch only
    blocks_computed: int

    @property
    def hbm_bytes(self) -> int:
        return sum(self.reads.values()) + sum(self.writes.values())

    @property
    def intensity(self) -> float:
        """FLOPs per HBM byte."""
        return self.flops / self.hbm_bytes

    def fits(self, budget_bytes: int) -> bool:
        """Whether the pipeline's VMEM (double-buffered blocks and scratch) fits ``budget_bytes``.

        A necessary condition, not a sufficient one: :attr:`vmem` is a lower bound (Mosaic's
        internal scratch and intermediate values come on top)."""
        return self.vmem <= budget_bytes

    @property
    def steps(self) -> int:
        """Grid steps, computing or not (a skipped step still costs a step); 0 without a grid."""
        return _prod(self.grid) if self.grid else 0

    def on(self, chip: str | hardware.Chip, *, step_overhead: float = 0.0) -> Placement:
        """Where this kernel sits on the bf16 roofline of one JAX device of ``chip``.

        ``step_overhead`` (seconds per grid step) adds the fixed cost of each step to
        :attr:`Placement.estimate`; :func:`guide_overheads` fits it for a v5e.
        """
        if not step_overhead >= 0:
            raise ValueError(f"step_overhead must be a non-negative number of seconds, got {step_overhead!r}")
        roof = device_roofline(chip, "bfloat16")
        seconds = max(self.flops / roof.peak_flops, self.hbm_bytes / roof.bandwidth)
        attainable = roof.attainable(self.intensity)
        return Placement(
            roof.label,
            self.intensity,
            roof.ridge_point,
            roof.bound(self.intensity),
            attainable,
            seconds,
            attainable / roof.peak_flops,
            self.steps,
            float(step_overhead),
        )


def grid_cost(
    name: str,
    grid: Sequence[int],
    operands: Sequence[Operand],
    *,
    flops_per_step: int,
    scratch_bytes: int = 0,
    computes: Callable[..., bool] | None = None,
    buffers: int = 2,
) -> KernelCost:
    """Count a kernel's traffic by walking its grid, as the TPU pipeline does.

    ``flops_per_step`` is what one grid step computes; ``computes(*step)``, if given, says which
    steps compute at all (a causal kernel skips blocks above the diagonal). ``buffers`` is how
    many VMEM buffers each blocked operand gets (2: double buffering).
    """
    grid = _dims("grid", grid)
    positive_ints(buffers=buffers)
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
    positive_ints(**{what: size, f"block for {what}": block})
    if size % block:
        raise ValueError(f"block {block} does not divide {what}={size}; choose a block size that divides it")
    return size // block


def elementwise_cost(
    shape: Sequence[int], block: Sequence[int], *, inputs: int = 2, dtype: str = "float32", flops_per_element: int = 1
) -> KernelCost:
    """An elementwise kernel on 2-D blocks: every input read once, the output written once."""
    shape, block = _dims("shape", shape), _dims("block", block)
    positive_ints(inputs=inputs, flops_per_element=flops_per_element)
    if len(shape) != 2 or len(block) != 2:
        raise ValueError(f"elementwise_cost takes 2-D shapes, got {shape} and {block}")
    grid = (_divides("rows", shape[0], block[0]), _divides("cols", shape[1], block[1]))
    ops = [Operand(f"x{i}", shape, block, lambda i, j: (i, j), dtype) for i in range(inputs)]
    ops.append(Operand("out", shape, block, lambda i, j: (i, j), dtype, output=True))
    return grid_cost("elementwise", grid, ops, flops_per_step=_prod(block) * flops_per_element)


def softmax_cost(rows: int, cols: int, block_rows: int, dtype: str = "float32") -> KernelCost:
    """A row softmax with whole rows per block: x read once, the result written once."""
    grid = (_divides("rows", rows, block_rows),)
    ops = [
        Operand("x", (rows, cols), (block_rows, cols), lambda i: (i, 0), dtype),
        Operand("out", (rows, cols), (block_rows, cols), lambda i: (i, 0), dtype, output=True),
    ]
    return grid_cost("row softmax", grid, ops, flops_per_step=SOFTMAX_FLOPS_PER_ELEMENT * block_rows * cols)


def matmul_cost(
    m: int,
    k: int,
    n: int,
    bm: int,
    bk: int,
    bn: int,
    *,
    dtype: str = "bfloat16",
    out_dtype: str | None = None,
    epilogue_flops_per_element: int = 0,
) -> KernelCost:
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
    return KernelCost(
        "tiled matmul",
        (gm, gn, gk),
        2 * m * k * n + epilogue,
        {"x": x_reads, "y": y_reads},
        {"out": m * n * out_size},
        vmem,
        gm * gn * gk,
    )


def causal_blocks(seq_q: int, seq_k: int, bq: int, bk: int) -> int:
    """How many (query block, key block) pairs hold at least one unmasked score (key <= query)."""
    gq, gk = _divides("seq_q", seq_q, bq), _divides("seq_k", seq_k, bk)
    return sum(min(gk, ((i + 1) * bq - 1) // bk + 1) for i in range(gq))


def attention_cost(
    seq_q: int, seq_k: int, d: int, bq: int, bk: int, *, dtype: str = "float32", causal: bool = False
) -> KernelCost:
    """Flash attention blocked over keys: grid (seq_q/bq, seq_k/bk), keys last.

    Q's block stays for a whole row of the grid (read once); K and V are read once per query
    block. FLOPs are the two matmuls' (4 bq bk d per block computed). With ``causal``, blocks
    above the diagonal are skipped and K/V's index map is clamped to the last needed block, so
    skipped steps neither compute nor copy.
    """
    gq, gk = _divides("seq_q", seq_q, bq), _divides("seq_k", seq_k, bk)
    positive_ints(d=d)

    def last_needed(i: int) -> int:
        return min(gk - 1, ((i + 1) * bq - 1) // bk)

    kv_map = (lambda i, j: (min(j, last_needed(i)), 0)) if causal else (lambda i, j: (j, 0))
    ops = [
        Operand("q", (seq_q, d), (bq, d), lambda i, j: (i, 0), dtype),
        Operand("k", (seq_k, d), (bk, d), kv_map, dtype),
        Operand("v", (seq_k, d), (bk, d), kv_map, dtype),
        Operand("out", (seq_q, d), (bq, d), lambda i, j: (i, 0), dtype, output=True),
    ]
    scratch = 4 * (2 * bq * LANES + bq * d)  # running max and sum (lane-replicated) and the accumulator, f32
    computes = (lambda i, j: j <= last_needed(i)) if causal else None
    return grid_cost(
        "causal flash attention" if causal else "flash attention",
        (gq, gk),
        ops,
        flops_per_step=4 * bq * bk * d,
        scratch_bytes=scratch,
        computes=computes,
    )


@dataclass(frozen=True)
class GuideRun:
    """One bf16 matmul the Pallas TPU matmul guide timed on a v5e: a cube of side ``size``, its
    kernel's blocks (None: XLA's ``jnp.matmul``), and the time the guide printed."""

    size: int
    blocks: tuple[int, int, int] | None
    seconds: float

    @property
    def label(self) -> str:
        return "XLA" if self.blocks is None else "x".join(str(b) for b in self.blocks)


GUIDE_SOURCE = (
    "Pallas TPU matrix multiplication guide, docs/pallas/tpu/matmul.ipynb in jax-ml/jax at "
    "cec06d116c05 (https://docs.jax.dev/en/latest/pallas/tpu/matmul.html), read 2026-12-01"
)
# The guide's first timing cells (plain kernel, then jnp.matmul), "Matmul time" in seconds, bf16,
# jnp.ones inputs, timed with timeit around jax.block_until_ready (so Python dispatch is included).
GUIDE_V5E_MATMUL: tuple[GuideRun, ...] = (
    GuideRun(1024, (128, 128, 128), 0.00029766598949208854),
    GuideRun(4096, (128, 128, 128), 0.011771515250438824),
    GuideRun(8192, (128, 128, 128), 0.09183577066054567),
    GuideRun(1024, (512, 1024, 1024), 0.00012708659982308746),
    GuideRun(4096, (512, 1024, 1024), 0.00088908776990138),
    GuideRun(8192, (512, 1024, 1024), 0.006099433819763363),
    GuideRun(1024, None, 0.00011943008983507753),
    GuideRun(4096, None, 0.0008272899803705514),
    GuideRun(8192, None, 0.006047147869830951),
)


def guide_cost(run: GuideRun) -> KernelCost:
    """The traffic and FLOPs of one of the guide's runs: the tiled kernel's counts, or for XLA the
    textbook minimum (each operand read once, the result written once) with no grid."""
    if run.blocks is None:
        n = run.size
        return KernelCost("XLA matmul", (), 2 * n**3, {"x": n * n * 2, "y": n * n * 2}, {"out": n * n * 2}, 0, 0)
    return matmul_cost(run.size, run.size, run.size, *run.blocks)


def guide_overheads(runs: Sequence[GuideRun] = GUIDE_V5E_MATMUL, chip: str = "v5e") -> tuple[float, float]:
    """``(fixed, per_step)`` seconds fitted to the guide's v5e timings with two of its runs.

    * ``fixed``: what a call costs beyond its roofline bound when its kernel is tiny: XLA's
      smallest matmul (1024^3, 11 us of compute) took 119 us, mostly the guide's timer (Python
      dispatch and the wait).
    * ``per_step``: the 128-block kernel at 8192^3 runs 262,144 grid steps; what it took beyond
      its roofline bound and ``fixed``, divided by its steps, is the cost of one grid step.

    The other runs check the fit (lesson 10b (Pallas matmul) asserts it within 10%). A fit, not a documented figure.
    """
    by = {(r.size, r.blocks): r for r in runs}
    try:
        small_xla, many_steps = by[(1024, None)], by[(8192, (128, 128, 128))]
    except KeyError as missing:
        raise ValueError(f"guide_overheads needs the guide's runs {missing}") from None
    fixed = small_xla.seconds - guide_cost(small_xla).on(chip).seconds
    big = guide_cost(many_steps)
    per_step = (many_steps.seconds - big.on(chip).seconds - fixed) / big.steps
    return fixed, per_step


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
