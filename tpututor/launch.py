"""The setup cell's logic: install what a Colab or Kaggle runtime lacks, then say what the machine is.

Every lesson's first code cell is :data:`SETUP_CELL` (``make badges`` writes it): on Colab or
Kaggle it installs ``tpututor`` from the release tag, then calls :func:`setup` with the lesson's
name, which installs the add-ons *that lesson* imports and the runtime lacks (pinned, and never
moving the runtime's own JAX, since its libtpu must match), records the lesson for the pre-flight
(``python -m tpututor doctor --preflight`` in the same runtime checks that lesson's needs), and
prints one line about the machine. It imports no framework. A translated lesson's setup cell names its
language (``launch.setup("03a_xla_fusion", language="ko")``, written by the translation build), and the
checks then speak it (:func:`tpututor.check.set_language`).
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from importlib import resources

from . import __version__, check, lessons
from .runtime import Host, Runtime, detect

__all__ = [
    "SETUP_CELL",
    "ADDONS",
    "PINS",
    "pins",
    "LESSON_ENV",
    "install_plan",
    "setup",
    "lacking",
    "quiet_jax",
    "LessonCannotRun",
]

PINS = "data/pins.toml"  # the course's version pins, shipped with the package (read by :func:`pins`)


@functools.cache
def pins() -> dict:
    """``tpututor/data/pins.toml`` as a dict: the course's version pins, one table per environment."""
    return tomllib.loads(resources.files("tpututor").joinpath(PINS).read_text(encoding="utf-8"))


def _addons() -> dict[str, str]:
    """:data:`ADDONS` from pins.toml's [addons], each at the version its rule there gives."""
    colab, lock = pins()["colab"], pins()["lock"]
    pinned = {n: colab["packages"][n] if n in colab["jax-stack"] else lock[n] for n in pins()["addons"].values()}
    return {module: f"{name}=={pinned[name]}" for module, name in pins()["addons"].items()}


# Import name -> the pinned requirement the setup cell installs when a runtime lacks it ([addons] in
# pins.toml): the versions of constraints.txt, except packages built on JAX, which are pinned at the
# versions Colab's TPU runtime ships (they work with its JAX 0.7.2).
ADDONS: dict[str, str] = _addons()
LESSON_ENV = "TPUTUTOR_LESSON"  # the open lesson, for the pre-flight run from the same runtime

SETUP_CELL = """\
# Setup (the same cell in every lesson): on Colab or Kaggle, install tpututor and what this
# lesson needs that the runtime lacks, at tested versions; on your own machine `make lab` did it.
import importlib.util, os, sys
if ("google.colab" in sys.modules or "KAGGLE_KERNEL_RUN_TYPE" in os.environ) and not importlib.util.find_spec("tpututor"):
    %pip install --quiet "{requirement}"
from tpututor import launch
launch.setup("{lesson}")"""

_HOSTED = ("colab", "colab-enterprise", "kaggle")


