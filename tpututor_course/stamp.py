"""Stamp every lesson from its front matter and one repository setting (``make badges``).

``[tool.tpututor]`` in ``pyproject.toml`` (``repository = "owner/name"``, ``branch``) and each
lesson's ``tpututor:`` front matter (see :mod:`tpututor_course.catalog`) drive everything a
learner sees before the first code cell, so a fork or a renumbering changes data, not prose:

* the heading ``# NN · Title`` and the badge block (Colab, Kaggle, Binder) under it;
* the lesson card: objectives, time, needs and prerequisites;
* the setup cell, the same :data:`tpututor.launch.SETUP_CELL` in every lesson;
* the Colab metadata (the runtime a lesson opens on), in both files of the pair;
* the README's lesson table, and ``tpututor/data/lessons.json``, what the installed package
  knows about each lesson (the pre-flight reads it on Colab, where there is no clone).
"""

from __future__ import annotations

import json
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from tpututor.launch import SETUP_CELL

from . import catalog
from .catalog import Lesson

__all__ = ["Settings", "settings", "badges", "card", "stamp_text", "lesson_table", "lessons_json", "stamp", "main"]

# Colab opens a lesson on a TPU runtime (free tier: TPU v5e-1) unless its front matter says
# colab: cpu; Jupytext keeps these keys in both files of a pair (see jupytext.toml).
COLAB_ACCELERATOR, COLAB_GPU_TYPE = "TPU", "V5E1"
COLAB_METADATA = f"accelerator: {COLAB_ACCELERATOR}\ncolab:\n  gpuType: {COLAB_GPU_TYPE}\n"


@dataclass(frozen=True)
class Settings:
    repository: str  # "owner/name" on GitHub
    branch: str
    version: str

    @property
    def requirement(self) -> str:
        """What the setup cell installs: this release of tpututor, from its tag."""
        return f"tpututor @ git+https://github.com/{self.repository}@v{self.version}"

    @property
    def tag(self) -> str:
        return f"v{self.version}"


def settings(pyproject: str | Path | None = None) -> Settings:
    """The ``[tool.tpututor]`` table of the clone's ``pyproject.toml`` (or the file given)."""
    import tomllib

    path = Path(pyproject) if pyproject else catalog.find_root() / "pyproject.toml"
    if not path.exists():
        raise FileNotFoundError(f"no {path}: run this from a clone of the repository")
    doc = tomllib.loads(path.read_text())
    try:
        tool = doc["tool"]["tpututor"]
        repository = tool["repository"]
    except KeyError:
        raise KeyError(f'{path} has no [tool.tpututor] repository = "owner/name"') from None
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repository):
        raise ValueError(f"[tool.tpututor] repository must look like 'owner/name', got {repository!r}")
    return Settings(repository, tool.get("branch", "main"), doc["project"]["version"])


def badges(notebook: str, s: Settings, folder: str = "notebooks") -> str:
    """The badge block for ``<folder>/<notebook>.ipynb`` (three Markdown lines)."""
    path = f"{folder}/{notebook}.ipynb"
    blob = f"https://github.com/{s.repository}/blob/{s.branch}/{path}"
    return "\n".join(
        [
            f"[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
            f"(https://colab.research.google.com/github/{s.repository}/blob/{s.branch}/{path})",
            f"[![Open in Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)]"
            f"(https://kaggle.com/kernels/welcome?src={blob})",
            f"[![Launch Binder](https://mybinder.org/badge_logo.svg)]"
            f"(https://mybinder.org/v2/gh/{s.repository}/{s.branch}?labpath={quote(path, safe='')})",
        ]
    )


def _wrap(text: str, indent: str = "") -> str:
    return textwrap.fill(text, width=100, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)


def _names(numbers: Sequence[str]) -> str:
    return numbers[0] if len(numbers) == 1 else ", ".join(numbers[:-1]) + " and " + numbers[-1]


