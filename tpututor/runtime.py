"""What is this machine? Platform, accelerator, CPU and installed frameworks.

Nothing here imports a framework. Every probe reads through a :class:`Host`
(filesystem root, environment, command runner, package versions, loaded
modules), so a test can fake any machine: a Colab TPU, a Kaggle v5e-8, a
Cloud TPU VM, a laptop.

What each framework *sees* (``jax.devices()`` and friends) is asked on request
by :func:`probe_frameworks`, each framework in its own Python process, so one
broken install cannot break the report and TensorFlow can never be imported
before torch_xla in one process (that order aborts it).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .hardware import find

__all__ = [
    "Host",
    "Platform",
    "Accelerator",
    "CpuInfo",
    "Framework",
    "Runtime",
    "detect",
    "detect_platform",
    "detect_accelerator",
    "detect_cpu",
    "installed_frameworks",
    "dist_version",
    "parse_accelerator_type",
    "probe_frameworks",
    "FRAMEWORKS",
    "TF_TPU_DISTRIBUTIONS",
    "tensorflow_can_use_tpu",
    "PROBES",
    "TPU_PCI_IDS",
]

GOOGLE_PCI_VENDOR = "0x1ae0"
# PCI device id -> TPU generation (jax/_src/hardware_utils.py, torch_xla/_internal/tpu.py).
# 0x0027 is shared by v2 and v3; the subsystem device id tells them apart.
TPU_PCI_IDS: dict[str, str] = {
    "0x0027": "v2/v3",
    "0x005e": "v4",
    "0x0062": "v5p",
    "0x0063": "v5e",
    "0x006f": "v6e",
    "0x0076": "7x",
}
_V2_V3_SUBSYSTEM = {"0x004e": "v2", "0x004f": "v3"}
NVIDIA_NODES = ("/dev/nvidiactl", "/dev/nvidia0", "/proc/driver/nvidia/version", "/dev/dxg")

# Framework -> the distributions that provide it (the first one installed wins).
FRAMEWORKS: dict[str, tuple[str, ...]] = {
    "jax": ("jax",),
    "tensorflow": ("tensorflow-tpu", "tf-nightly-tpu", "tensorflow", "tensorflow-cpu", "tf-nightly"),
    "torch": ("torch",),
    "torch_xla": ("torch-xla",),
}
# The one rule for "can this TensorFlow use a TPU": only the TPU builds carry the TPU runtime
# (cloud.google.com/tpu/docs/supported-versions); tensorflow and tensorflow-cpu from PyPI cannot.
TF_TPU_DISTRIBUTIONS = ("tensorflow-tpu", "tf-nightly-tpu")


def tensorflow_can_use_tpu(distribution: str | None) -> bool:
    """True for the TensorFlow distributions built for TPUs (``tensorflow-tpu``, ``tf-nightly-tpu``)."""
    return distribution in TF_TPU_DISTRIBUTIONS


# Other packages worth knowing the version of.
PACKAGES = ("jaxlib", "libtpu", "libtpu-nightly", "keras", "numpy", "xprof", "tpututor")


def _run_command(argv: Sequence[str], timeout: float = 10.0) -> str | None:
    """Run a command; its stdout, or None when it is missing, fails or hangs."""
    try:
        out = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return None


@dataclass
class Host:
    """Where the probes look. The defaults are this machine; tests pass fakes.

    ``root`` is the filesystem root that absolute paths such as ``/sys`` are
    read under; ``run`` runs a command and returns its stdout or None;
    ``version`` returns an installed distribution's version or None;
    ``modules`` are the names of the imported modules (``google.colab``).
    """

    root: Path = Path("/")
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    run: Callable[[Sequence[str]], str | None] = _run_command
    version: Callable[[str], str | None] = dist_version
    modules: Collection[str] = field(default_factory=lambda: frozenset(sys.modules))
    cpu_count: int | None = field(
        default_factory=lambda: len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    )

    def path(self, p: str) -> Path:
        return Path(self.root) / p.lstrip("/")

    def read(self, p: str) -> str | None:
        """A file's text, or None when it is missing, unreadable or not text."""
        try:
            return self.path(p).read_text()
        except (OSError, UnicodeDecodeError, ValueError):
            return None

    def exists(self, p: str) -> bool:
        try:
            return self.path(p).exists()
        except OSError:
            return False

    def listdir(self, p: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(p)))
        except OSError:
            return []

    def getenv(self, name: str) -> str:
        """An environment variable, stripped; '' when unset."""
        value = self.env.get(name)
        return value.strip() if isinstance(value, str) else ""


