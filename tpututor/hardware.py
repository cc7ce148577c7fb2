"""The chip table: peak compute, memory and interconnect of TPUs and GPUs.

Every row of ``data/chips.csv`` names its public source and the date it was
read. Figures are per chip, dense (no sparsity), in the units of the column
names; the :class:`Chip` properties convert them to SI (FLOP/s, bytes, bytes/s).
Memory sizes are GiB: vendors' "16 GB" of HBM is 16 GiB, as JAX and tpu-info
report for v5e; bandwidths are decimal GB/s.

``lookup`` accepts table names (``"v5e"``) and the ``device_kind`` strings JAX
reports (``"TPU v5 lite"``, ``"NVIDIA H100 80GB HBM3"``). ``estimate_cpu``
gives a labelled *estimate* for the local CPU, which has no datasheet row.

ICI per axis. ``interconnect_gbps`` is the per-chip figure, every link of the
chip counted in both directions: the vendor's where Cloud TPU publishes one
(v5e, v5p, v6e, TPU7x), derived from scaling-book's per-link figure where it
does not (v3, v4: the row's notes say so). A collective along one mesh axis uses
only that axis's links, so the TPU rows also carry the one-way bandwidth of one
ICI link (``ici_link_gbps``), the torus (``ici_topology``) and where it closes
into a ring (``ici_wrap_at``), with their own source and date (``ici_source``,
``ici_source_date``): scaling-book's "How to Scale Your Model", TPU chapter.
Along an axis with a wraparound link a chip sends both ways at once, so the
axis carries 2 x ``ici_link_gbps`` (:attr:`Chip.ici_axis_bandwidth`, scaling-book's
bidirectional figure); without one (small slices) it carries 1 x.
:meth:`Chip.wraparound` applies the rule for a slice shape: a 2D torus (v5e,
v6e) wraps along an axis of 16 chips (so a v5e-8, 2x4, wraps nowhere); a 3D
torus (v4, v5p) wraps along every axis when the slice is made of whole 4x4x4
cubes (4x4x4, 4x4x8) and along none otherwise (2x2x4).
"""

from __future__ import annotations

import csv
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

__all__ = [
    "Chip",
    "Slice",
    "slice_of",
    "standard_shape",
    "CpuEstimate",
    "number",
    "data_rows",
    "zones_table",
    "offered_types",
    "chips",
    "lookup",
    "find",
    "estimate_cpu",
    "markdown_table",
    "plot_chips",
]


@dataclass(frozen=True)
class Chip:
    """One row of the chip table (per-chip, dense figures)."""

    name: str
    kind: str  # "tpu" | "gpu"
    device_kinds: tuple[str, ...]
    bf16_tflops: float | None
    int8_tops: float | None
    fp8_tflops: float | None
    hbm_gib: float | None
    hbm_gbps: float | None
    interconnect: str
    interconnect_gbps: float | None  # bidirectional, per chip, all links together
    mxu: str
    tensorcores: int | None
    mxus_per_core: int | None
    jax_devices_per_chip: int
    source: str
    source_date: str
    notes: str = ""
    ici_link_gbps: float | None = None  # one ICI link, one direction (TPUs only)
    ici_topology: str = ""  # "2D torus" | "3D torus"
    ici_wrap_at: int | None = None  # 2D: an axis of this size wraps; 3D: whole cubes of this edge wrap
    ici_source: str = ""
    ici_source_date: str = ""
    chips_per_host: int | None = None  # chips one TPU VM drives in a multi-host slice
    single_host_max_chips: int | None = None  # the largest slice that is one TPU VM
    hosts_source: str = ""

    @property
    def peak_flops(self) -> float | None:
        """Peak dense bf16 FLOP/s (None where the chip has no bf16 matrix unit)."""
        return None if self.bf16_tflops is None else self.bf16_tflops * 1e12

    @property
    def hbm_bytes(self) -> float | None:
        return None if self.hbm_gib is None else self.hbm_gib * 2**30

    @property
    def hbm_bandwidth(self) -> float | None:
        """HBM (or GDDR) bandwidth in bytes/s."""
        return None if self.hbm_gbps is None else self.hbm_gbps * 1e9

    @property
    def ridge_point(self) -> float | None:
        """FLOPs per byte at which a kernel turns compute-bound (bf16 peak / bandwidth)."""
        if self.peak_flops is None or not self.hbm_bandwidth:
            return None
        return self.peak_flops / self.hbm_bandwidth

    @property
    def ici_link_bandwidth(self) -> float | None:
        """Bytes/s over one ICI link in one direction (None where the table has no per-link figure)."""
        return None if self.ici_link_gbps is None else self.ici_link_gbps * 1e9

    @property
    def ici_axis_bandwidth(self) -> float | None:
        """Bytes/s a chip moves along one mesh axis that closes into a ring: both links, 2 x one-way.

        This is scaling-book's "bidirectional" W_ici (9e10 on v5e, 1.8e11 on v5p and v6e).
        Without a wraparound link the axis gives half of it (:meth:`wraparound`).
        """
        link = self.ici_link_bandwidth
        return None if link is None else 2 * link

    def wraparound(self, topology: Sequence[int]) -> tuple[bool, ...]:
        """For a slice of this chip with the given shape (``(2, 4)``, ``(4, 4, 8)``), whether each
        axis has a wraparound link. Raises a ValueError naming the fix for a shape that does not
        fit the torus, or a chip whose table row has no wraparound rule."""
        shape = tuple(topology)
        dims = {"2D torus": 2, "3D torus": 3}.get(self.ici_topology)
        if dims is None or self.ici_wrap_at is None:
            raise ValueError(
                f"{self.label} has no ICI wraparound rule in the chip table; pass wraparound=True or False yourself"
            )
        if len(shape) != dims or any(not isinstance(n, int) or n < 1 for n in shape):
            raise ValueError(
                f"{self.label} is a {self.ici_topology}: give its slice as {dims} positive "
                f"integers, such as {(2, 4) if dims == 2 else (4, 4, 4)}, not {shape}"
            )
        if dims == 3:  # wraparounds come from the optical switches of whole cubes
            whole = all(n % self.ici_wrap_at == 0 for n in shape)
            return (whole,) * 3
        return tuple(n % self.ici_wrap_at == 0 for n in shape)

    @property
    def label(self) -> str:
        if self.kind != "tpu":
            return self.name
        return f"TPU{self.name}" if self.name[0].isdigit() else f"TPU {self.name}"  # "TPU7x", "TPU v5e"


