"""The course's lessons and what each needs, as shipped with the package.

``tpututor/data/lessons.json`` is written by ``make badges`` from each lesson's front matter
(a test keeps it in step), so an installed tpututor knows what a lesson imports and which device
it wants even where there is no clone, as on Colab: the setup cell and the pre-flight read it.
:func:`find_root` finds the clone a command runs in, when there is one.
"""

from __future__ import annotations

import functools
import json
import os
from importlib import resources
from pathlib import Path

__all__ = ["table", "get", "imports", "names", "find_root"]


@functools.lru_cache(maxsize=1)
def table() -> dict[str, dict]:
    """Lesson name (``"00a_where_am_i"``) -> title, minutes, imports, optional, devices, note."""
    return json.loads(resources.files("tpututor").joinpath("data", "lessons.json").read_text())


def names() -> list[str]:
    return list(table())


def get(lesson: str) -> dict:
    """One lesson's entry; an unknown name is a KeyError listing the known ones."""
    try:
        return table()[lesson]
    except KeyError:
        raise KeyError(f"no lesson {lesson!r} in this tpututor; the lessons are {', '.join(table())}") from None


def imports(lesson: str | None = None, *, optional: bool = False) -> list[str]:
    """What ``lesson`` imports (with ``optional``, its optional imports too); all lessons' when None."""
    entries = [get(lesson)] if lesson else list(table().values())
    out: list[str] = []
    for entry in entries:
        for name in entry["imports"] + (entry["optional"] if optional else []):
            if name not in out:
                out.append(name)
    return out


def find_root(start: str | os.PathLike | None = None) -> Path:
    """The repository a tool runs in: ``$TPUTUTOR_REPO``, else the first folder up from ``start``
    (default: the working directory) with a ``pyproject.toml`` naming ``[tool.tpututor]`` and a
    ``notebooks/`` folder."""
    if os.environ.get("TPUTUTOR_REPO"):
        root = Path(os.environ["TPUTUTOR_REPO"]).resolve()
        if not (root / "notebooks").is_dir():
            raise FileNotFoundError(f"TPUTUTOR_REPO={root} has no notebooks/ folder")
        return root
    here = Path(start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        pyproject = folder / "pyproject.toml"
        if (folder / "notebooks").is_dir() and pyproject.is_file() and "[tool.tpututor]" in pyproject.read_text():
            return folder
    raise FileNotFoundError(
        f"no tpututor repository at or above {here}: run this inside a clone "
        "(git clone https://github.com/tpututor/tpututor), or pass the notebooks folder explicitly"
    )
