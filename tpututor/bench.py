"""Timing that is right on every backend.

Each measurement: inputs made on the device first; compile timed on its own
(JAX compiles ahead of time; torch_xla and TensorFlow compile inside the first
call, reported as ``first_call_seconds``); warm-up; then several timed calls,
each stopped only when the device has finished (``block_until_ready`` for JAX,
``torch_xla.sync()`` and ``wait_device_ops()`` for torch_xla,
``torch.cuda.synchronize()`` for CUDA torch, ``sync_devices()`` for TF). The
result is a tidy :class:`Record` with the median, the spread and the FLOP/s as
a share of the device's peak from :mod:`tpututor.hardware`.

Frameworks are imported when first used, never at import time.
"""

from __future__ import annotations

import functools
import os
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Sequence

from . import frameworks, hardware, roofline

__all__ = ["Record", "UnsupportedError", "FRAMEWORKS", "DTYPES", "OPS", "run", "matmul", "sweep",
           "jax_function", "time_calls", "available", "check_dtype", "table"]

FRAMEWORKS = ("jax", "numpy", "torch", "torch_xla", "tensorflow")
DTYPES = ("float32", "bfloat16", "float16", "int8", "float64")


class UnsupportedError(ValueError):
    """This framework or device cannot run the op in this dtype; the message says why."""


@dataclass
class Record:
    """One measurement. ``seconds`` is the median of the timed calls."""

    framework: str
    device: str
    platform: str
    op: str
    shapes: list[list[int]]
    dtype: str
    size: int | None
    seconds: float
    min_seconds: float
    max_seconds: float
    repeats: int
    compile_seconds: float | None
    first_call_seconds: float
    flops: float
    bytes: float
    flops_per_s: float
    bytes_per_s: float
    intensity: float
    peak_flops: float | None
    percent_of_peak: float | None
    peak_basis: str
    times: list[float] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return asdict(self)


# --------------------------------------------------------------------------- ops

@dataclass(frozen=True)
class Op:
    name: str
    fn: Callable[[Any, Any], Any]
    shapes: Callable[[int, int, int], list[tuple[int, int]]]
    flops: Callable[[int, int, int], int]
    bytes: Callable[[int, int, int, str], int]


OPS: dict[str, Op] = {
    "matmul": Op("matmul", lambda a, b: a @ b, lambda m, k, n: [(m, k), (k, n)],
                 roofline.matmul_flops,
                 lambda m, k, n, dt: roofline.matmul_bytes(m, k, n, dt, "int32" if dt == "int8" else dt)),
    "add": Op("add", lambda a, b: a + b, lambda m, k, n: [(m, n), (m, n)],
              lambda m, k, n: roofline.elementwise_flops(m * n),
              lambda m, k, n, dt: roofline.elementwise_bytes(m * n, 2, 1, dt)),
}


# --------------------------------------------------------------------------- timing

def time_calls(call: Callable[[], Any], sync: Callable[[Any], Any], *, warmup: int = 1,
               repeats: int = 5) -> tuple[float, list[float]]:
    """Time ``call`` until ``sync`` says the device is done: (first call seconds, timed seconds).

    The first call (which may compile) is timed on its own and counts as one
    warm-up run; ``warmup - 1`` more untimed runs follow, then ``repeats`` timed ones.
    """
    if repeats < 1 or warmup < 1:
        raise ValueError(f"repeats and warmup must be at least 1, got repeats={repeats}, warmup={warmup}")
    t0 = time.perf_counter()
    sync(call())
    first = time.perf_counter() - t0
    for _ in range(warmup - 1):
        sync(call())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sync(call())
        times.append(time.perf_counter() - t0)
    return first, times


# --------------------------------------------------------------------------- backends

@dataclass
class _Prepared:
    call: Callable[[], Any]
    sync: Callable[[Any], Any]
    device: str
    platform: str
    compile_seconds: float | None = None