@dataclass(frozen=True)
class CpuEstimate:
    """A rough peak for the local CPU. An *estimate*, not a datasheet figure."""

    model: str
    cores: int
    ghz: float | None
    simd: str
    flops_per_cycle_per_core: int
    peak_flops: float | None
    assumptions: list[str] = field(default_factory=list)
    estimate: bool = True

    @property
    def label(self) -> str:
        return f"this CPU (estimate): {self.model}"


def number(text: str) -> float | None:
    """A data-table cell as a number; None for an empty cell."""
    return float(text) if text.strip() else None


def _int(text: str) -> int | None:
    return int(text) if text.strip() else None


def data_rows(name: str) -> list[dict[str, str]]:
    """The rows of one of tpututor's data tables (``tpututor/data/<name>``) as dicts."""
    return list(csv.DictReader(resources.files("tpututor").joinpath("data", name).read_text().splitlines()))


@functools.lru_cache(maxsize=1)
def chips() -> tuple[Chip, ...]:
    """All rows of the chip table, TPUs first, in generation order."""
    rows = []
    for r in data_rows("chips.csv"):
        rows.append(
            Chip(
                name=r["name"],
                kind=r["kind"],
                device_kinds=tuple(k for k in r["device_kinds"].split("|") if k),
                bf16_tflops=number(r["bf16_tflops"]),
                int8_tops=number(r["int8_tops"]),
                fp8_tflops=number(r["fp8_tflops"]),
                hbm_gib=number(r["hbm_gib"]),
                hbm_gbps=number(r["hbm_gbps"]),
                interconnect=r["interconnect"],
                interconnect_gbps=number(r["interconnect_gbps"]),
                mxu=r["mxu"],
                tensorcores=_int(r["tensorcores"]),
                mxus_per_core=_int(r["mxus_per_core"]),
                jax_devices_per_chip=int(r["jax_devices_per_chip"]),
                source=r["source"],
                source_date=r["source_date"],
                notes=r["notes"],
                ici_link_gbps=number(r.get("ici_link_gbps") or ""),
                ici_topology=r.get("ici_topology") or "",
                ici_wrap_at=_int(r.get("ici_wrap_at") or ""),
                ici_source=r.get("ici_source") or "",
                ici_source_date=r.get("ici_source_date") or "",
                chips_per_host=_int(r.get("chips_per_host") or ""),
                single_host_max_chips=_int(r.get("single_host_max_chips") or ""),
                hosts_source=r.get("hosts_source") or "",
            )
        )
    return tuple(rows)


def _norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.strip().lower())