# --------------------------------------------------------------------------- platform


@dataclass
class Platform:
    """Which kind of runtime this is: colab, colab-enterprise, kaggle, cloud-tpu-vm, local."""

    name: str
    evidence: list[str] = field(default_factory=list)
    legacy: str | None = None  # "colab-tpu-node" for the retired Colab TPU node
    hint: str | None = None


def detect_platform(host: Host | None = None, accelerator: Accelerator | None = None) -> Platform:
    host = host or Host()
    accelerator = accelerator or detect_accelerator(host)
    env_keys = [k for k in host.env if isinstance(k, str)]
    evidence: list[str] = []
    tpu_addr = host.getenv("COLAB_TPU_ADDR")

    if host.getenv("VERTEX_PRODUCT") == "COLAB_ENTERPRISE":
        plat = Platform("colab-enterprise", ["VERTEX_PRODUCT=COLAB_ENTERPRISE"])
    elif (
        "google.colab" in host.modules
        or host.getenv("COLAB_RELEASE_TAG")
        or any(k.startswith("COLAB_") and host.getenv(k) for k in env_keys)
    ):
        if "google.colab" in host.modules:
            evidence.append("module google.colab is loaded")
        evidence += [f"{k} is set" for k in sorted(env_keys) if k.startswith("COLAB_") and host.getenv(k)]
        plat = Platform("colab", evidence)
    elif any(k.startswith("KAGGLE_") for k in env_keys) or host.exists("/kaggle/input"):
        evidence = [f"{k} is set" for k in sorted(env_keys) if k.startswith("KAGGLE_")][:3]
        if host.exists("/kaggle/input"):
            evidence.append("/kaggle/input exists")
        plat = Platform("kaggle", evidence)
    else:
        if accelerator.kind == "tpu":
            plat = Platform("cloud-tpu-vm", [f"{accelerator.count} TPU chip(s) attached to this VM"])
        else:
            plat = Platform("local", ["no Colab, Kaggle or TPU VM markers"])

    if tpu_addr and accelerator.kind != "tpu":
        plat.legacy = "colab-tpu-node"
        plat.evidence.append(f"COLAB_TPU_ADDR={tpu_addr}")
        plat.hint = (
            "COLAB_TPU_ADDR belongs to the retired Colab 'TPU node' (a remote TPU reached over "
            "gRPC, retired in 2024). Today's Colab TPUs are TPU VMs: the chip is attached to "
            "this machine and JAX or PyTorch/XLA find it with no address. Choose Runtime > "
            "Change runtime type > TPU (v5e-1)."
        )
    return plat


# --------------------------------------------------------------------------- accelerator


@dataclass
class Accelerator:
    """The accelerator this process can reach: kind tpu, gpu or cpu."""

    kind: str
    generation: str | None = None  # TPU "v5e"; GPU chip-table name ("H100") when known
    count: int = 0  # TPU chips or GPUs on this host; logical cores for a CPU
    name: str = ""
    accelerator_type: str | None = None  # TPU_ACCELERATOR_TYPE, e.g. "v5litepod-8"
    memory_gb: float | None = None  # per GPU, from nvidia-smi
    evidence: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


_ACCEL_TYPE = re.compile(r"^(?:tpu)?(v2|v3|v4|v5p|v5e|v5litepod|v5lite|v6e|7x)-(\d+)$", re.I)
_GEN_ALIASES = {"v5litepod": "v5e", "v5lite": "v5e"}
# In these accelerator-type names the number counts TensorCores (two per chip);
# in the others it counts chips. TPU7x is assumed to follow v5p (two cores per chip).
_COUNTS_CORES = {"v2", "v3", "v4", "v5p", "7x"}


