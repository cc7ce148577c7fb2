"""The course's lessons and what each needs, as shipped with the package.

``tpututor/data/lessons.json`` is written by ``make badges`` from each lesson's front matter
(a test keeps it in step), so an installed tpututor knows what a lesson imports and which device
it wants even where there is no clone, as on Colab: the setup cell and the pre-flight read it.
"""

from __future__ import annotations

import functools
import json
from importlib import resources

__all__ = ["table", "get", "imports", "names"]


@functools.lru_cache(maxsize=1)
def table() -> dict[str, dict]:
    """Lesson name (``"00_where_am_i"``) -> title, minutes, imports, optional, devices, note."""
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
