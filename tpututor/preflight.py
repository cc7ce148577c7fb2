"""Workshop pre-flight: can this machine or runtime do the course? One line per check, with a fix.

``python -m tpututor doctor --preflight`` runs :func:`run` and exits non-zero
when a check FAILs (something blocks the workshop); a WARN is worth knowing but
does not block. Every input can be faked (host, framework probes, disk), so
the tests can build a broken machine.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from . import runner
from .runtime import Host, detect, probe_frameworks

__all__ = ["Check", "run", "format_checks", "MIN_DISK_GB", "MIN_MEMORY_GB"]

MIN_DISK_GB = 2.0  # traces, compilation caches and executed notebooks
MIN_MEMORY_GB = 4.0  # the largest lesson (BERT in lesson 03) with room to spare
REQUIRED = ("jax",)
OPTIONAL = {"tensorflow": "lesson 02's TensorFlow section and lesson 04",
            "torch_xla": "lesson 03 and the PyTorch sections of lessons 02, 05 and 06"}


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # "ok" | "warn" | "fail"
    detail: str
    fix: str = ""

    def line(self) -> str:
        text = f"{self.status.upper():<4}  {self.name:<22} {self.detail}"
        return f"{text}\n{'':28}fix: {self.fix}" if self.fix and self.status != "ok" else text


def _memory_gb(host: Host) -> float | None:
    for line in (host.read("/proc/meminfo") or "").splitlines():
        if line.startswith("MemAvailable:"):
            try:
                return int(line.split()[1]) / 2**20  # kB -> GiB
            except (IndexError, ValueError):
                return None
    return None


def run(host: Host | None = None, *, probes: dict[str, dict] | None = None,
        disk_free_gb: Callable[[], float] | None = None, notebooks: Path | None = None) -> list[Check]:
    """Run every check. ``probes`` stands in for asking each framework; ``disk_free_gb`` for the disk."""
    host = host or Host()
    rt = detect(host)
    checks = []

    py = sys.version_info
    checks.append(Check("python", "ok" if py >= (3, 10) else "fail", f"{py.major}.{py.minor}",
                        "use Python 3.10 or newer (the course is tested on 3.11)"))

    installed = [n for n, f in rt.frameworks.items() if f.version]
    if probes is None:
        probes = probe_frameworks([n for n in installed if n != "torch"],
                                  parallel=rt.accelerator.kind == "cpu", timeout=180)
    for name in REQUIRED:
        result = probes.get(name)
        if not rt.frameworks[name].version:
            checks.append(Check(name, "fail", "not installed", "pip install 'tpututor[jax]' (or run make lab)"))
        elif result is None or result.get("error"):
            reason = (result or {}).get("error", "was not probed")
            checks.append(Check(name, "fail", f"installed but does not start: {reason}",
                                "reinstall it: pip install --force-reinstall jax jaxlib"))
        else:
            checks.append(Check(name, "ok", f"{rt.frameworks[name].version}, sees {', '.join(result['devices'][:4])}"))
    for name, used_by in OPTIONAL.items():
        result = probes.get(name)
        if not rt.frameworks[name].version:
            checks.append(Check(name, "warn", f"not installed: {used_by} will skip",
                                f"pip install 'tpututor[{'tf' if name == 'tensorflow' else 'torch-xla'}]'"))
        elif result is None or result.get("error"):
            checks.append(Check(name, "warn", f"installed but does not start: {(result or {}).get('error')}",
                                "see the warnings of python -m tpututor doctor"))
        else:
            checks.append(Check(name, "ok", f"{rt.frameworks[name].version}, sees {', '.join(result['devices'][:4])}"))

    jax_sees = (probes.get("jax") or {}).get("platform")
    acc = rt.accelerator
    if acc.kind in ("tpu", "gpu") and jax_sees == "cpu":
        fix = "pip install 'jax[tpu]'" if acc.kind == "tpu" else "pip install 'jax[cuda12]'"
        checks.append(Check("devices", "fail", f"{acc.name} x{acc.count} attached but JAX sees only the CPU", fix))
    elif acc.kind == "cpu":
        checks.append(Check("devices", "ok", f"CPU only ({acc.count} cores): every lesson runs; "
                                             "lesson 05 simulates 8 devices"))
    else:
        checks.append(Check("devices", "ok", f"{acc.name} x{acc.count}, and JAX sees it"))

    free = disk_free_gb() if disk_free_gb else shutil.disk_usage(Path.cwd()).free / 2**30
    checks.append(Check("disk", "ok" if free >= MIN_DISK_GB else "fail", f"{free:.1f} GiB free here",
                        f"free at least {MIN_DISK_GB:.0f} GiB (traces, caches, executed notebooks)"))

    memory = _memory_gb(host)
    if memory is None:
        checks.append(Check("memory", "warn", "unknown (no /proc/meminfo)", "make sure 4 GiB are free"))
    else:
        checks.append(Check("memory", "ok" if memory >= MIN_MEMORY_GB else "fail", f"{memory:.1f} GiB available",
                            f"close other programs, or pick a runtime with at least {MIN_MEMORY_GB:.0f} GiB"))

    notebooks = runner.NOTEBOOKS if notebooks is None else Path(notebooks)
    lessons = runner.discover(notebooks) if notebooks.is_dir() else []
    if lessons:
        checks.append(Check("notebooks", "ok", f"{len(lessons)} lessons in {notebooks}"))
    else:
        checks.append(Check("notebooks", "fail", f"no lessons at {notebooks}",
                            "git clone the course repository, or open the lessons from their Colab badges"))
    return checks


def format_checks(checks: list[Check]) -> str:
    blocking = [c for c in checks if c.status == "fail"]
    verdict = (f"NOT READY: {len(blocking)} check(s) block the workshop" if blocking
               else "READY for the workshop" + (" (see the warnings)" if any(c.status == "warn" for c in checks) else ""))
    return "\n".join([c.line() for c in checks] + ["", verdict])
