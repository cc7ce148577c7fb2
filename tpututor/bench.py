"""Timing that is right on every backend.

Each measurement: inputs made on the device first; compile timed on its own
(JAX compiles ahead of time; torch_xla and TensorFlow compile inside the first
call, reported as ``first_call_seconds``); warm-up; then several timed runs,
each stopped only when the device has finished (``block_until_ready`` for JAX,
``torch_xla.sync()`` and ``wait_device_ops()`` for torch_xla,
``torch.cuda.synchronize()`` for CUDA torch, ``sync_devices()`` for TF). The
result is a tidy :class:`Record` with the median, the spread and the FLOP/s as
a share of the device's peak from :mod:`tpututor.hardware`.

Two timing modes (``calls=``): *blocked* (``calls=1``, the default) times one
call and the wait for it, so each figure includes one dispatch and one host
round trip; *amortised* (``calls=k``) queues k calls back to back, waits once
for all of them and divides by k, which spreads the wait over k calls (each
call still pays its own dispatch, overlapped with the device's work).
``calls="auto"`` picks k from the best of a few blocked calls so that one timed
run lasts about :data:`AUTO_TARGET_SECONDS`. The record says which mode produced it
(``calls``, ``timing``).

Frameworks are imported when first used, never at import time.
"""

from __future__ import annotations

import functools
import math
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from . import frameworks, hardware, roofline

__all__ = [
    "Record",
    "UnsupportedError",
    "FRAMEWORKS",
    "DTYPES",
    "OPS",
    "run",
    "matmul",
    "sweep",
    "jax_function",
    "time_calls",
    "time_alternating",
    "available",
    "check_dtype",
    "table",
    "AUTO_TARGET_SECONDS",
    "AUTO_MAX_CALLS",
]

FRAMEWORKS = ("jax", "numpy", "torch", "torch_xla", "tensorflow")
DTYPES = ("float32", "bfloat16", "float16", "int8", "float64")
AUTO_TARGET_SECONDS = 0.01  # calls="auto": k calls per timed run, enough to last about this long
AUTO_MAX_CALLS = 64  # ... but never more than this many (each result stays alive until the wait)
_AUTO_PROBES = 3  # blocked calls timed to choose k (the best one counts: a busy moment cannot inflate it)


class UnsupportedError(ValueError):
    """This framework or device cannot run the op in this dtype; the message says why."""


@dataclass
class Record:
    """One measurement. ``seconds`` is the median of the timed runs, per call.

    ``timing`` is ``"blocked"`` (each timed run is one call and the wait for it)
    or ``"amortised"`` (each timed run is ``calls`` calls back to back and one
    wait, divided by ``calls``).
    """

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
    calls: int = 1
    timing: str = "blocked"

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
    "matmul": Op(
        "matmul",
        lambda a, b: a @ b,
        lambda m, k, n: [(m, k), (k, n)],
        roofline.matmul_flops,
        lambda m, k, n, dt: roofline.matmul_bytes(m, k, n, dt, "int32" if dt == "int8" else dt),
    ),
    "add": Op(
        "add",
        lambda a, b: a + b,
        lambda m, k, n: [(m, n), (m, n)],
        lambda m, k, n: roofline.elementwise_flops(m * n),
        lambda m, k, n, dt: roofline.elementwise_bytes(m * n, 2, 1, dt),
    ),
}


# --------------------------------------------------------------------------- timing


def _check_calls(calls: int | str) -> None:
    if calls == "auto":
        return
    if not isinstance(calls, int) or isinstance(calls, bool) or calls < 1:
        raise ValueError(f"calls must be a whole number of at least 1 or 'auto', got {calls!r}")


def _timed(
    call: Callable[[], Any], sync: Callable[[Any], Any], warmup: int, repeats: int, calls: int | str
) -> tuple[float, list[float], int]:
    """(first call seconds, seconds per call of each timed run, calls per timed run)."""
    if not isinstance(repeats, int) or not isinstance(warmup, int) or repeats < 1 or warmup < 1:
        raise ValueError(f"repeats and warmup must be at least 1, got repeats={repeats}, warmup={warmup}")
    _check_calls(calls)
    t0 = time.perf_counter()
    sync(call())
    first = time.perf_counter() - t0
    if calls == "auto":  # the best of a few blocked calls says how long a call takes; k fills the target
        best = first  # (the first call may have compiled: it only ever lowers the estimate if it was quick)
        for probe in range(_AUTO_PROBES):
            if probe and best > AUTO_TARGET_SECONDS:  # a big call: k = 1 whatever more probes say
                break
            t0 = time.perf_counter()
            sync(call())
            best = min(best, time.perf_counter() - t0)
        calls = max(1, min(AUTO_MAX_CALLS, math.ceil(AUTO_TARGET_SECONDS / max(best, 1e-7))))
    k = int(calls)

    def burst() -> None:
        if k == 1:
            sync(call())
        else:  # queue k calls, then one wait for all of them
            sync([call() for _ in range(k)])

    for _ in range(max(warmup - 1, 1 if k > 1 else 0)):  # k > 1: at least one untimed burst
        burst()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        burst()
        times.append((time.perf_counter() - t0) / k)
    return first, times, k


