"""Workshop pre-flight: can this machine or runtime do the course, or the open lesson? One line per
check, with a fix.

``python -m tpututor doctor --preflight [--lesson NN_topic]`` runs :func:`run` and exits non-zero
when a check FAILs (something blocks); a WARN is worth knowing but does not block. A check is OK
only when its probe answered: a framework that did not start is never reported as seeing devices.

What is checked follows what is asked: with a lesson (``--lesson``, or the one whose setup cell
ran in this runtime, which records it in ``$TPUTUTOR_LESSON``) its imports are required and its
optional imports are warnings; without one, the whole course: JAX is required, everything else
some lesson uses is optional. The lessons' needs come from the table shipped with the package
(``tpututor.lessons``), so the check works on Colab and Kaggle, where there is no clone.

Every input can be faked (host, probes, disk, the clone), so the tests can build a broken machine.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import frameworks, lessons
from .launch import ADDONS, LESSON_ENV
from .runtime import FRAMEWORKS, Host, detect, probe_frameworks

__all__ = ["Check", "run", "format_checks", "MIN_DISK_GB", "MIN_MEMORY_GB"]

MIN_DISK_GB = 2.0  # traces, compilation caches, checkpoints and executed notebooks
MIN_MEMORY_GB = 4.0  # the largest lesson with room to spare
_INSTALL = {
    "jax": "pip install 'tpututor[jax]'",
    "tensorflow": "pip install 'tpututor[tf]'",
    "torch": "pip install 'tpututor[torch-xla]'",
    "torch_xla": "pip install 'tpututor[torch-xla]'",
}
_HOSTED = ("colab", "colab-enterprise", "kaggle")


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


def _users(name: str) -> str:
    """Which lessons import ``name`` (for a warning's text)."""
    using = [
        stem.split("_")[0] for stem, entry in lessons.table().items() if name in entry["imports"] + entry["optional"]
    ]
    return f"lesson{'s' if len(using) > 1 else ''} {', '.join(using)}" if using else "no lesson"


def _needs(lesson: str | None) -> tuple[list[str], list[str], str]:
    """(required imports, optional imports, devices) for a lesson, or for the whole course."""
    if lesson:
        entry = lessons.get(lesson)
        return list(entry["imports"]), [n for n in entry["optional"] if n not in entry["imports"]], entry["devices"]
    everything = lessons.imports(optional=True)
    return ["jax"], [n for n in everything if n != "jax"], "cpu"


def _framework_check(name: str, required: bool, installed: str | None, result: dict | None, why: str) -> Check:
    level = "fail" if required else "warn"
    if not installed:
        return Check(
            name,
            level,
            "not installed" + ("" if required else f": {why} will skip"),
            _INSTALL.get(name, f"pip install {name}"),
        )
    if result is None or result.get("error"):
        reason = (result or {}).get("error", "was not probed")
        return Check(
            name,
            level,
            f"{installed} is installed but does not start: {reason}",
            f"reinstall it (pip install --force-reinstall {name}), or see python -m tpututor doctor",
        )
    return Check(name, "ok", f"{installed}, sees {', '.join(result['devices'][:4])}")


def _package_check(name: str, required: bool, why: str, timeout: float) -> Check:
    status = frameworks.status(name, timeout=timeout)
    level = "fail" if required else "warn"
    if status.usable:
        return Check(name, "ok", f"{status.version or 'installed'}, imports")
    detail = status.skipped(why) if not required else (status.error or "not installed")
    return Check(name, level, detail, f"pip install '{ADDONS.get(name, name)}'")


def _devices_check(rt, jax_probe: dict | None, devices: str) -> Check:
    acc = rt.accelerator
    if jax_probe is None:
        seen = None
    elif jax_probe.get("error"):
        return Check(
            "devices",
            "fail",
            f"{acc.name} x{acc.count} here, but JAX did not start, so what it can use is unknown",
            "fix the jax line above first",
        )
    else:
        seen = jax_probe.get("platform")
    if acc.kind in ("tpu", "gpu") and seen == "cpu":
        fix = "pip install 'jax[tpu]'" if acc.kind == "tpu" else "pip install 'jax[cuda12]'"
        return Check("devices", "fail", f"{acc.name} x{acc.count} attached but JAX sees only the CPU", fix)
    if devices in ("tpu-needed", "slice-needed") and acc.kind != "tpu":
        return Check(
            "devices",
            "fail",
            f"this needs a TPU{' slice' if devices == 'slice-needed' else ''}; here: {rt.summary()}",
            "open it on a TPU runtime (Colab, Kaggle) or a TPU VM",
        )
    if acc.kind == "cpu":
        return Check(
            "devices",
            "ok",
            f"CPU only ({acc.count} cores): lessons run on the CPU, sharding lessons on 8 simulated devices",
        )
    if seen is None:
        return Check(
            "devices",
            "warn",
            f"{acc.name} x{acc.count} attached; JAX was not asked what it sees",
            "run python -m tpututor doctor",
        )
    return Check("devices", "ok", f"{acc.name} x{acc.count}, and JAX ({seen}) sees it")


def _clone() -> Path | None:
    """The clone of the course this runs in, if any."""
    try:
        return lessons.find_root()
    except FileNotFoundError:
        return None


def run(
    host: Host | None = None,
    *,
    probes: dict[str, dict] | None = None,
    disk_free_gb: Callable[[], float] | None = None,
    lesson: str | None = None,
    clone: Callable[[], Path | None] = _clone,
    timeout: float = 120.0,
) -> list[Check]:
    """Run every check. ``probes`` stands in for asking each framework, ``disk_free_gb`` for the disk,
    ``clone`` for finding the repository; ``lesson`` defaults to ``$TPUTUTOR_LESSON``."""
    host = host or Host()
    rt = detect(host)
    lesson = lesson or host.getenv(LESSON_ENV) or None
    checks: list[Check] = []

    py = sys.version_info
    checks.append(
        Check(
            "python",
            "ok" if py >= (3, 11) else "fail",
            f"{py.major}.{py.minor}",
            "use Python 3.11 or newer (the course is tested on 3.11)",
        )
    )

    if lesson is not None and lesson not in lessons.table():
        checks.append(
            Check(
                "lesson",
                "fail",
                f"no lesson {lesson!r} in this tpututor",
                f"choose one of {', '.join(lessons.names())}",
            )
        )
        return checks
    required, optional, devices = _needs(lesson)
    fw_names = [n for n in required + optional if n in FRAMEWORKS]
    installed = {n: rt.frameworks[n].version for n in fw_names}
    if probes is None:
        probes = probe_frameworks(
            [n for n in fw_names if installed[n]], parallel=rt.accelerator.kind == "cpu", timeout=timeout
        )
    for name in required + optional:
        why = f"{'this lesson' if lesson else _users(name)}"
        if name in FRAMEWORKS:
            checks.append(_framework_check(name, name in required, installed[name], probes.get(name), why))
        else:
            checks.append(_package_check(name, name in required, why, timeout))

    checks.append(_devices_check(rt, probes.get("jax") if installed.get("jax") else None, devices))

    free = disk_free_gb() if disk_free_gb else shutil.disk_usage(Path.cwd()).free / 2**30
    checks.append(
        Check(
            "disk",
            "ok" if free >= MIN_DISK_GB else "fail",
            f"{free:.1f} GiB free here",
            f"free at least {MIN_DISK_GB:.0f} GiB (traces, caches, checkpoints, executed notebooks)",
        )
    )

    memory = _memory_gb(host)
    if memory is None:
        checks.append(
            Check("memory", "warn", "unknown (no /proc/meminfo)", f"make sure {MIN_MEMORY_GB:.0f} GiB are free")
        )
    else:
        checks.append(
            Check(
                "memory",
                "ok" if memory >= MIN_MEMORY_GB else "fail",
                f"{memory:.1f} GiB available",
                f"close other programs, or pick a runtime with at least {MIN_MEMORY_GB:.0f} GiB",
            )
        )

    root = clone()
    if lesson:
        checks.append(Check("lesson", "ok", f"{lesson}: {lessons.get(lesson)['title']}"))
    elif root is not None:
        count = len(list((root / "notebooks").glob("[0-9][0-9]*_*.ipynb")))
        checks.append(
            Check(
                "lessons",
                "ok" if count else "fail",
                f"{count} lessons in {root / 'notebooks'}",
                "git checkout the notebooks/ folder again",
            )
        )
    elif rt.platform.name in _HOSTED:
        checks.append(
            Check(
                "lessons",
                "ok",
                f"{len(lessons.table())} lessons, each opened from its badge on "
                f"{rt.platform.name}; run a lesson's setup cell to check that lesson",
            )
        )
    else:
        checks.append(
            Check(
                "lessons",
                "warn",
                "no clone of the course here",
                "git clone the course repository and run make lab, or open the lessons from their Colab badges",
            )
        )
    return checks


def format_checks(checks: list[Check]) -> str:
    blocking = [c for c in checks if c.status == "fail"]
    verdict = (
        f"NOT READY: {len(blocking)} check(s) block the workshop"
        if blocking
        else "READY for the workshop" + (" (see the warnings)" if any(c.status == "warn" for c in checks) else "")
    )
    return "\n".join([c.line() for c in checks] + ["", verdict])
