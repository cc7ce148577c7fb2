"""The roofline: how fast a kernel *can* run, given its FLOPs per byte and the chip.

attainable FLOP/s = min(peak FLOP/s, arithmetic intensity x memory bandwidth)

A kernel whose intensity (FLOPs per byte moved to and from memory) is below the
chip's *ridge point* (peak / bandwidth) is memory-bound; above it, compute-bound.
The counts here are the textbook minimum: every operand read once, the result
written once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .hardware import Chip, find, lookup
from .validate import positive_ints

__all__ = [
    "itemsize",
    "matmul_flops",
    "matmul_bytes",
    "matmul_intensity",
    "elementwise_flops",
    "elementwise_bytes",
    "elementwise_intensity",
    "crossover_size",
    "peak_flops",
    "for_device",
    "Roofline",
    "plot",
]

_ITEMSIZE = {"float64": 8, "float32": 4, "bfloat16": 2, "float16": 2, "int8": 1, "float8": 1, "int32": 4}


def itemsize(dtype: str) -> int:
    """Bytes per element of a dtype name ("float32", "bfloat16", "int8", ...)."""
    name = str(dtype).removeprefix("dtype(").strip("')\"").lower()
    name = {
        "bf16": "bfloat16",
        "f32": "float32",
        "fp32": "float32",
        "f16": "float16",
        "fp8": "float8",
        "f64": "float64",
    }.get(name, name)
    if name.startswith("float8"):
        name = "float8"
    if name not in _ITEMSIZE:
        raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(_ITEMSIZE)}")
    return _ITEMSIZE[name]


def matmul_flops(m: int, k: int, n: int) -> int:
    """FLOPs of (m, k) @ (k, n): m*n outputs, each k multiplies and k adds: 2mkn."""
    positive_ints(m=m, k=k, n=n)
    return 2 * m * k * n


def matmul_bytes(m: int, k: int, n: int, dtype: str = "float32", out_dtype: str | None = None) -> int:
    """Bytes moved by (m, k) @ (k, n): both operands read once, the result written once."""
    positive_ints(m=m, k=k, n=n)
    return (m * k + k * n) * itemsize(dtype) + m * n * itemsize(out_dtype or dtype)


def matmul_intensity(m: int, k: int, n: int, dtype: str = "float32", out_dtype: str | None = None) -> float:
    """FLOPs per byte of a matmul; for a square n x n matmul it is n / (1.5 * itemsize)."""
    return matmul_flops(m, k, n) / matmul_bytes(m, k, n, dtype, out_dtype)


def elementwise_flops(elements: int, flops_per_element: int = 1) -> int:
    positive_ints(elements=elements, flops_per_element=flops_per_element)
    return elements * flops_per_element


def elementwise_bytes(elements: int, inputs: int = 2, outputs: int = 1, dtype: str = "float32") -> int:
    """Bytes moved by an elementwise op reading ``inputs`` arrays and writing ``outputs``."""
    positive_ints(elements=elements, inputs=inputs, outputs=outputs)
    return elements * (inputs + outputs) * itemsize(dtype)


def elementwise_intensity(
    flops_per_element: int = 1, inputs: int = 2, outputs: int = 1, dtype: str = "float32"
) -> float:
    """FLOPs per byte of an elementwise op; independent of the array size."""
    return flops_per_element / ((inputs + outputs) * itemsize(dtype))


def crossover_size(ridge_point: float, dtype: str = "bfloat16") -> float:
    """The side n at which a square matmul's intensity reaches the ridge point.

    intensity(n) = 2n^3 / (3 n^2 * itemsize) = 2n / (3 * itemsize), so n = 1.5 * itemsize * ridge.
    Below it the matmul is memory-bound, above it compute-bound.
    """
    if not ridge_point or ridge_point <= 0:
        raise ValueError(f"ridge_point must be positive, got {ridge_point!r}")
    return 1.5 * itemsize(dtype) * ridge_point


@dataclass(frozen=True)
class Roofline:
    """A chip's roof: peak FLOP/s for one dtype and memory bandwidth in bytes/s."""

    label: str
    peak_flops: float
    bandwidth: float
    estimate: bool = False  # True for the local CPU

    @property
    def ridge_point(self) -> float:
        return self.peak_flops / self.bandwidth

    def attainable(self, intensity: float) -> float:
        """The most FLOP/s a kernel of this intensity can reach on this chip."""
        if intensity <= 0:
            raise ValueError(f"intensity must be positive, got {intensity!r}")
        return min(self.peak_flops, intensity * self.bandwidth)

    def bound(self, intensity: float) -> str:
        """ "memory" below the ridge point, "compute" at or above it."""
        return "memory" if intensity < self.ridge_point else "compute"

    def crossover_size(self, dtype: str = "bfloat16") -> float:
        return crossover_size(self.ridge_point, dtype)

    @classmethod
    def of(cls, chip: Chip | str, dtype: str = "bfloat16") -> Roofline:
        """The roofline of a chip in the table, for ``dtype`` (bf16/f32 use the bf16 peak, int8 the int8 one)."""
        chip = lookup(chip) if isinstance(chip, str) else chip
        peak = peak_flops(chip, dtype)
        if peak is None or not chip.hbm_bandwidth:
            raise ValueError(f"{chip.label} has no {dtype} peak in the chip table")
        return cls(f"{chip.label} ({_dtype_label(chip, dtype)})", peak, chip.hbm_bandwidth)