def zones_table() -> list[dict[str, str]]:
    """The rows of ``data/tpu_zones.csv``: which TPU generations each zone offers, with sources."""
    return data_rows("tpu_zones.csv")


def _sizes(spec: str) -> list[int]:
    """``"1,4,8"`` -> [1, 4, 8]; ``"8,16,256..512/128"`` -> [8, 16, 256, 384, 512]."""
    out: list[int] = []
    for part in (p.strip() for p in spec.split(",")):
        if ".." in part:
            span, _, step = part.partition("/")
            lo, hi = (int(x) for x in span.split(".."))
            out += range(lo, hi + 1, int(step or 1))
        elif part:
            out.append(int(part))
    return out


def offered_types(zone: str) -> list[str]:
    """Every accelerator type tpututor's table says ``zone`` offers (empty if the zone is not in it)."""
    out = []
    for row in zones_table():
        if row["zone"] == zone:
            out += [f"{row['prefix']}-{n}" for n in _sizes(row["sizes"])]
    return out


def find(name: str) -> Chip | None:
    """The chip for a table name or a JAX ``device_kind``; None if not in the table.

    Matching is case-insensitive. Table names may carry a ``TPU`` prefix
    (``"TPU v5e"``, ``"tpu v6e"``); device kinds must match one of the
    row's known strings exactly (``"NVIDIA H100 PCIe"`` is a different card
    from the SXM H100 in the table, so it is not matched).
    """
    if not isinstance(name, str) or not name.strip():
        return None
    key = _norm(name)
    bare = key.removeprefix("tpu").strip() if key.startswith("tpu ") else key
    for chip in chips():
        names = {_norm(chip.name)} | {_norm(k) for k in chip.device_kinds}
        if key in names or bare == _norm(chip.name):
            return chip
    return None


def lookup(name: str) -> Chip:
    """Like :func:`find`, but a name not in the table is a clear ``KeyError``."""
    chip = find(name)
    if chip is None:
        known = ", ".join(c.name for c in chips())
        raise KeyError(
            f"{name!r} is not in tpututor's chip table. Known chips: {known}. "
            "JAX device kinds such as 'TPU v5 lite' or 'NVIDIA H100 80GB HBM3' also work."
        )
    return chip


# FLOPs per cycle per core for float32 FMA, assuming two vector FMA units.
_SIMD_FLOPS = (
    ("avx512f", "AVX-512", 2 * 16 * 2),
    ("avx2", "AVX2+FMA", 2 * 8 * 2),  # needs fma too; checked below
    ("avx", "AVX", 2 * 8),
    ("sse2", "SSE2", 2 * 4),
    ("asimd", "NEON", 2 * 4 * 2),
)
# AMD cores with AVX-512 at full width: Zen 5 (EPYC 9xx5 "Turin", Ryzen 9000). Zen 4 (EPYC 9xx4,
# Ryzen 7000) runs a 512-bit FMA as two halves on its two 256-bit pipes: 32 float32 FLOPs per
# cycle, what AVX2 gives (A. Yee, "Zen5's AVX512 Teardown", numberworld.org, read 2026-12-01).
_AMD_FULL_WIDTH_AVX512 = re.compile(r"\bEPYC\s+\d{3}5\b|\bRyzen\s+\d\s+9\d{3}", re.IGNORECASE)


# --------------------------------------------------------------------------- slices

# The TPU compiler's name for each generation (jax.experimental.topologies), and whether its ICI is a
# 2D or a 3D torus (which decides the shape of a slice of N chips).
_TOPOLOGY_NAME = {"v4": "v4", "v5e": "v5e", "v5p": "v5p", "v6e": "v6e", "7x": "tpu7x"}
_THREE_D = {"v4", "v5p", "7x"}


@dataclass(frozen=True)
class Slice:
    """A TPU slice as Cloud TPU sells it: chips in a torus, driven by one or more hosts (TPU VMs)."""

    name: str  # as asked for: "v5e-8", "v5litepod-16", "v5p-32", "tpu7x-8"
    chip: Chip
    chips: int
    shape: tuple[int, ...]  # chips along each torus axis: (2, 4) or (2, 2, 4)
    hosts: int
    chips_per_host: int

    @property
    def devices(self) -> int:
        """JAX devices: one per chip, two on chips whose TensorCores show as separate devices."""
        return self.chips * self.chip.jax_devices_per_chip

    @property
    def topology(self) -> str:
        """The topology name ``jax.experimental.topologies.get_topology_desc`` takes: ``"v5e:2x4"``."""
        return f"{_TOPOLOGY_NAME[self.chip.name]}:{'x'.join(map(str, self.shape))}"

    @property
    def host_bounds(self) -> tuple[int, int, int]:
        """The chips one host drives, as the 3D box the compiler's ``chips_per_host_bounds`` wants."""
        if self.hosts == 1:
            return (*self.shape, 1)[:3] if len(self.shape) == 2 else self.shape  # type: ignore[return-value]
        return (2, 2, 1)

    def describe(self) -> str:
        return (
            f"{self.name}: {self.chips} {self.chip.name} chips ({'x'.join(map(str, self.shape))}), "
            f"{self.hosts} host{'s' if self.hosts > 1 else ''} of {self.chips_per_host} chips, "
            f"{self.devices} JAX devices"
        )