def card(lesson: Lesson, everyone: dict[str, Lesson]) -> str:
    """The lesson card: objectives, then one paragraph of time, needs and prerequisites."""
    items = [
        f"- {_wrap(goal + (';' if i < len(lesson.objectives) - 1 else '.'), '  ')}"
        for i, goal in enumerate(g.rstrip(";.") for g in lesson.objectives)
    ]
    line = (
        f"**Time:** about {lesson.minutes} minutes to read and do the exercises. **Needs:** {lesson.note.rstrip('.')}."
    )
    if lesson.prerequisites:
        refs = [f"{everyone[t].number} ({everyone[t].title})" for t in lesson.prerequisites]
        line += f" **Before this:** lesson{'s' if len(refs) > 1 else ''} {_names(refs)}."
    return "**You will learn to**\n\n" + "\n".join(items) + "\n\n" + _wrap(line)


_CARD = re.compile(r"\*\*You will learn to\*\*\n\n(?:- [^\n]*\n(?:  [^\n]*\n)*)+\n\*\*Time:\*\*[^\n]*(?:\n[^\n]+)*")
_BADGES = re.compile(r"(^# .*\n\n)((?:\[!\[.*\n)+)", re.M)
_SETUP = re.compile(r"```\{code-cell\} ipython3\n:tags: \[setup\]\n\n.*?\n```", re.S)


def stamp_text(text: str, lesson: Lesson, everyone: dict[str, Lesson], s: Settings) -> str:
    """One lesson's MyST text with its heading, badges, card, setup cell and Colab metadata brought up
    to date from its front matter."""
    stem = lesson.stem
    header, body = text[4:].split("\n---\n", 1)
    header = re.sub(r"^accelerator:.*\n|^colab:\n(?:  .*\n)*", "", header + "\n", flags=re.M).rstrip("\n")
    metadata = COLAB_METADATA if lesson.colab == "tpu" else ""
    text = "---\n" + metadata + header + "\n---\n" + body
    text, n = re.subn(r"^# .*$", lambda m: f"# {lesson.heading}", text, count=1, flags=re.M)
    if n != 1:
        raise ValueError(f"{stem}: no '# ' heading in the first cell")
    block = badges(stem, s) + "\n"
    if _BADGES.search(text):
        text = _BADGES.sub(lambda m: m.group(1) + block, text, count=1)
    else:
        text = re.sub(r"(^# .*\n)", lambda m: m.group(1) + "\n" + block, text, count=1, flags=re.M)
    text, n = _CARD.subn(lambda m: card(lesson, everyone), text, count=1)
    if n != 1:
        raise ValueError(
            f"{stem}: no lesson card ('**You will learn to**' list, then a '**Time:**' "
            "paragraph) in the first cell to stamp"
        )
    cell = SETUP_CELL.format(requirement=s.requirement, lesson=stem)
    text, n = _SETUP.subn(lambda m: f"```{{code-cell}} ipython3\n:tags: [setup]\n\n{cell}\n```", text, count=1)
    if n != 1:
        raise ValueError(f"{stem}: no code cell tagged setup to stamp")
    return text


def _stamp_ipynb_metadata(path: Path, lesson: Lesson) -> bool:
    """Copy the front matter and the Colab keys into the paired .ipynb: ``jupytext --sync`` keeps a
    pair's notebook metadata from the .ipynb, so an edit made in the .md would otherwise be undone."""
    if not path.exists():
        return False
    import nbformat
    import yaml

    nb = nbformat.read(path, as_version=4)
    before = (nb.metadata.get("accelerator"), nb.metadata.get("colab"), nb.metadata.get("tpututor"))
    nb.metadata.pop("accelerator", None)
    nb.metadata.pop("colab", None)
    if lesson.colab == "tpu":
        nb.metadata["accelerator"] = COLAB_ACCELERATOR
        nb.metadata["colab"] = {"gpuType": COLAB_GPU_TYPE}
    nb.metadata["tpututor"] = yaml.safe_load(lesson.path.read_text()[4:].split("\n---\n", 1)[0])["tpututor"]
    if before == (nb.metadata.get("accelerator"), nb.metadata.get("colab"), nb.metadata.get("tpututor")):
        return False
    nbformat.write(nb, path)
    return True


