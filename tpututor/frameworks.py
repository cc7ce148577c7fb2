"""Use a framework if it works here, or say plainly why not.

An installed framework that fails to import (a torch_xla built for another torch, a
tensorflow-tpu whose libtpu conflicts with JAX's, a half-finished install) is treated exactly
like an absent one: :func:`load` returns None and :func:`status` holds the reason, quoting the
import error, so a lesson prints "skipped" with that reason instead of a traceback::

    tf = frameworks.load("tensorflow")
    if tf is None:
        print(frameworks.status("tensorflow").skipped("the TensorFlow section"))

:func:`available` asks each framework in a fresh interpreter (cached), so a lesson can decide
what to time or run without importing anything into its own kernel.
"""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from types import ModuleType

from .runtime import FRAMEWORKS as DISTRIBUTIONS
from .runtime import detect_accelerator, dist_version

__all__ = ["Status", "load", "status", "available", "FRAMEWORKS"]

FRAMEWORKS = ("jax", "numpy", "torch", "torch_xla", "tensorflow")
_DISTS = {**DISTRIBUTIONS, "numpy": ("numpy",), "google.cloud.tpu_v2": ("google-cloud-tpu",)}  # module -> distributions
_STATUS: dict[str, Status] = {}


@dataclass(frozen=True)
class Status:
    """Whether a framework can be used here, and if not, why."""

    name: str
    version: str | None  # from package metadata; None when not installed
    error: str | None = None  # None when it imports; else the reason, e.g. "ImportError: ..."

    @property
    def usable(self) -> bool:
        return self.error is None

    def skipped(self, what: str = "this section") -> str:
        """One line for a lesson: what is skipped and why."""
        if self.version is None:
            return f"{self.name} is not installed here: {what} is skipped"
        return f"{self.name} {self.version} is installed but cannot be used here ({self.error}): {what} is skipped"


def _installed(name: str) -> str | None:
    for dist in _DISTS.get(name, (name,)):
        version = dist_version(dist)
        if version:
            return version
    return None


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")


def _refusal(name: str) -> str | None:
    """Reasons not to even try an import in this process."""
    if name == "torch_xla" and "tensorflow" in sys.modules and "torch_xla" not in sys.modules:
        return (
            "TensorFlow is already imported in this process, and importing torch_xla after it aborts "
            "the process: restart the kernel and use torch_xla before TensorFlow, or run it in another process"
        )
    return None


def _pjrt_default() -> None:
    # torch_xla never picks CUDA itself; without a TPU say CPU, quietly, instead of its warning.
    if "PJRT_DEVICE" not in os.environ and detect_accelerator().kind != "tpu":
        os.environ["PJRT_DEVICE"] = "CPU"


def load(name: str) -> ModuleType | None:
    """Import ``name`` in this process; None when it is absent or broken (see :func:`status`)."""
    if name in sys.modules:  # imported already, by the lesson or by us
        _STATUS[name] = Status(name, _installed(name))
        return sys.modules[name]
    version = _installed(name)
    if version is None:
        _STATUS[name] = Status(name, None, "not installed")
        return None
    refusal = _refusal(name)
    if refusal:
        _STATUS[name] = Status(name, version, refusal)
        return None
    if name == "torch_xla":
        _pjrt_default()
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # ImportError, OSError (a missing .so), AttributeError (version skew)...
        _STATUS[name] = Status(name, version, _first_line(exc))
        return None
    _STATUS[name] = Status(name, version)
    return module


def _check(name: str, timeout: float) -> Status:
    version = _installed(name)
    if version is None:
        return Status(name, None, "not installed")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
    if name == "torch_xla" and "PJRT_DEVICE" not in env and detect_accelerator().kind != "tpu":
        env["PJRT_DEVICE"] = "CPU"
    try:
        out = subprocess.run(
            [sys.executable, "-c", f"import {name}"], capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return Status(name, version, f"import {name} did not finish within {timeout:.0f} s")
    if out.returncode == 0:
        return Status(name, version)
    tail = [ln for ln in out.stderr.strip().splitlines() if ln.strip()]
    return Status(name, version, (tail[-1] if tail else f"import {name} exited with status {out.returncode}")[:300])


def status(name: str, *, timeout: float = 120.0) -> Status:
    """Can ``name`` be used on this machine? Decided in this process if it was imported or tried
    already, else by importing it in a fresh interpreter (the answer is kept)."""
    if name not in _STATUS:
        _STATUS[name] = Status(name, _installed(name)) if name in sys.modules else _check(name, timeout)
    return _STATUS[name]


def available(names: Iterable[str] = FRAMEWORKS, *, timeout: float = 120.0) -> list[str]:
    """The frameworks among ``names`` that are installed *and* import here (checked side by side)."""
    names = list(names)
    todo = [n for n in names if n not in _STATUS]
    if todo:
        with ThreadPoolExecutor(max_workers=len(todo)) as pool:
            list(pool.map(lambda n: status(n, timeout=timeout), todo))
    return [n for n in names if status(n).usable]