def _jax(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    _refuse_second_tpu_owner("jax", "torch_xla")
    jax = _load("jax")
    import jax.numpy as jnp

    device = jax.devices()[0]
    if dtype == "float64" and not jax.config.jax_enable_x64:
        raise UnsupportedError("JAX computes float64 only with jax.config.update('jax_enable_x64', True)")
    if dtype == "float64" and device.platform == "tpu":
        raise UnsupportedError("TPUs have no float64 arithmetic")
    key = jax.random.key(0)
    if dtype == "int8":
        arrays = [jax.random.randint(key, s, -8, 8, dtype=jnp.int8) for s in shapes]
    else:
        arrays = [jax.random.normal(key, s, dtype=jnp.float32).astype(dtype) for s in shapes]
    jax.block_until_ready(arrays)
    if op.name == "matmul":
        out = jnp.int32 if dtype == "int8" else None
        fn = functools.partial(jnp.matmul, precision=precision, preferred_element_type=out)
    else:
        fn = op.fn
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*arrays).compile()
    compile_s = time.perf_counter() - t0
    return _Prepared(lambda: compiled(*arrays), jax.block_until_ready, device.device_kind,
                     device.platform, compile_s)


def _numpy(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    np = _load("numpy")
    if dtype not in ("float32", "float64"):
        raise UnsupportedError(f"NumPy has no fast {dtype} matmul (no bfloat16; int8 overflows); "
                               "use float32 or float64")
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return _Prepared(lambda: op.fn(*arrays), lambda r: r, "cpu", "cpu")


def _torch(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    torch = _load("torch")
    cuda = torch.cuda.is_available()
    if dtype == "int8":
        raise UnsupportedError("PyTorch has no general int8 matmul (torch._int_mm is CUDA-only and shape-limited)")
    if dtype == "bfloat16" and cuda and not torch.cuda.is_bf16_supported():
        raise UnsupportedError(f"{torch.cuda.get_device_name(0)} has no bfloat16 support")
    dev = torch.device("cuda" if cuda else "cpu")
    gen = torch.Generator(device=dev).manual_seed(0)
    arrays = [torch.randn(s, generator=gen, device=dev).to(getattr(torch, dtype)) for s in shapes]
    sync = (lambda r: torch.cuda.synchronize()) if cuda else (lambda r: r)
    sync(None)
    name = torch.cuda.get_device_name(0) if cuda else "cpu"

    def call():
        with torch.no_grad():
            return op.fn(*arrays)

    return _Prepared(call, sync, name, "gpu" if cuda else "cpu")


def _tpu_attached() -> bool:
    from .runtime import detect_accelerator

    return detect_accelerator().kind == "tpu"


def _refuse_second_tpu_owner(framework: str, other: str) -> None:
    """A TPU belongs to one runtime per process: JAX and torch_xla cannot share it."""
    if other in sys.modules and _tpu_attached() and os.environ.get("PJRT_DEVICE", "TPU") != "CPU":
        raise UnsupportedError(
            f"{other} is imported in this process and a TPU is attached: once {other} has started it "
            f"holds the TPU, and {framework} would wait for it forever. Time {framework} in a separate "
            f"process: python -m tpututor bench matmul --framework {framework}"
        )


def _torch_xla(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    _refuse_second_tpu_owner("torch_xla", "jax")
    torch_xla = _load("torch_xla")
    import torch
    import torch_xla.core.xla_model as xm
    import torch_xla.runtime as xr

    if dtype in ("int8",):
        raise UnsupportedError("torch_xla has no int8 matmul through the @ operator")
    dev = torch_xla.device()
    gen = torch.Generator().manual_seed(0)
    arrays = [torch.randn(s, generator=gen).to(getattr(torch, dtype)).to(dev) for s in shapes]

    def sync(result):
        torch_xla.sync()  # cut the lazy graph and run it
        xm.wait_device_ops()  # wait until the device has finished

    sync(None)
    platform = xr.device_type().lower()
    kind = xm.xla_device_kind(dev) if platform != "cpu" else "cpu"
    return _Prepared(lambda: op.fn(*arrays), sync, kind, platform)


def _tensorflow(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    if dtype == "int8":
        raise UnsupportedError("TensorFlow's matmul has no int8 kernel")
    tf = _load("tensorflow")
    arrays = [tf.cast(tf.random.stateless_normal(s, seed=(0, i)), getattr(tf, dtype)) for i, s in enumerate(shapes)]
    fn = tf.function(op.fn, jit_compile=True)
    sync = lambda r: tf.test.experimental.sync_devices()  # noqa: E731
    platform = arrays[0].device.split(":")[-2].lower() if ":" in arrays[0].device else "cpu"
    kind = "cpu"
    if platform == "gpu":
        kind = tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]).get(
            "device_name", "GPU")
    return _Prepared(lambda: fn(*arrays), sync, kind, platform)


_BACKENDS: dict[str, Callable[..., _Prepared]] = {
    "jax": _jax, "numpy": _numpy, "torch": _torch, "torch_xla": _torch_xla, "tensorflow": _tensorflow,
}


def available() -> list[str]:
    """The frameworks installed here that also import (asked in fresh interpreters, then cached)."""
    return frameworks.available(FRAMEWORKS)


def _load(name: str):
    """The framework's module, or UnsupportedError quoting why it cannot be used here."""
    module = frameworks.load(name)
    if module is None:
        raise UnsupportedError(frameworks.status(name).skipped(f"timing {name}"))
    return module


def check_dtype(dtype: str) -> str:
    """Normalise a dtype name; an unknown one is a ValueError listing the known ones."""
    name = {"bf16": "bfloat16", "f32": "float32", "fp32": "float32", "f16": "float16", "f64": "float64"}.get(
        str(dtype).lower(), str(dtype).lower())
    if name not in DTYPES:
        raise ValueError(f"unknown dtype {dtype!r}; choose one of {', '.join(DTYPES)}")
    return name


# --------------------------------------------------------------------------- peak

@functools.lru_cache(maxsize=1)
def _cpu_estimate() -> hardware.CpuEstimate:
    from .runtime import detect_cpu

    cpu = detect_cpu()
    return hardware.estimate_cpu(cpu.model, cpu.cores, cpu.simd, cpu.ghz)


def peak_for(device: str, platform: str, dtype: str) -> tuple[float | None, str]:
    """(peak FLOP/s, what it is) for a device kind and dtype."""
    if platform == "cpu":
        est = _cpu_estimate()
        return est.peak_flops, f"CPU float32 estimate ({est.simd}, {est.cores} cores)"
    chip = hardware.find(device)
    if chip is None:
        return None, f"{device!r} is not in the chip table"
    peak = roofline.peak_flops(chip, dtype)
    kind = "int8" if dtype == "int8" else "bf16"
    return peak, f"{chip.label} {kind} peak (table, {chip.source_date})" if peak else f"{chip.label}: no {kind} peak"


# --------------------------------------------------------------------------- api

def _dims(size: int | Sequence[int]) -> tuple[int, int, int]:
    dims = (size, size, size) if isinstance(size, int) and not isinstance(size, bool) else tuple(size)
    if len(dims) != 3 or any(not isinstance(d, int) or isinstance(d, bool) or d <= 0 for d in dims):
        raise ValueError(f"size must be a positive integer or (m, k, n) of positive integers, got {size!r}")
    return dims  # type: ignore[return-value]


def run(op: str, size: int | Sequence[int], dtype: str = "float32", framework: str = "jax", *,
        repeats: int = 5, warmup: int = 1, precision: str | None = None) -> Record:
    """Measure ``op`` ("matmul" or "add") at ``size`` (n, or (m, k, n)) in one framework."""
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; choose one of {', '.join(OPS)}")
    if framework not in _BACKENDS:
        raise ValueError(f"unknown framework {framework!r}; choose one of {', '.join(FRAMEWORKS)}")
    dtype = check_dtype(dtype)
    m, k, n = _dims(size)
    spec = OPS[op]
    shapes = spec.shapes(m, k, n)
    prepared = _BACKENDS[framework](spec, shapes, dtype, precision)
    first, times = time_calls(prepared.call, prepared.sync, warmup=warmup, repeats=repeats)
    median = statistics.median(times)
    flops, moved = spec.flops(m, k, n), spec.bytes(m, k, n, dtype)
    peak, basis = peak_for(prepared.device, prepared.platform, dtype)
    return Record(
        framework=framework, device=prepared.device, platform=prepared.platform, op=op,
        shapes=[list(s) for s in shapes], dtype=dtype, size=n if m == k == n else None,
        seconds=median, min_seconds=min(times), max_seconds=max(times), repeats=repeats,
        compile_seconds=prepared.compile_seconds, first_call_seconds=first,
        flops=flops, bytes=moved, flops_per_s=flops / median, bytes_per_s=moved / median,
        intensity=flops / moved, peak_flops=peak,
        percent_of_peak=100 * flops / median / peak if peak else None, peak_basis=basis, times=times,
    )


def matmul(size: int | Sequence[int], dtype: str = "float32", framework: str = "jax", **kw) -> Record:
    """Measure ``(m, k) @ (k, n)`` (or n x n) in one framework; see :func:`run`."""
    return run("matmul", size, dtype, framework, **kw)


def jax_function(fn: Callable, *args, jit: bool = True, name: str | None = None, flops: float | None = None,
                 bytes: float | None = None, repeats: int = 5, warmup: int = 1) -> Record:
    """Time any JAX function, compiled whole (``jit=True``) or run op by op as Python calls it.

    FLOPs and bytes default to XLA's cost analysis of the compiled function
    (the fused program); pass them to describe the op-by-op run instead.
    """
    import jax

    _refuse_second_tpu_owner("jax", "torch_xla")
    leaves = jax.tree_util.tree_leaves(args)
    jax.block_until_ready(leaves)
    t0 = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    compile_s = time.perf_counter() - t0
    cost = compiled.cost_analysis() or {}
    if isinstance(cost, list):
        cost = cost[0] if cost else {}
    flops = float(cost.get("flops", 0.0)) if flops is None else flops
    moved = float(cost.get("bytes accessed", 0.0)) if bytes is None else bytes
    call = (lambda: compiled(*args)) if jit else (lambda: fn(*args))
    first, times = time_calls(call, jax.block_until_ready, warmup=warmup, repeats=repeats)
    median = statistics.median(times)
    device = leaves[0].devices().pop() if leaves and hasattr(leaves[0], "devices") else jax.devices()[0]
    dtype = str(leaves[0].dtype) if leaves else "-"
    peak, basis = peak_for(device.device_kind, device.platform, dtype if dtype in DTYPES else "float32")
    return Record(
        framework="jax" if jit else "jax (op by op)", device=device.device_kind, platform=device.platform,
        op=name or getattr(fn, "__name__", "function"), shapes=[list(getattr(a, "shape", ())) for a in leaves],
        dtype=dtype, size=None, seconds=median, min_seconds=min(times), max_seconds=max(times),
        repeats=repeats, compile_seconds=compile_s if jit else None, first_call_seconds=first,
        flops=flops, bytes=moved, flops_per_s=flops / median, bytes_per_s=moved / median,
        intensity=flops / moved if moved else 0.0, peak_flops=peak,
        percent_of_peak=100 * flops / median / peak if peak and flops else None, peak_basis=basis, times=times,
    )


def sweep(sizes: Iterable[int], dtypes: Iterable[str] = ("float32",), frameworks: Iterable[str] = ("jax",),
          op: str = "matmul", *, progress: bool = True, skip_unsupported: bool = True, **kw) -> list[Record]:
    """Measure every (framework, dtype, size); unsupported combinations are skipped with a note."""
    combos = [(f, d, s) for f in frameworks for d in dtypes for s in sizes]
    bar = combos
    if progress:
        from tqdm import tqdm

        bar = tqdm(combos, desc=f"{op} sweep", leave=False)
    records = []
    for fw, dt, size in bar:
        try:
            records.append(run(op, size, dt, fw, **kw))
        except UnsupportedError as exc:
            if not skip_unsupported:
                raise
            print(f"skipped {fw} {dt}: {exc}")
    return records


def table(records: Sequence[Record]) -> str:
    """A plain-text table of records."""
    head = ("framework", "device", "op", "size", "dtype", "median ms", "spread ms", "GFLOP/s", "GB/s", "% peak")
    rows = [head]
    for r in records:
        size = str(r.size) if r.size else "x".join(map(str, r.shapes[0]))
        pct = f"{r.percent_of_peak:.1f}" if r.percent_of_peak is not None else "-"
        rows.append((r.framework, r.device, r.op, size, r.dtype, f"{r.seconds * 1e3:.3f}",
                     f"{r.min_seconds * 1e3:.2f}-{r.max_seconds * 1e3:.2f}", f"{r.flops_per_s / 1e9:,.1f}",
                     f"{r.bytes_per_s / 1e9:,.1f}", pct))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))
             for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