def lesson_table(found: Sequence[Lesson], s: Settings, link_prefix: str = "notebooks/") -> str:
    """The README's lesson table, built from each lesson's front matter."""
    rows = ["| Lesson | Open | Time | Needs |", "|---|---|---|---|"]
    for lesson in found:
        links = " ".join(badges(lesson.stem, s).splitlines())
        rows.append(
            f"| [{lesson.heading}]({link_prefix}{lesson.path.name}) | {links} | {lesson.minutes} min | {lesson.note} |"
        )
    return "\n".join(rows)


def lessons_json(found: Sequence[Lesson]) -> str:
    """What the installed package knows about each lesson, as ``tpututor.lessons`` reads it."""
    return json.dumps({lesson.stem: lesson.needs() for lesson in found}, indent=2, ensure_ascii=False) + "\n"


def _replace_table(text: str, table: str, where: str) -> str:
    if "<!-- lessons:start -->" not in text:
        raise ValueError(f"{where} has no <!-- lessons:start --> ... <!-- lessons:end --> block")
    return re.sub(
        r"(<!-- lessons:start -->\n)(?:.*?\n)?(<!-- lessons:end -->)",
        lambda m: m.group(1) + table + "\n" + m.group(2),
        text,
        flags=re.S,
    )


def _readable(folder: Path) -> list[Lesson]:
    """The lessons whose front matter reads, skipping any that does not (another author's lesson
    being written); for stamping one lesson while others are in progress."""
    out = []
    for path in sorted(folder.glob("[0-9][0-9]*_*.md")):
        try:
            out.append(catalog.read(path))
        except catalog.LessonError:
            continue
    return out


def stamp(root: str | Path | None = None, only: str | None = None) -> list[str]:
    """Rewrite every lesson, the README's lesson table and lessons.json; with ``only`` (a lesson's
    name), that lesson alone. Returns what changed."""
    root = Path(root) if root else catalog.find_root()
    s = settings(root / "pyproject.toml")
    found = catalog.lessons(root / "notebooks") if only is None else _readable(root / "notebooks")
    everyone = catalog.by_topic(found)
    changed = []
    if only is not None:
        mine = [lesson for lesson in found if lesson.stem == only]
        if not mine:
            catalog.read(root / "notebooks" / f"{only}.md")  # raises the reason it does not read
        found = mine
    for lesson in found:
        if _stamp_ipynb_metadata(lesson.notebook, lesson):
            changed.append(str(lesson.notebook.relative_to(root)))
        text = lesson.path.read_text()
        new = stamp_text(text, lesson, everyone, s)
        if new != text or changed[-1:] == [str(lesson.notebook.relative_to(root))]:
            # written after the .ipynb, so that `jupytext --sync` takes the .md as the newer file
            lesson.path.write_text(new)
            if new != text:
                changed.append(str(lesson.path.relative_to(root)))
    if only is not None:
        return changed
    readme = root / "README.md"
    text = readme.read_text()
    new = _replace_table(text, lesson_table(found, s), "README.md")
    if new != text:
        readme.write_text(new)
        changed.append("README.md")
    target = root / "tpututor" / "data" / "lessons.json"
    data = lessons_json(found)
    if not target.exists() or target.read_text() != data:
        target.write_text(data)
        changed.append(str(target.relative_to(root)))
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    args = list(argv or [])
    only = args[args.index("--only") + 1] if "--only" in args and args.index("--only") + 1 < len(args) else None
    changed = stamp(only=only)
    print("stamped:", ", ".join(changed) if changed else "nothing to change")
    return 0