def _dtype_label(chip: Chip, dtype: str) -> str:
    size = itemsize(dtype)
    if size == 1:
        return "int8" if "int" in str(dtype) else "fp8"
    return "bf16"


def peak_flops(chip: Chip, dtype: str) -> float | None:
    """The table's peak for ``dtype``: int8/fp8 rows for 1-byte types, else the bf16 peak.

    A float32 matmul on a TPU or a tensor-core GPU runs through bf16 or TF32
    passes, so the bf16 peak is its ceiling, and a generous one, by how many
    passes it takes or how much slower the unit is: on a TPU one bf16 pass at
    JAX's default precision (the bf16 peak itself), three at "high", six at
    "highest" (so up to 6x too high); on an NVIDIA tensor-core GPU TF32 runs at
    half the bf16 rate (H100 SXM: 989 bf16 against about 495 dense TF32 TFLOP/s,
    NVIDIA's H100 datasheet), so 2x too high for TF32, more for true float32.
    """
    size = itemsize(dtype)
    if size == 1:
        value = chip.int8_tops if "int" in str(dtype) else chip.fp8_tflops
        return None if value is None else value * 1e12
    return chip.peak_flops


def for_device(
    device_kind: str, dtype: str = "float32", cpu_peak: float | None = None, cpu_bandwidth: float | None = None
) -> Roofline | None:
    """The roofline of a JAX device kind; for a CPU, from the given estimate and measured bandwidth."""
    chip = find(device_kind)
    if chip is not None:
        try:
            return Roofline.of(chip, dtype)
        except ValueError:
            return None
    if cpu_peak and cpu_bandwidth:
        return Roofline("this CPU (estimate)", cpu_peak, cpu_bandwidth, estimate=True)
    return None


def plot(
    rooflines: Sequence[Roofline],
    measured: Mapping[str, Sequence[tuple[float, float]]] | None = None,
    *,
    ax=None,
    intensity_range: tuple[float, float] = (0.01, 1e4),
):
    """Log-log roofline plot: one roof per chip, and measured series {label: [(intensity, FLOP/s), ...]}."""
    import matplotlib.pyplot as plt
    import numpy as np

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.8))
    x = np.logspace(np.log10(intensity_range[0]), np.log10(intensity_range[1]), 200)
    for roof in rooflines:
        y = np.minimum(roof.peak_flops, x * roof.bandwidth)
        ax.plot(x, y, ls="--" if roof.estimate else "-", label=f"{roof.label}, ridge {roof.ridge_point:.0f}")
    for label, pts in (measured or {}).items():
        pts = sorted(pts)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ls=":", label=f"measured: {label}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOPs per byte)")
    ax.set_ylabel("FLOP/s")
    ax.set_title("Roofline: attainable FLOP/s against arithmetic intensity")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    return ax
