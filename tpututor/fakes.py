"""Fake machines: what detection sees on a Colab TPU, a Kaggle v5e-8, a laptop...

:func:`make_host` writes a small filesystem (``/sys/bus/pci``, ``/dev``,
``/proc``) under a folder and returns a :class:`~tpututor.runtime.Host` that
reads it, with a fake environment, fake commands (``nvidia-smi``) and fake
installed packages. :data:`MACHINES` describes the runtimes a learner meets.
The tests use them, and lesson 00a (where am I running?) uses them to show what the doctor would
report on hardware you do not have.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .launch import ADDONS, pins
from .runtime import Host

__all__ = [
    "Machine",
    "MACHINES",
    "make_host",
    "COLAB_TPU_PACKAGES",
    "COLAB_JAX_STACK",
    "COLAB_PYTHON",
    "colab_requirements",
]

# Packages as a Colab TPU runtime ships them, and the ones built on its JAX ([colab] in
# tpututor/data/pins.toml, where the snapshot is named). `make colab` builds its environment from them,
# on the same Python.
COLAB_TPU_PACKAGES: dict[str, str] = dict(pins()["colab"]["packages"])
COLAB_JAX_STACK: tuple[str, ...] = tuple(pins()["colab"]["jax-stack"])
COLAB_PYTHON = "3.13"  # the Python of that runtime (backend-info, same snapshot)


def colab_requirements() -> list[str]:
    """What ``make colab`` installs to stand in for a Colab TPU runtime: its packages at its versions
    (torch from PyPI, which is the CUDA build: Colab's ``+cpu`` wheel lives on PyTorch's own index),
    then the add-ons a lesson's setup cell installs there (``tpututor.launch.ADDONS``)."""
    shipped = {name: version.split("+")[0] for name, version in COLAB_TPU_PACKAGES.items()}
    out = [f"{name}=={version}" for name, version in shipped.items()]
    for requirement in ADDONS.values():
        name = requirement.split("==")[0]
        if name not in shipped:
            out.append(requirement)
    return out


LAPTOP_PACKAGES = {name: pins()["lock"][name] for name in ("jax", "jaxlib", "numpy")}  # what make lab installs


@dataclass(frozen=True)
class Machine:
    """A fake machine: its PCI devices, /dev nodes, environment, commands and packages."""

    description: str
    pci: Sequence[tuple[str, ...]] = ()  # (vendor, device) or (vendor, device, subsystem_device)
    dev: Sequence[str] = ()  # paths under /dev, e.g. "accel0", "vfio/0", "nvidiactl"
    env: Mapping[str, str] = field(default_factory=dict)
    commands: Mapping[str, str] = field(default_factory=dict)  # program -> its stdout
    packages: Mapping[str, str] = field(default_factory=dict)
    modules: Sequence[str] = ()
    files: Mapping[str, str] = field(default_factory=dict)  # extra files: path -> text
    cpu_count: int = 4


def _tpu(device: str, n: int, **extra) -> list[tuple[str, ...]]:
    return [("0x1ae0", device, *extra.get("subsystem", ()))] * n


CPUINFO = (
    "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\ncpu MHz\t\t: 2200.000\n"
    "flags\t\t: fpu sse2 avx avx2 fma avx512f\n\nprocessor\t: 1\n"
)
_COLAB_ENV = {"COLAB_RELEASE_TAG": "release-colab-20261101-060000", "COLAB_GPU": ""}