def parse_accelerator_type(value: str) -> tuple[str, int] | None:
    """``"v5litepod-8"`` -> ``("v5e", 8)`` chips; ``"v4-8"`` -> ``("v4", 4)``.

    Returns None for anything that is not a TPU accelerator type.
    """
    if not isinstance(value, str):
        return None
    m = _ACCEL_TYPE.match(value.strip())
    if not m:
        return None
    gen = _GEN_ALIASES.get(m.group(1).lower(), m.group(1).lower())
    n = int(m.group(2))
    if n <= 0:
        return None
    chips = max(1, n // 2) if gen in _COUNTS_CORES else n
    return gen, chips


def _hex(text: str | None) -> str | None:
    if text is None:
        return None
    text = text.strip().lower()
    return text if re.fullmatch(r"0x[0-9a-f]{1,4}", text) else None


def _tpu_pci_chips(host: Host) -> list[tuple[str, str]]:
    """(PCI address, generation) of every TPU chip on the PCI bus."""
    found = []
    base = "/sys/bus/pci/devices"
    for dev in host.listdir(base):
        if _hex(host.read(f"{base}/{dev}/vendor")) != GOOGLE_PCI_VENDOR:
            continue
        gen = TPU_PCI_IDS.get(_hex(host.read(f"{base}/{dev}/device")) or "")
        if gen is None:
            continue  # another Google device, e.g. the gVNIC network card
        if gen == "v2/v3":
            gen = _V2_V3_SUBSYSTEM.get(_hex(host.read(f"{base}/{dev}/subsystem_device")) or "", "v2/v3")
        found.append((dev, gen))
    return found


def _tpu_dev_nodes(host: Host) -> tuple[list[str], list[str]]:
    accel = [f"/dev/{n}" for n in host.listdir("/dev") if re.fullmatch(r"accel\d+", n)]
    vfio = [f"/dev/vfio/{n}" for n in host.listdir("/dev/vfio") if n.isdigit()]
    return accel, vfio


def _detect_tpu(host: Host) -> tuple[Accelerator | None, list[str]]:
    """The attached TPU (or None) and any problems seen on the way."""
    pci = _tpu_pci_chips(host)
    accel, vfio = _tpu_dev_nodes(host)
    type_value = host.getenv("TPU_ACCELERATOR_TYPE")
    parsed = parse_accelerator_type(type_value) if type_value else None
    problems = []
    if type_value and parsed is None:
        problems.append(f"TPU_ACCELERATOR_TYPE={type_value!r} is not a TPU type I know (e.g. v5litepod-8, v6e-8)")

    # /dev/accelN is TPU-specific; /dev/vfio/N only counts next to other TPU evidence.
    if not pci and not accel and not (vfio and parsed):
        if parsed:
            problems.append(
                f"TPU_ACCELERATOR_TYPE={type_value} is set but no TPU chip is visible "
                "(no PCI device of vendor 0x1ae0, no /dev/accel* or /dev/vfio/N): this process cannot use a TPU"
            )
        return None, problems

    evidence = [f"PCI {dev}: vendor {GOOGLE_PCI_VENDOR}, TPU {gen}" for dev, gen in pci]
    evidence += [f"{p} exists" for p in accel + vfio]
    if type_value:
        evidence.append(f"TPU_ACCELERATOR_TYPE={type_value}")
    gens = sorted({gen for _, gen in pci})
    generation = gens[0] if len(gens) == 1 else (parsed[0] if parsed else None)
    if len(gens) > 1:
        problems.append(f"mixed TPU generations on the PCI bus: {', '.join(gens)}")
    if generation == "v2/v3" and parsed:
        generation = parsed[0]
    count = len(pci) or len(accel) or len(vfio) or (parsed[1] if parsed else 0)
    name = f"TPU {generation}" if generation else "TPU (generation unknown)"
    return Accelerator("tpu", generation, count, name, type_value or None, evidence=evidence, problems=problems), []


def _parse_nvidia_smi(text: str | None) -> list[tuple[str, float | None]]:
    gpus = []
    for line in (text or "").splitlines():
        parts = [p.strip() for p in line.split(",")]
        if not parts or not parts[0]:
            continue
        mem = None
        if len(parts) > 1:
            m = re.match(r"([\d.]+)", parts[1])
            mem = round(float(m.group(1)) / 1024, 1) if m else None  # MiB -> GiB
        gpus.append((parts[0], mem))
    return gpus


def _detect_gpu(host: Host) -> Accelerator | None:
    nodes = [p for p in NVIDIA_NODES if host.exists(p)]
    if not nodes:
        return None
    smi = _parse_nvidia_smi(host.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"]))
    numbered = [n for n in host.listdir("/dev") if re.fullmatch(r"nvidia\d+", n)]
    problems = []
    if smi:
        name, mem = smi[0]
        count = len(smi)
    else:
        name, mem, count = "NVIDIA GPU (name unknown)", None, len(numbered) or 1
        problems.append("an NVIDIA driver is present but nvidia-smi gave no GPU list")
    chip = find(name)
    return Accelerator(
        "gpu",
        chip.name if chip else None,
        count,
        name,
        memory_gb=mem,
        evidence=[f"{p} exists" for p in nodes],
        problems=problems,
    )


def detect_accelerator(host: Host | None = None) -> Accelerator:
    """The accelerator of this host: a TPU if one is attached, else an NVIDIA GPU, else the CPU."""
    host = host or Host()
    tpu, problems = _detect_tpu(host)
    if tpu is not None:
        return tpu
    gpu = _detect_gpu(host)
    if gpu is not None:
        gpu.problems = problems + gpu.problems
        return gpu
    cpu = detect_cpu(host)
    return Accelerator("cpu", None, cpu.cores, cpu.model, evidence=["no TPU or NVIDIA GPU found"], problems=problems)


# --------------------------------------------------------------------------- cpu


@dataclass
class CpuInfo:
    model: str
    cores: int
    arch: str
    ghz: float | None
    simd: list[str]


_SIMD_FLAGS = ("sse2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile", "asimd", "sve")


def detect_cpu(host: Host | None = None) -> CpuInfo:
    """Model, logical cores, clock and SIMD flags, from /proc/cpuinfo where there is one."""
    import platform as _platform

    host = host or Host()
    text = host.read("/proc/cpuinfo") or ""
    fields: dict[str, str] = {}
    processors = 0
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "processor":
            processors += 1
        fields.setdefault(key, value.strip())
    model = fields.get("model name") or fields.get("hardware") or _platform.processor() or "unknown CPU"
    flags = set((fields.get("flags") or fields.get("features") or "").lower().split())
    return CpuInfo(
        model,
        host.cpu_count or processors or 1,
        _platform.machine() or "unknown",
        _cpu_ghz(host, model, fields.get("cpu mhz")),
        [f for f in _SIMD_FLAGS if f in flags],
    )


def _cpu_ghz(host: Host, model: str, current_mhz: str | None) -> float | None:
    """The highest clock the CPU reports: cpufreq's maximum, the model name's "@ 2.20GHz", or the current MHz."""
    candidates = []
    max_khz = host.read("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")
    m = re.search(r"@\s*([\d.]+)\s*GHz", model)
    for text, scale in ((max_khz, 1e-6), (m and m.group(1), 1.0), (current_mhz, 1e-3)):
        try:
            candidates.append(float(text.strip()) * scale)
        except (AttributeError, ValueError):
            continue
    good = [c for c in candidates if 0.1 < c < 10]
    return round(good[0], 2) if good else None


# --------------------------------------------------------------------------- frameworks


@dataclass
class Framework:
    """An installed framework; ``devices`` stays None until it is probed."""

    version: str | None
    distribution: str | None = None
    devices: list[str] | None = None
    platform: str | None = None
    device_kind: str | None = None
    error: str | None = None
    seconds: float | None = None


def installed_frameworks(host: Host | None = None) -> dict[str, Framework]:
    """Versions from package metadata; no framework is imported."""
    host = host or Host()
    out = {}
    for name, dists in FRAMEWORKS.items():
        for dist in dists:
            v = host.version(dist)
            if v:
                out[name] = Framework(v, dist)
                break
        else:
            out[name] = Framework(None)
    return out


def installed_packages(host: Host | None = None) -> dict[str, str | None]:
    host = host or Host()
    return {p: host.version(p) for p in PACKAGES}


# One short program per framework, run in a fresh interpreter. Each prints one
# JSON line: the devices it sees, its platform, and the first device's kind.
PROBES: dict[str, str] = {
    "jax": (
        "import json, jax\n"
        "ds = jax.devices()\n"
        "print(json.dumps({'devices': [f'{d.platform}:{d.id}' for d in ds],\n"
        "                  'platform': ds[0].platform, 'device_kind': ds[0].device_kind}))"
    ),
    "tensorflow": (
        "import json, tensorflow as tf\n"
        "ds = tf.config.list_logical_devices()\n"
        "kinds = [d.device_type for d in ds]\n"
        "best = next((k for k in ('TPU', 'GPU') if k in kinds), 'CPU')\n"
        "print(json.dumps({'devices': [d.name for d in ds], 'platform': best.lower(),\n"
        "                  'device_kind': best}))"
    ),
    "torch": (
        "import json, torch\n"
        "ds = ['cpu'] + [f'cuda:{i}' for i in range(torch.cuda.device_count())]\n"
        "kind = torch.cuda.get_device_name(0) if len(ds) > 1 else 'cpu'\n"
        "print(json.dumps({'devices': ds, 'platform': 'cuda' if len(ds) > 1 else 'cpu',\n"
        "                  'device_kind': kind}))"
    ),
    "torch_xla": (
        "import json, torch, torch_xla, torch_xla.runtime as xr\n"
        "ds = torch_xla.real_devices()\n"
        "print(json.dumps({'devices': ds, 'platform': xr.device_type().lower(),\n"
        "                  'device_kind': xr.device_type()}))"
    ),
}


def _probe_one(name: str, timeout: float, python: str) -> dict:
    import time

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    start = time.perf_counter()
    try:
        out = subprocess.run([python, "-c", PROBES[name]], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"no answer within {timeout:.0f} s", "seconds": timeout}
    except OSError as exc:
        return {"error": f"could not start {python}: {exc}"}
    seconds = round(time.perf_counter() - start, 2)
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode == 0 and lines:
        try:
            return {**json.loads(lines[-1]), "seconds": seconds}
        except json.JSONDecodeError:
            pass
    tail = [ln for ln in (out.stderr or out.stdout).strip().splitlines() if ln.strip()]
    reason = tail[-1] if tail else f"exit status {out.returncode}"
    return {"error": reason[-300:], "seconds": seconds}


def probe_frameworks(
    names: Iterable[str] | None = None,
    *,
    parallel: bool = False,
    timeout: float = 120.0,
    python: str | None = None,
) -> dict[str, dict]:
    """Ask each framework which devices it sees, each in its own Python process.

    Returns name -> {devices, platform, device_kind, seconds} or {error, seconds}.
    ``parallel`` runs the probes at once; only safe without an accelerator,
    since a TPU is owned by one process at a time.
    """
    names = list(PROBES if names is None else names)
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        raise ValueError(f"no probe for {unknown}; choose from {sorted(PROBES)}")
    python = python or sys.executable
    if parallel:
        with ThreadPoolExecutor(max_workers=len(names) or 1) as pool:
            results = list(pool.map(lambda n: _probe_one(n, timeout, python), names))
        return dict(zip(names, results))
    return {n: _probe_one(n, timeout, python) for n in names}


# --------------------------------------------------------------------------- everything


@dataclass
class Runtime:
    platform: Platform
    accelerator: Accelerator
    cpu: CpuInfo
    frameworks: dict[str, Framework]
    packages: dict[str, str | None]
    env: dict[str, str]
    python: str

    def summary(self) -> str:
        """One line: platform, accelerator and count, e.g. ``colab · TPU v5e x1``."""
        a = self.accelerator
        if a.kind == "cpu":
            what = f"CPU only: {a.name} ({a.count} cores)"
        else:
            what = f"{a.name} x{a.count}"
        legacy = f" (legacy {self.platform.legacy})" if self.platform.legacy else ""
        return f"{self.platform.name}{legacy} · {what}"

    def to_dict(self) -> dict:
        return asdict(self)


# Environment variables that change what the frameworks do.
RELEVANT_ENV = (
    "TPU_ACCELERATOR_TYPE",
    "TPU_NAME",
    "TPU_WORKER_ID",
    "TPU_VISIBLE_CHIPS",
    "COLAB_TPU_ADDR",
    "COLAB_TPU_1VM",
    "COLAB_GPU",
    "ISTPUVM",
    "PJRT_DEVICE",
    "CPU_NUM_DEVICES",
    "JAX_PLATFORMS",
    "JAX_NUM_CPU_DEVICES",
    "XLA_FLAGS",
    "CUDA_VISIBLE_DEVICES",
    "TPUTUTOR_PROFILE",
)


def detect(host: Host | None = None) -> Runtime:
    """Everything that can be known without importing a framework."""
    host = host or Host()
    accelerator = detect_accelerator(host)
    return Runtime(
        platform=detect_platform(host, accelerator),
        accelerator=accelerator,
        cpu=detect_cpu(host),
        frameworks=installed_frameworks(host),
        packages=installed_packages(host),
        env={k: host.env[k] for k in RELEVANT_ENV if isinstance(host.env.get(k), str) and host.env[k]},
        python=sys.version.split()[0],
    )