def _present(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a dotted name whose parent is missing
        return False


def install_plan(
    lesson: str | None = None,
    host: Host | None = None,
    installed: Iterable[str] | None = None,
    rt: Runtime | None = None,
) -> list[str] | None:
    """The pip command :func:`setup` would run here, or None when there is nothing to install.

    Only on Colab and Kaggle; only the add-ons ``lesson`` imports (every add-on when no lesson is
    named) that this runtime lacks; always pinned, and with the runtime's own JAX held where it is.
    ``installed`` (import names) stands in for looking them up, for tests; ``rt`` is the machine
    when the caller has detected it already.
    """
    rt = rt or detect(host)
    if rt.platform.name not in _HOSTED:
        return None
    wanted = [n for n in ADDONS if lesson is None or n in lessons.imports(lesson, optional=True)]
    have = set(installed) if installed is not None else {n for n in wanted if _present(n)}
    missing = [ADDONS[n] for n in wanted if n not in have]
    if not missing:
        return None
    versions = {"jax": rt.frameworks["jax"].version, "jaxlib": rt.packages.get("jaxlib")}
    held = [f"{name}=={version}" for name, version in versions.items() if version]
    return [sys.executable, "-m", "pip", "install", "--quiet", *missing, *held]


def _hint(platform: str, kind: str) -> str:
    if kind != "cpu":
        return ""
    if platform.startswith("colab"):
        return " No accelerator: for a TPU choose Runtime > Change runtime type > TPU v5e-1, then run again."
    if platform == "kaggle":
        return " No accelerator: for a TPU open Settings > Accelerator > TPU v5e-8, then run again."
    return " No accelerator here: the lesson runs on the CPU, and says where a TPU would differ."


def setup(lesson: str | None = None, host: Host | None = None, run=subprocess.run, *, language: str = "en") -> None:
    """Install what this runtime lacks for ``lesson``, then print one line about the machine.

    ``language`` is the one the exercise checks print in (:data:`tpututor.check.LANGUAGES`; the
    Korean lessons pass ``"ko"``); an unknown one is a ValueError before anything is installed.
    It returns nothing, so that a notebook cell ending in ``launch.setup(...)`` shows the line once.
    """
    check.set_language(language)
    rt = detect(host)
    if host is None:
        quiet_jax(rt)
    if lesson is not None:
        lessons.get(lesson)  # an unknown name is a clear error here, not a puzzle later
        os.environ[LESSON_ENV] = lesson
    plan = install_plan(lesson, host, rt=rt)
    if plan is not None:
        print("installing:", " ".join(a for a in plan[5:] if not a.startswith(("jax==", "jaxlib=="))), flush=True)
        run(plan, check=True)
    print(f"tpututor {__version__} on {rt.summary()}." + _hint(rt.platform.name, rt.accelerator.kind))
    if lesson is not None:
        unusable = lacking(lesson)
        if unusable:
            why = "; ".join(f"{name}: {reason}" for name, reason in unusable.items())
            raise LessonCannotRun(
                f"This lesson needs {', '.join(unusable)}, which this runtime cannot use ({why}). "
                f"{lessons.get(lesson)['note'][:1].upper()}{lessons.get(lesson)['note'][1:]}. "
                "Nothing below is run: install or repair it (python -m tpututor doctor says how), then run "
                "the lesson again."
            )


class LessonCannotRun(RuntimeError):
    """A framework the lesson needs is missing or broken. In a notebook it shows as its message alone
    (no traceback) and stops the run there, before any cell that would fail on the import."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return [str(self)]


_PROBE = """\
import importlib, json, sys
out = {}
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException as exc:  # ImportError, OSError (a missing .so), AttributeError (version skew)...
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        out[name] = f"{type(exc).__name__}: {lines[0][:300] if lines else ''}".rstrip(": ")
print(json.dumps(out))
"""


def quiet_jax(rt: Runtime) -> None:
    """On a machine with no accelerator, tell JAX (before it starts) that it has only the CPU.

    The course installs libtpu, the TPU compiler, to compile for TPU slices on any machine
    (:mod:`tpututor.aot`). With libtpu installed JAX would also try to start a TPU runtime at its first
    use, print warnings about the missing TPU, and hold libtpu's lockfile for the life of the process.
    A ``JAX_PLATFORMS`` the learner set is left alone.
    """
    if rt.accelerator.kind == "cpu" and "JAX_PLATFORMS" not in os.environ and _present("libtpu"):
        os.environ["JAX_PLATFORMS"] = "cpu"


def lacking(lesson: str, *, timeout: float = 180.0) -> dict[str, str]:
    """The imports ``lesson`` needs that cannot be used here, each with why: not installed, or installed
    but failing to import. They are imported in one fresh interpreter, as the doctor does, so a broken
    install counts as missing and this process stays free of it."""
    needed = lessons.imports(lesson)
    out = {name: "not installed" for name in needed if not _present(name)}
    present = [name for name in needed if name not in out]
    if present:
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL=os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2"))
        if "torch_xla" in present and "PJRT_DEVICE" not in env and detect().accelerator.kind != "tpu":
            env["PJRT_DEVICE"] = "CPU"  # torch_xla never picks a GPU itself; without a TPU it is the CPU
        try:
            probe = subprocess.run(
                [sys.executable, "-c", _PROBE, *present], capture_output=True, text=True, timeout=timeout, env=env
            )
            out.update(
                json.loads(probe.stdout.strip().splitlines()[-1])
                if probe.returncode == 0
                else {name: f"importing it ended the interpreter (exit {probe.returncode})" for name in present}
            )
        except subprocess.TimeoutExpired:
            out.update({name: f"importing it took over {timeout:.0f} s" for name in present})
    return {name: out[name] for name in needed if name in out}