MACHINES: dict[str, Machine] = {
    "laptop-cpu": Machine(
        "a laptop with no accelerator",
        packages=LAPTOP_PACKAGES,
        pci=[("0x8086", "0x9a49")],
        files={"/proc/cpuinfo": CPUINFO},
    ),
    "colab-cpu": Machine(
        "Colab, CPU runtime",
        env=_COLAB_ENV,
        modules=["google.colab"],
        packages=LAPTOP_PACKAGES,
        files={"/proc/cpuinfo": CPUINFO},
    ),
    "colab-t4": Machine(
        "Colab, T4 GPU runtime",
        env={**_COLAB_ENV, "COLAB_GPU": "1"},
        modules=["google.colab"],
        dev=["nvidiactl", "nvidia0"],
        files={"/proc/driver/nvidia/version": "NVRM version: 550.54.15\n"},
        commands={"nvidia-smi": "Tesla T4, 15360\n"},
        packages={**LAPTOP_PACKAGES, "torch": "2.9.0+cu126"},
    ),
    "colab-v5e-1": Machine(
        "Colab, TPU v5e-1 runtime",
        pci=_tpu("0x0063", 1),
        dev=["vfio/0", "vfio/vfio"],
        env={**_COLAB_ENV, "COLAB_TPU_1VM": "1", "TPU_ACCELERATOR_TYPE": "v5e-1", "TPU_SKIP_MDS_QUERY": "1"},
        modules=["google.colab"],
        packages=COLAB_TPU_PACKAGES,
    ),
    "kaggle-v5e-8": Machine(
        "Kaggle, TPU v5e-8",
        pci=_tpu("0x0063", 8),
        dev=[f"vfio/{i}" for i in range(8)],
        env={
            "KAGGLE_KERNEL_RUN_TYPE": "Interactive",
            "ISTPUVM": "1",
            "TPU_PROCESS_ADDRESSES": "local",
            "TPU_ACCELERATOR_TYPE": "v5litepod-8",
        },
        packages={
            "jax": "0.7.2",
            "jaxlib": "0.7.2",
            "libtpu": "0.0.17",
            "tensorflow-cpu": "2.20.0",
            "torch": "2.8.0",
            "torch-xla": "2.8.0",
        },
    ),
    "tpu-vm-v4-8": Machine(
        "Cloud TPU VM, v4-8",
        pci=_tpu("0x005e", 4),
        dev=[f"accel{i}" for i in range(4)],
        env={"TPU_ACCELERATOR_TYPE": "v4-8", "TPU_WORKER_ID": "0"},
        packages={"jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": "0.0.30"},
    ),
    "tpu-vm-v6e-8": Machine(
        "Cloud TPU VM, v6e-8",
        pci=_tpu("0x006f", 8),
        dev=[f"vfio/{i}" for i in range(8)],
        env={"TPU_ACCELERATOR_TYPE": "v6e-8"},
        packages={"jax": "0.10.2", "jaxlib": "0.10.2", "libtpu": "0.0.30"},
    ),
    "colab-tpu-node": Machine(
        "the retired Colab TPU node (a v2-8 reached over gRPC)",
        env={"COLAB_TPU_ADDR": "10.0.0.2:8470"},
        packages=LAPTOP_PACKAGES,
    ),
    "tpu-no-libtpu": Machine(
        "a TPU VM (v5e-4) where only CPU JAX is installed",
        pci=_tpu("0x0063", 4),
        dev=[f"vfio/{i}" for i in range(4)],
        env={"TPU_ACCELERATOR_TYPE": "v5litepod-4"},
        packages=LAPTOP_PACKAGES,
    ),
}


def make_host(root: str | Path, machine: Machine | str) -> Host:
    """Write ``machine``'s files under ``root`` and return a Host that reads them."""
    if isinstance(machine, str):
        if machine not in MACHINES:
            raise KeyError(f"no fake machine {machine!r}; choose from {sorted(MACHINES)}")
        machine = MACHINES[machine]
    root = Path(root)
    pci_root = root / "sys/bus/pci/devices"
    pci_root.mkdir(parents=True, exist_ok=True)
    for i, ids in enumerate(machine.pci):
        d = pci_root / f"0000:00:{i + 4:02x}.0"
        d.mkdir(exist_ok=True)
        for name, value in zip(("vendor", "device", "subsystem_device"), ids):
            (d / name).write_text(value + "\n")
    (root / "dev").mkdir(exist_ok=True)
    for node in machine.dev:
        path = root / "dev" / node
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
    for path, text in machine.files.items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def run(argv: Sequence[str]) -> str | None:
        return machine.commands.get(Path(argv[0]).name)

    return Host(
        root=root,
        env=dict(machine.env),
        run=run,
        version=machine.packages.get,
        modules=frozenset(machine.modules),
        cpu_count=machine.cpu_count,
    )