def time_calls(
    call: Callable[[], Any], sync: Callable[[Any], Any], *, warmup: int = 1, repeats: int = 5, calls: int | str = 1
) -> tuple[float, list[float]]:
    """Time ``call`` until ``sync`` says the device is done: (first call seconds, timed seconds).

    The first call (which may compile) is timed on its own and counts as one
    warm-up run; ``warmup - 1`` more untimed runs follow, then ``repeats`` timed ones.
    With ``calls=k`` (k > 1) each run is k calls back to back and one ``sync`` of the
    list of their k results, at least one such run is untimed, and each timed figure
    is the run's time divided by k. ``calls="auto"`` chooses k (see :func:`run`).
    """
    first, times, _ = _timed(call, sync, warmup, repeats, calls)
    return first, times


def time_alternating(
    calls: Mapping[str, Callable[[], Any]], sync: Callable[[Any], Any], *, warmup: int = 1, repeats: int = 5
) -> dict[str, list[float]]:
    """Time several calls taking turns: {name: timed seconds}, one figure per round each.

    Each call gets ``warmup`` untimed runs first. Then every round times each call
    once, until ``sync`` says the device is done, starting the round one name further
    along, so a load that comes and goes on a shared machine falls on all of them alike
    (timing one call's runs, then the other's, can hand one all of a busy spell).
    """
    if not isinstance(repeats, int) or not isinstance(warmup, int) or repeats < 1 or warmup < 1:
        raise ValueError(f"repeats and warmup must be at least 1, got repeats={repeats}, warmup={warmup}")
    names = list(calls)
    if len(names) < 2:
        raise ValueError(f"time_alternating compares two calls or more, got {names!r}: use time_calls for one")
    for name in names:
        for _ in range(warmup):
            sync(calls[name]())
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(repeats):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            t0 = time.perf_counter()
            sync(calls[name]())
            times[name].append(time.perf_counter() - t0)
    return times


# --------------------------------------------------------------------------- backends


@dataclass
class _Prepared:
    call: Callable[[], Any]
    sync: Callable[[Any], Any]
    device: str
    platform: str
    compile_seconds: float | None = None
    inputs: tuple = ()  # the operands the call uses (for inspection)