def _torus_shape(chips: int, three_d: bool) -> tuple[int, ...] | None:
    """The standard slice shape for ``chips`` chips: 8 -> (2, 4) in 2D, 16 -> (2, 2, 4) in 3D."""
    if chips < 1 or chips & (chips - 1) or chips == 2:
        return None
    if not three_d:
        exp = chips.bit_length() - 1
        return (2 ** (exp // 2), 2 ** (exp - exp // 2))
    if chips < 4:
        return None
    dims = [2, 2, 1]
    while dims[0] * dims[1] * dims[2] < chips:
        # double the shortest axis, the last of equals first: 8 -> 2x2x2, 16 -> 2x2x4, 32 -> 2x4x4, 64 -> 4x4x4
        smallest = min(dims)
        dims[max(i for i in range(3) if dims[i] == smallest)] *= 2
    return tuple(dims)


def standard_shape(chip: str, chips: int) -> tuple[int, ...] | None:
    """The torus Cloud TPU gives ``chips`` chips of ``chip`` (``("v5e", 8)`` -> ``(2, 4)``,
    ``("v5p", 16)`` -> ``(2, 2, 4)``); None when that count is not a standard slice."""
    name = lookup(chip).name
    if name not in _TOPOLOGY_NAME:
        return None
    return _torus_shape(int(chips), name in _THREE_D)


def slice_of(name: str) -> Slice:
    """A slice from its Cloud TPU name: ``"v5e-8"`` (or ``"v5litepod-8"``) is 8 v5e chips on one host;
    ``"v5p-32"`` is 16 chips (v4 and v5p names count TensorCores) on 4 hosts; ``"v6e-256"`` is 256
    chips on 64 hosts; ``"tpu7x-8"`` is 4 chips (8 JAX devices).

    Hosts follow the chip table: a slice of up to ``single_host_max_chips`` chips is one TPU VM, a
    bigger one has ``chips_per_host`` chips on each VM.
    """
    from .runtime import parse_accelerator_type

    parsed = parse_accelerator_type(name) if isinstance(name, str) else None
    if parsed is None or parsed[0] not in _TOPOLOGY_NAME:
        raise ValueError(
            f"{name!r} is not a TPU slice the compiler knows: use a name like 'v5e-8', "
            f"'v5litepod-16', 'v6e-256', 'v5p-32', 'v4-8' or 'tpu7x-8'"
        )
    gen, chips = parsed
    chip = lookup(gen)
    shape = _torus_shape(chips, gen in _THREE_D)
    if shape is None:
        raise ValueError(
            f"{name!r} is {chips} chips, which is not a standard {gen} slice: use a power of two"
            + (" of at least 4 chips" if gen in _THREE_D else ", 1 or at least 4 chips")
        )
    per_host = chip.chips_per_host or 4
    single = chip.single_host_max_chips or per_host
    hosts = 1 if chips <= single else chips // per_host
    return Slice(
        name=name, chip=chip, chips=chips, shape=shape, hosts=hosts, chips_per_host=chips if hosts == 1 else per_host
    )


def estimate_cpu(model: str, cores: int, flags: Iterable[str], ghz: float | None) -> CpuEstimate:
    """Estimate the float32 peak of a CPU from its SIMD flags, cores and clock.

    peak = cores x GHz x FLOPs/cycle, with FLOPs/cycle from the widest vector
    unit the flags show and *two* FMA units per core assumed. An AMD core with
    AVX-512 counts as Zen 4 (two 256-bit FMA pipes, 32 FLOPs/cycle) unless its
    model name is a Zen 5 part. It is an upper bound: logical cores may be
    hyper-threads sharing one physical core, some Intel parts have one 512-bit
    FMA unit, and clocks drop under wide-vector load.
    """
    flagset = {f.lower() for f in flags}
    simd, per_cycle = "scalar", 2
    for flag, name, n in _SIMD_FLOPS:
        if flag in flagset and (flag != "avx2" or "fma" in flagset):
            simd, per_cycle = name, n
            break
    width = f"{simd}, two FMA units assumed"
    if simd == "AVX-512" and "amd" in model.lower() and not _AMD_FULL_WIDTH_AVX512.search(model):
        simd, per_cycle = "AVX-512 on 256-bit pipes", 2 * 8 * 2
        width = (
            "AVX-512 on an AMD core taken as Zen 4: 512-bit FMAs run as two halves on two 256-bit "
            "pipes; a Zen 5 part would do 64"
        )
    peak = cores * ghz * 1e9 * per_cycle if ghz and cores else None
    assumptions = [
        f"{per_cycle} float32 FLOPs per cycle per core ({width})",
        f"{cores} logical cores, all busy (hyper-threads count as cores: an upper bound)",
        f"clock {ghz:.2f} GHz as the OS reports it, no turbo or AVX down-clocking"
        if ghz
        else "clock unknown, so no estimate",
    ]
    return CpuEstimate(model, cores, ghz, simd, per_cycle, peak, assumptions)


def _fmt(value: float | int | None, spec: str = "g") -> str:
    return "–" if value is None else format(value, spec)


def markdown_table(rows: Iterable[Chip] | None = None, extra: Mapping[str, str] | None = None) -> str:
    """The chip table as Markdown, with a source link per row.

    ``extra`` adds one last row (for example this machine's CPU estimate),
    given as column name -> text.
    """
    rows = list(chips() if rows is None else rows)
    head = [
        "chip",
        "bf16 TFLOP/s",
        "int8 TOP/s",
        "HBM GiB",
        "HBM GB/s",
        "interconnect GB/s, both ways",
        "MXU",
        "FLOP/B ridge",
        "source (read)",
    ]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in rows:
        ridge = c.ridge_point
        cells = [
            c.label,
            _fmt(c.bf16_tflops),
            _fmt(c.int8_tops),
            _fmt(c.hbm_gib),
            _fmt(c.hbm_gbps),
            f"{_fmt(c.interconnect_gbps)} ({c.interconnect})" if c.interconnect else "–",
            c.mxu or "–",
            _fmt(ridge and round(ridge)),
            f"[{c.source_date}]({c.source})",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    if extra:
        lines.append("| " + " | ".join(extra.get(h, "–") for h in head) + " |")
    return "\n".join(lines)


# Label offsets (points) for chips whose labels would overlap their neighbours'.
_LABEL_PLACES = {
    "v3": (6, -9, "left"),
    "v4": (-6, 5, "right"),
    "v5e": (-7, -3, "right"),
    "v5p": (6, 4, "left"),
    "v6e": (-7, 3, "right"),
    "7x": (-7, 3, "right"),
    "A100-40GB": (0, 8, "center"),
    "A100-80GB": (6, -11, "left"),
    "H100": (-6, 5, "right"),
    "H200": (6, -11, "left"),
}


def plot_chips(rows: Iterable[Chip] | None = None, *, here: tuple[str, float, float] | None = None, ax=None):
    """Log-log plot of peak bf16 FLOP/s against memory bandwidth, one point per chip.

    ``here`` is ``(label, flops, bytes_per_second)`` for an extra highlighted
    point (this machine). Returns the matplotlib Axes. Imports matplotlib
    only when called.
    """
    import matplotlib.pyplot as plt

    rows = [c for c in (chips() if rows is None else rows) if c.peak_flops and c.hbm_bandwidth]
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    for kind, marker, color in (("tpu", "o", "tab:blue"), ("gpu", "s", "tab:green")):
        pts = [c for c in rows if c.kind == kind]
        ax.scatter(
            [c.hbm_bandwidth for c in pts], [c.peak_flops for c in pts], marker=marker, color=color, label=kind.upper()
        )
        for c in pts:
            dx, dy, ha = _LABEL_PLACES.get(c.name, (5, 3, "left"))
            ax.annotate(
                c.label, (c.hbm_bandwidth, c.peak_flops), textcoords="offset points", xytext=(dx, dy), ha=ha, fontsize=8
            )
    if here is not None:
        label, flops, bw = here
        ax.scatter([bw], [flops], marker="*", s=180, color="tab:red", label=label, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("memory bandwidth (bytes/s)")
    ax.set_ylabel("peak dense FLOP/s (bf16 for TPUs, GPUs)")
    ax.set_title("Compute against memory bandwidth, per chip")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right", fontsize=8)
    return ax
