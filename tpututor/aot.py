"""Compile for a named TPU slice on any machine: the real TPU compiler (libtpu), no TPU needed.

JAX can describe a TPU slice it is not running on (``jax.experimental.topologies``), build a mesh of
those described devices, and compile a function for them ahead of time: ``jax.jit(f).lower(<abstract
arrays placed on that mesh>).compile()``. The compiler is the one a TPU VM runs, so its program (HLO
with TPU layouts), its memory analysis and its cost analysis are what the slice would get. Nothing
runs: the result can be read, not executed. MaxText's ``train_compile.py`` uses the same mechanism to
check a configuration before a slice is paid for.

The lessons call the JAX API first (``get_topology_desc``, ``lower``, ``compile``); this module
condenses it:

* :func:`available` says whether the TPU compiler can be used here, and why not;
* :func:`topology` and :func:`mesh` describe a slice named as Cloud TPU names it (``"v5e-8"``,
  ``"v5p-32"``, ``"v6e-256"``, ``"tpu7x-8"``) with the chips, hosts and chips per host of the real
  slice (:func:`tpututor.hardware.slice_of`);
* :func:`compile` compiles a function for it and returns a :class:`Compiled`: the HLO, its
  collectives (:func:`tpututor.hlo.summarize`), the memory per device against the chip's HBM and
  the compiler's cost analysis.

This module imports JAX at its top: import it where JAX is wanted.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
from jax.experimental import mesh_utils, topologies
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from . import hlo
from .hardware import Slice, slice_of
from .runtime import dist_version

__all__ = ["available", "topology", "mesh", "abstract", "compile", "Compiled", "CompileError", "gib"]


class CompileError(RuntimeError):
    """The TPU compiler refused the program; ``message`` is its own text (e.g. RESOURCE_EXHAUSTED)."""

    def __init__(self, slice_name: str, message: str):
        super().__init__(f"the TPU compiler rejected the program for {slice_name}: {message}")
        self.slice_name, self.message = slice_name, message

    @property
    def out_of_memory(self) -> bool:
        return "RESOURCE_EXHAUSTED" in self.message or "Ran out of memory" in self.message


def gib(n: float) -> float:
    """Bytes as GiB."""
    return n / 2**30


@functools.lru_cache(maxsize=1)
def available() -> str | None:
    """None where the TPU compiler can compile here; else one line saying why not and what to do.

    It needs the ``libtpu`` package beside JAX (``pip install "jax[tpu]"`` installs the libtpu built for
    that JAX; ``make`` installs it for the course). A Colab or Kaggle TPU runtime already has it.
    """
    if importlib.util.find_spec("libtpu") is None:
        return (
            'the TPU compiler (libtpu) is not installed: pip install "jax[tpu]=='
            f'{jax.__version__}" adds the one built for this JAX'
        )
    # A pairing of JAX and libtpu can fail in ways that kill the process (JAX 0.7.2 with libtpu 0.0.21.1,
    # Colab's, describes slices but crashes with SIGSEGV when compiling for one), so the first compile is
    # tried in a separate interpreter.
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    try:
        done = subprocess.run(
            [sys.executable, "-c", "import tpututor.aot as a; a.probe()"],
            capture_output=True,
            text=True,
            timeout=180,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return "compiling a small program for a TPU took over 180 s here: the TPU compiler cells are skipped"
    if done.returncode != 0:
        tail = [ln for ln in done.stderr.splitlines() if ln.strip() and "RAW:" not in ln][-1:] or [""]
        libtpu = dist_version("libtpu") or "?"
        return (
            f"JAX {jax.__version__} with libtpu {libtpu} cannot compile for a TPU here (a test compile "
            f"{'crashed, signal ' + str(-done.returncode) if done.returncode < 0 else 'exited ' + str(done.returncode)}"
            f"{': ' + tail[0][:200] if tail[0] else ''}); JAX 0.8 or later with its own libtpu can"
        )
    return None


def probe() -> None:
    """Describe a one-chip v5e and compile a tiny program for it (what :func:`available` runs apart)."""
    where = mesh("v5e-1")
    x = abstract((8, 128), jax.numpy.float32, where)
    jax.jit(lambda a: a * 2 + 1).lower(x).compile()


# libtpu reads these when it first starts; on a machine that is not a TPU VM it prints warnings
# about them (and looks for a metadata server). It also takes /tmp/libtpu_lockfile, which keeps a
# second process from starting libtpu ("ABORTED: Internal error when accessing libtpu multi-process
# lockfile"): a compiler that drives no chip need not hold it (ALLOW_MULTIPLE_LIBTPU_LOAD). Set only
# while it starts, then put back, so that nothing else in the process (tpututor.runtime.detect, a real
# TPU runtime started later) takes this machine for a TPU VM or skips the lock.
_QUIET_START = {
    "TPU_WORKER_HOSTNAMES": "localhost",
    "TPU_ACCELERATOR_TYPE": "v5litepod-8",
    "TPU_SKIP_MDS_QUERY": "1",
    "ALLOW_MULTIPLE_LIBTPU_LOAD": "1",
}


@functools.lru_cache(maxsize=32)
def topology(name: str):
    """The TPU compiler's description of a slice (``jax.experimental.topologies``), hosts as on Cloud TPU."""
    spec = slice_of(name)
    saved = {k: os.environ.get(k) for k in _QUIET_START}
    os.environ.update({k: v for k, v in _QUIET_START.items() if saved[k] is None})
    try:
        return topologies.get_topology_desc(
            topology_name=spec.topology, platform="tpu", chips_per_host_bounds=list(spec.host_bounds)
        )
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