def _jax(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    _refuse_second_tpu_owner("jax", "torch_xla")
    jax = _load("jax")
    import jax.numpy as jnp

    device = jax.devices()[0]
    if dtype == "float64" and not jax.config.jax_enable_x64:
        raise UnsupportedError("JAX computes float64 only with jax.config.update('jax_enable_x64', True)")
    if dtype == "float64" and device.platform == "tpu":
        raise UnsupportedError("TPUs have no float64 arithmetic")
    keys = jax.random.split(jax.random.key(0), len(shapes))  # one key per operand: a @ b, not a @ a
    if dtype == "int8":
        arrays = [jax.random.randint(k, s, -8, 8, dtype=jnp.int8) for k, s in zip(keys, shapes)]
    else:
        arrays = [jax.random.normal(k, s, dtype=jnp.float32).astype(dtype) for k, s in zip(keys, shapes)]
    jax.block_until_ready(arrays)
    if op.name == "matmul":
        out = jnp.int32 if dtype == "int8" else None
        fn = functools.partial(jnp.matmul, precision=precision, preferred_element_type=out)
    else:
        fn = op.fn
    t0 = time.perf_counter()
    try:
        compiled = jax.jit(fn).lower(*arrays).compile()
    except (ValueError, RuntimeError) as exc:  # a dot algorithm this backend lacks: "... is not supported ..."
        if precision is not None and "support" in str(exc).lower():
            raise UnsupportedError(f"precision={precision!r} on {device.platform}: {str(exc).splitlines()[0]}") from exc
        raise
    compile_s = time.perf_counter() - t0
    return _Prepared(
        lambda: compiled(*arrays), jax.block_until_ready, device.device_kind, device.platform, compile_s, tuple(arrays)
    )


def _numpy(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    np = _load("numpy")
    if dtype not in ("float32", "float64"):
        raise UnsupportedError(
            f"NumPy has no fast {dtype} matmul (no bfloat16; int8 overflows); use float32 or float64"
        )
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(s).astype(dtype) for s in shapes]
    return _Prepared(lambda: op.fn(*arrays), lambda r: r, "cpu", "cpu", inputs=tuple(arrays))


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

    return _Prepared(call, sync, name, "gpu" if cuda else "cpu", inputs=tuple(arrays))


def _tpu_attached() -> bool:
    from .runtime import detect_accelerator

    return detect_accelerator().kind == "tpu"


def _refuse_second_tpu_owner(framework: str, other: str) -> None:
    """One process owns a TPU chip, and JAX and torch_xla each load their own libtpu: not in one process.

    What a second owner sees is documented for a second *process*: "The TPU is
    already in use by process with pid ..." (jax-ml/jax#22070, #10192). In one
    process we refuse before trying.
    """
    if other in sys.modules and _tpu_attached() and os.environ.get("PJRT_DEVICE", "TPU") != "CPU":
        raise UnsupportedError(
            f"{other} is imported in this process and a TPU is attached: one process owns a chip, and "
            f"{other} and {framework} each load their own libtpu, so {framework} cannot share the TPU "
            f"{other} holds (a second owner gets 'The TPU is already in use'). Time {framework} in a "
            f"separate process: python -m tpututor bench matmul --framework {framework}"
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
    return _Prepared(lambda: op.fn(*arrays), sync, kind, platform, inputs=tuple(arrays))


def _tensorflow(op: Op, shapes, dtype: str, precision: str | None) -> _Prepared:
    if dtype == "int8":
        raise UnsupportedError("TensorFlow's matmul has no int8 kernel")
    tf = _load("tensorflow")
    arrays = [tf.cast(tf.random.stateless_normal(s, seed=(0, i)), getattr(tf, dtype)) for i, s in enumerate(shapes)]
    fn = tf.function(op.fn, jit_compile=True)
    sync = lambda r: tf.test.experimental.sync_devices()  # noqa: E731
    platform = arrays[0].device.split(":")[-2].lower() if ":" in arrays[0].device else "cpu"
    return _Prepared(lambda: fn(*arrays), sync, _tensorflow_kind(tf, platform), platform, inputs=tuple(arrays))


def _tensorflow_kind(tf, platform: str) -> str:
    """A device kind the chip table knows: TF names a TPU device only "TPU", so ask tpututor.runtime."""
    if platform == "gpu":
        return tf.config.experimental.get_device_details(tf.config.list_physical_devices("GPU")[0]).get(
            "device_name", "GPU"
        )
    if platform == "tpu":
        from .runtime import detect_accelerator

        generation = detect_accelerator().generation  # "v5e", read from the host, not from a framework
        return f"TPU {generation}" if generation else "TPU"
    return "cpu"


_BACKENDS: dict[str, Callable[..., _Prepared]] = {
    "jax": _jax,
    "numpy": _numpy,
    "torch": _torch,
    "torch_xla": _torch_xla,
    "tensorflow": _tensorflow,
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
        str(dtype).lower(), str(dtype).lower()
    )
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


def run(
    op: str,
    size: int | Sequence[int],
    dtype: str = "float32",
    framework: str = "jax",
    *,
    repeats: int = 5,
    warmup: int = 1,
    precision: str | None = None,
    calls: int | str = 1,
) -> Record:
    """Measure ``op`` ("matmul" or "add") at ``size`` (n, or (m, k, n)) in one framework.

    ``calls=1`` (blocked) times each call with its own wait; ``calls=k`` times k
    calls back to back with one wait and divides by k (amortised: the host's wait is
    spread over k calls, each still pays its dispatch); ``calls="auto"`` picks
    k from the best of a few blocked calls so a timed run lasts about :data:`AUTO_TARGET_SECONDS`
    (at most :data:`AUTO_MAX_CALLS`; big calls get k = 1). ``precision`` takes what
    ``jnp.matmul`` takes, dot-algorithm presets such as ``"BF16_BF16_F32"`` included;
    one this backend lacks raises :class:`UnsupportedError`.
    """
    _check_calls(calls)
    if op not in OPS:
        raise ValueError(f"unknown op {op!r}; choose one of {', '.join(OPS)}")
    if framework not in _BACKENDS:
        raise ValueError(f"unknown framework {framework!r}; choose one of {', '.join(FRAMEWORKS)}")
    dtype = check_dtype(dtype)
    m, k, n = _dims(size)
    spec = OPS[op]
    shapes = spec.shapes(m, k, n)
    prepared = _BACKENDS[framework](spec, shapes, dtype, precision)
    first, times, per_run = _timed(prepared.call, prepared.sync, warmup, repeats, calls)
    median = statistics.median(times)
    flops, moved = spec.flops(m, k, n), spec.bytes(m, k, n, dtype)
    peak, basis = peak_for(prepared.device, prepared.platform, dtype)
    return Record(
        framework=framework,
        device=prepared.device,
        platform=prepared.platform,
        op=op,
        shapes=[list(s) for s in shapes],
        dtype=dtype,
        size=n if m == k == n else None,
        seconds=median,
        min_seconds=min(times),
        max_seconds=max(times),
        repeats=repeats,
        compile_seconds=prepared.compile_seconds,
        first_call_seconds=first,
        flops=flops,
        bytes=moved,
        flops_per_s=flops / median,
        bytes_per_s=moved / median,
        intensity=flops / moved,
        peak_flops=peak,
        percent_of_peak=100 * flops / median / peak if peak else None,
        peak_basis=basis,
        times=times,
        calls=per_run,
        timing="blocked" if per_run == 1 else "amortised",
    )


def matmul(size: int | Sequence[int], dtype: str = "float32", framework: str = "jax", **kw) -> Record:
    """Measure ``(m, k) @ (k, n)`` (or n x n) in one framework; see :func:`run`."""
    return run("matmul", size, dtype, framework, **kw)


def jax_function(
    fn: Callable,
    *args,
    jit: bool = True,
    name: str | None = None,
    flops: float | None = None,
    bytes: float | None = None,
    repeats: int = 5,
    warmup: int = 1,
    calls: int | str = 1,
) -> Record:
    """Time any JAX function, compiled whole (``jit=True``) or run op by op as Python calls it.

    FLOPs and bytes default to XLA's cost analysis of the compiled function
    (the fused program); pass them to describe the op-by-op run instead.
    ``calls`` chooses blocked or amortised timing, as in :func:`run`.
    """
    import jax

    _check_calls(calls)
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
    first, times, per_run = _timed(call, jax.block_until_ready, warmup, repeats, calls)
    median = statistics.median(times)
    device = leaves[0].devices().pop() if leaves and hasattr(leaves[0], "devices") else jax.devices()[0]
    dtype = str(leaves[0].dtype) if leaves else "-"
    peak, basis = peak_for(device.device_kind, device.platform, dtype if dtype in DTYPES else "float32")
    return Record(
        framework="jax" if jit else "jax (op by op)",
        device=device.device_kind,
        platform=device.platform,
        op=name or getattr(fn, "__name__", "function"),
        shapes=[list(getattr(a, "shape", ())) for a in leaves],
        dtype=dtype,
        size=None,
        seconds=median,
        min_seconds=min(times),
        max_seconds=max(times),
        repeats=repeats,
        compile_seconds=compile_s if jit else None,
        first_call_seconds=first,
        flops=flops,
        bytes=moved,
        flops_per_s=flops / median,
        bytes_per_s=moved / median,
        intensity=flops / moved if moved else 0.0,
        peak_flops=peak,
        percent_of_peak=100 * flops / median / peak if peak and flops else None,
        peak_basis=basis,
        times=times,
        calls=per_run,
        timing="blocked" if per_run == 1 else "amortised",
    )


def sweep(
    sizes: Iterable[int],
    dtypes: Iterable[str] = ("float32",),
    frameworks: Iterable[str] = ("jax",),
    op: str = "matmul",
    *,
    progress: bool = True,
    skip_unsupported: bool = True,
    **kw,
) -> list[Record]:
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
    """A plain-text table of records (with a "calls/wait" column when any is amortised)."""
    amortised = any(r.calls > 1 for r in records)
    head = ("framework", "device", "op", "size", "dtype", "median ms", "spread ms", "GFLOP/s", "GB/s", "% peak")
    head += ("calls/wait",) if amortised else ()
    rows = [head]
    for r in records:
        size = str(r.size) if r.size else "x".join(map(str, r.shapes[0]))
        pct = f"{r.percent_of_peak:.1f}" if r.percent_of_peak is not None else "-"
        rows.append(
            (
                r.framework,
                r.device,
                r.op,
                size,
                r.dtype,
                f"{r.seconds * 1e3:.3f}",
                f"{r.min_seconds * 1e3:.2f}-{r.max_seconds * 1e3:.2f}",
                f"{r.flops_per_s / 1e9:,.1f}",
                f"{r.bytes_per_s / 1e9:,.1f}",
                pct,
            )
            + ((str(r.calls),) if amortised else ())
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = [
        "  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))) for row in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
