"""``python -m tpututor_course pins``: the files generated from the course's one pins file.

``tpututor/data/pins.toml`` holds every top-level pin: the direct requirements at the lock's versions
([lock]), Colab's TPU stack ([colab]), the setup cell's add-ons ([addons]), Binder's list ([binder]),
the GPU machine's image ([device]) and MaxText's venv ([maxtext]). tpututor reads it at run time; this
command writes the requirement files Binder and ``make maxtext-run`` install from, and checks that
[lock] agrees with ``constraints.txt`` (the full lock) and with ``pyproject.toml``'s extras.

    python -m tpututor_course pins          # (re)write binder/requirements.txt, binder/maxtext-requirements.txt
    python -m tpututor_course pins --check  # exit 1 naming each stale file or disagreeing pin; write nothing
"""

from __future__ import annotations

import argparse
import re
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

from tpututor.launch import PINS

from . import catalog

__all__ = ["BINDER", "MAXTEXT", "read", "generated", "problems", "main"]

BINDER, MAXTEXT = "binder/requirements.txt", "binder/maxtext-requirements.txt"
_HEADERS = {
    BINDER: """\
# Binder (repo2docker) installs these first: the CPU stack, at the versions of ../constraints.txt.
# Generated from tpututor/data/pins.toml ([binder], at [lock]'s versions) by make pins: edit that file.
# PyTorch/XLA is left out: its torch 2.9.0 wheel alone is ~4 GB with CUDA libraries, too big for
# Binder; lesson 04a (PyTorch/XLA) says so and stops.
""",
    MAXTEXT: """\
# MaxText in its own Python 3.12 venv (.venv-maxtext), for `make maxtext-run` only: lesson 13b's
# (LoRA and export) stack table cites the run it records, docs/artifacts/maxtext-cpu-run.json.
# Not Binder's: Binder reads requirements.txt beside this file, never this one.
# Generated from tpututor/data/pins.toml ([maxtext]) by make pins: edit that file.
#
# maxtext 0.2.5 declares no requirements of its own, only extras; the lightest extra with JAX is
# [tpu] (235 packages with libtpu and developer tools; 16 min and 2.8 GB to install). A CPU run needs
# only what the converter and the trainer import, below: the [tpu] extra's packages that
# maxtext.checkpoint_conversion.to_maxtext and maxtext.trainers.pre_train.train import, pinned at the
# versions pip resolved on 2026-12-04 (their dependencies resolve freely; the artifact records every
# installed version). About 1.3 GiB, 2 minutes here.
""",
}


def _norm(name: str) -> str:
    """A distribution name as pip compares it (PEP 503): ``tensorflow_cpu`` is ``tensorflow-cpu``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(text: str) -> dict[str, str]:
    """name -> version of each ``name==version`` line (names normalized), comments and the rest skipped."""
    found = (re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s#;]+)", line) for line in text.splitlines())
    return {_norm(m.group(1)): m.group(2) for m in found if m}


def read(root: Path) -> dict:
    """The pins file of the clone at ``root``."""
    return tomllib.loads((root / "tpututor" / PINS).read_text(encoding="utf-8"))


def generated(pins: dict) -> dict[str, str]:
    """Path (from the repository root) -> the text each generated requirement file must hold."""
    binder = [f"{name}=={pins['lock'][name]}" for name in pins["binder"]["packages"]]
    maxtext = [f"{name}=={version}" for name, version in pins["maxtext"].items()]
    return {BINDER: _HEADERS[BINDER] + "\n".join(binder) + "\n", MAXTEXT: _HEADERS[MAXTEXT] + "\n".join(maxtext) + "\n"}


def _pyproject_problems(root: Path, lock: dict[str, str]) -> list[str]:
    """Each extra's requirement without a [lock] pin, or pinned there (``==``) at another version."""
    extras = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    out, named = [], set()
    for requirement in (r for group in extras.values() for r in group if not r.startswith("tpututor[")):
        name = _norm(re.match(r"[A-Za-z0-9._-]+", requirement).group(0))
        named.add(name)
        pinned = re.search(r"==([^,;\s]+)", requirement)
        if name not in lock:
            out.append(f"pyproject.toml requires {name}, which [lock] in pins.toml does not pin: add it")
        elif pinned and pinned.group(1) != lock[name]:
            out.append(f"{name}: {pinned.group(1)} in pyproject.toml, {lock[name]} in pins.toml [lock]")
    out += [
        f"{name}: pinned in pins.toml [lock], required by no extra in pyproject.toml" for name in lock.keys() - named
    ]
    return out


def problems(root: Path) -> list[str]:
    """What disagrees in the clone at ``root``: a [lock] pin and ``constraints.txt`` or ``pyproject.toml``,
    a package the [addons] or [colab] tables cannot pin, a generated file not what pins.toml gives."""
    pins = read(root)
    lock = {_norm(n): v for n, v in pins["lock"].items()}
    constraints = _requirements((root / "constraints.txt").read_text(encoding="utf-8"))
    out = [
        f"{name}: {version} in pins.toml [lock], {constraints.get(name, 'nothing')} in constraints.txt"
        for name, version in lock.items()
        if constraints.get(name) != version
    ]
    out += _pyproject_problems(root, lock)
    colab = pins["colab"]
    out += [
        f"[colab] jax-stack names {n}, which [colab.packages] lacks"
        for n in colab["jax-stack"]
        if n not in colab["packages"]
    ]
    out += [
        f"[addons] installs {n}, pinned neither in Colab's jax-stack nor in [lock]"
        for n in pins["addons"].values()
        if n not in colab["jax-stack"] and n not in pins["lock"]
    ]
    for path, text in generated(pins).items():
        target = root / path
        if not target.is_file() or target.read_text(encoding="utf-8") != text:
            out.append(f"{path} is stale: run python -m tpututor_course pins (make pins)")
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Write the generated files (unless ``--check``), then report every problem left; 1 if any."""
    parser = argparse.ArgumentParser(prog="python -m tpututor_course pins", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if a file is stale or a pin disagrees; write nothing"
    )
    parser.add_argument("--root", type=Path, default=None, help="the clone (default: this one)")
    args = parser.parse_args(argv)
    root = args.root or catalog.find_root()
    if not args.check:
        for path, text in generated(read(root)).items():
            target = root / path
            if not target.is_file() or target.read_text(encoding="utf-8") != text:
                target.write_text(text, encoding="utf-8")
                print(f"wrote {path}")
    found = problems(root)
    for problem in found:
        print(f"pins: {problem}", file=sys.stderr)
    if not found:
        print("pins: every generated file and pin agrees with tpututor/data/pins.toml")
    return 1 if found else 0