def mesh(name: str, axes: Mapping[str, int] | None = None) -> Mesh:
    """A mesh of a slice's (described) devices; ``axes`` maps axis names to sizes, default one axis.

    The sizes must multiply to the slice's JAX devices: ``mesh("v5e-8", {"data": 2, "model": 4})``.
    """
    spec = slice_of(name)
    axes = dict(axes or {"devices": spec.devices})
    n = 1
    for size in axes.values():
        n *= size
    if n != spec.devices:
        raise ValueError(
            f"mesh axes {axes} make {n} devices, but {spec.describe()}: make the sizes multiply to {spec.devices}"
        )
    # create_device_mesh orders the devices by their torus coordinates, as jax.make_mesh does on a slice
    grid = mesh_utils.create_device_mesh(tuple(axes.values()), devices=topology(name).devices)
    return Mesh(grid, tuple(axes))


def abstract(shape: tuple[int, ...], dtype: Any, where: Mesh, spec: PartitionSpec | tuple = ()) -> jax.ShapeDtypeStruct:
    """An array that exists only as shape, dtype and placement: what ``lower`` needs, nothing allocated."""
    spec = spec if isinstance(spec, PartitionSpec) else PartitionSpec(*spec)
    return jax.ShapeDtypeStruct(shape, dtype, sharding=NamedSharding(where, spec))


@dataclass
class Compiled:
    """What the TPU compiler made of a function for a slice (per device: each runs the same program)."""

    slice: Slice
    hlo: str  # the optimised program, TPU layouts included
    memory: dict[str, int]  # argument_size, output_size, temp_size, alias_size, ...: bytes per device
    cost: dict[str, float]  # flops, bytes accessed, ... per device
    seconds: float  # compile time here
    collectives: Counter = field(default_factory=Counter)

    @property
    def bytes_per_device(self) -> int:
        """HBM the program holds on each device at its peak: arguments + outputs + temporaries, less aliased."""
        m = self.memory
        return m.get("argument_size", 0) + m.get("output_size", 0) + m.get("temp_size", 0) - m.get("alias_size", 0)

    @property
    def hbm_per_device(self) -> float:
        """The HBM one device has: the chip's, divided among the chip's JAX devices."""
        return (self.slice.chip.hbm_bytes or 0) / self.slice.chip.jax_devices_per_chip

    @property
    def fits(self) -> bool:
        return self.bytes_per_device <= self.hbm_per_device

    def collective_kinds(self) -> set[str]:
        """Collective ops with async ``-start``/``-done`` pairs folded into their op: {'all-gather', ...}."""
        return {k.removesuffix("-start").removesuffix("-done") for k in self.collectives}

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.collectives.items())) or "none"
        return (
            f"{self.slice.name} ({self.slice.devices} devices, {self.slice.hosts} host"
            f"{'s' if self.slice.hosts > 1 else ''}): {gib(self.bytes_per_device):.3g} GiB per device of "
            f"{gib(self.hbm_per_device):.3g} GiB HBM ({'fits' if self.fits else 'does NOT fit'}); "
            f"collectives: {kinds}; compiled in {self.seconds:.1f} s"
        )


def compile(fn: Callable, *args, slice: str, **jit_kwargs) -> Compiled:  # noqa: A001 - the verb is the API's
    """Compile ``fn`` for the named slice; ``args`` are :func:`abstract` arrays on :func:`mesh` (``slice``).

    ``fn`` may already be a ``jax.jit`` function: without ``jit_kwargs`` it is compiled as it is, so its
    ``donate_argnums`` still let outputs reuse the donated arguments' memory (``memory["alias_size"]``).

    Raises :class:`CompileError` with the compiler's own message when it refuses the program (out of
    HBM or VMEM, a kernel Mosaic rejects), and ``RuntimeError`` saying why when no TPU compiler is here.
    """
    spec = slice_of(slice)
    why = available()
    if why is not None:
        raise RuntimeError(why)
    start = time.perf_counter()
    # A function jax.jit already wrapped (with its shardings and donate_argnums) is lowered as it is:
    # wrapping it in a second jit would keep its shardings but drop its donation (no aliasing).
    jitted = fn if hasattr(fn, "lower") and not jit_kwargs else jax.jit(fn, **jit_kwargs)
    try:
        lowered = jitted.lower(*args)
    except Exception as e:  # a Pallas kernel Mosaic refuses fails here, while lowering for the TPU
        if type(e).__name__ in ("VerificationError", "LoweringException", "MosaicError") or "Mosaic" in str(e):
            raise CompileError(spec.name, str(e)) from e
        raise  # an error in the function itself (a shape mismatch, a bad argument): the caller's
    try:
        compiled = lowered.compile()
    except Exception as e:  # XlaRuntimeError or JaxRuntimeError, by JAX version: the compiler said no
        raise CompileError(spec.name, str(e)) from e
    seconds = time.perf_counter() - start
    text = compiled.as_text()
    return Compiled(
        slice=spec,
        hlo=text,
        memory=hlo.memory_record(compiled),
        cost=hlo.cost_record(compiled),
        seconds=seconds,
        collectives=hlo.summarize(text).collectives,
    )
