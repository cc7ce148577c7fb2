"""The lessons of a clone, read from their front matter: the one reader of lesson metadata.

Each lesson ``notebooks/NN_topic.md`` starts with a YAML header whose ``tpututor`` key says
what the lesson is, for people and for tools::

    tpututor:
      title: Where am I running?
      minutes: 30                     # reading and exercises
      needs:
        imports: [jax]                # the lesson cannot run without these
        optional: [tensorflow, torch] # sections skip, saying so, without these
        devices: cpu                  # see DEVICES
        note: a CPU is enough; every section runs unchanged on a GPU or TPU
      colab: tpu                      # the runtime Colab opens it on: tpu or cpu
      aliases: [runtime, detection]   # words a reference to this lesson may use
      prerequisites: [matmul_roofline] # topics (the file name without its number)
      objectives:
      - tell which runtime ...

The README table, the runner, the Colab metadata, ``make colab``, the workshop guide and
the table shipped to learners (``tpututor/data/lessons.json``, for the pre-flight) all read
it through :func:`lessons`. The lessons are found in the repository a tool runs in (or an
explicit folder), never next to the installed package.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpututor.lessons import find_root

__all__ = [
    "Lesson",
    "DEVICES",
    "FRAMEWORKS",
    "find_root",
    "notebooks_dir",
    "lessons",
    "read",
    "by_topic",
    "LessonError",
    "Estimate",
    "estimate",
    "READING_WPM",
    "CELL_SECONDS",
    "CODE_LINES_PER_MINUTE",
    "EXERCISE_MINUTES",
]

# What a lesson asks of the machine; the workshop guide's runtime column says it in words.
DEVICES = {
    "cpu": "CPU is enough",
    "tpu-better": "CPU is enough, TPU better",
    "slice-better": "CPU is enough, TPU slice better",
    "tpu-needed": "TPU needed",
    "slice-needed": "TPU slice needed",
}
# How the front matter's minutes are estimated (docs/writing_a_lesson.md; tests/test_catalog.py
# holds every lesson to it): prose read carefully, each code cell run and its output read, the
# code itself read, and each exercise done.
READING_WPM = 150  # words of prose a minute: technical text, read to be understood
CELL_SECONDS = 30  # to run a code cell and look at what it printed or drew
CODE_LINES_PER_MINUTE = 30  # lines of code read, comments included
EXERCISE_MINUTES = 8  # to write an answer, run the check, maybe ask for a hint
SETUP_MARK = "# Setup (the same cell in every lesson)"
_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.S | re.M)
_EXERCISE = re.compile(r"""\bcheck\.(?:that|equal|close)\(\s*["']\d\d\.\d""")
# The frameworks a lesson may need; other import names (flax, xprof, ...) are packages.
FRAMEWORKS = ("jax", "tensorflow", "torch", "torch_xla")
_STEM = re.compile(r"^(\d\d[a-z]?)_([a-z0-9_]+)$")


class LessonError(ValueError):
    """A lesson's front matter is missing or malformed; the message names the file and the fix."""


@dataclass(frozen=True)
class Lesson:
    """One lesson, as its front matter and file name describe it."""

    path: Path  # notebooks/NN_topic.md
    number: str  # "00"
    topic: str  # "where_am_i"
    title: str
    minutes: int
    imports: tuple[str, ...]
    optional: tuple[str, ...]
    devices: str
    note: str
    colab: str  # "tpu" | "cpu"
    objectives: tuple[str, ...]
    prerequisites: tuple[str, ...] = ()
    aliases: tuple[str, ...] = field(default_factory=tuple)

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def heading(self) -> str:
        return f"{self.number} · {self.title}"

    @property
    def runtime(self) -> str:
        return DEVICES[self.devices]

    @property
    def notebook(self) -> Path:
        return self.path.with_suffix(".ipynb")

    def needs(self) -> dict[str, Any]:
        """What the learner's package ships about this lesson (``tpututor/data/lessons.json``)."""
        return {
            "title": self.title,
            "minutes": self.minutes,
            "imports": list(self.imports),
            "optional": list(self.optional),
            "devices": self.devices,
            "note": self.note,
        }


def notebooks_dir(notebooks: str | os.PathLike | None = None) -> Path:
    """``notebooks`` if given (it must exist), else the clone's ``notebooks/``."""
    if notebooks is not None:
        path = Path(notebooks)
        if not path.is_dir():
            raise FileNotFoundError(f"no notebooks folder at {path}")
        return path
    return find_root() / "notebooks"


def _front_matter(text: str, path: Path) -> dict:
    import yaml

    if not text.startswith("---\n") or "\n---\n" not in text[4:]:
        raise LessonError(f"{path.name}: no YAML header (--- ... ---) at the top")
    try:
        header = yaml.safe_load(text[4:].split("\n---\n", 1)[0]) or {}
    except yaml.YAMLError as exc:
        raise LessonError(f"{path.name}: the YAML header does not parse: {exc}") from None
    meta = header.get("tpututor")
    if not isinstance(meta, dict):
        raise LessonError(
            f"{path.name}: the YAML header has no 'tpututor:' block (title, minutes, needs, "
            "objectives); see tpututor_course/catalog.py"
        )
    return meta


def _names(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise LessonError(f"{where} must be a list of names")
    return tuple(value)


def read(path: str | os.PathLike) -> Lesson:
    """One lesson's metadata; a malformed header is a :class:`LessonError` naming the field."""
    path = Path(path)
    m = _STEM.match(path.stem)
    if not m:
        raise LessonError(f"{path.name}: a lesson is named NN_topic.md (two digits, then the topic)")
    meta = _front_matter(path.read_text(), path)
    where = f"{path.name}: tpututor."
    needs = meta.get("needs") or {}
    for key in ("title", "minutes", "objectives"):
        if not meta.get(key):
            raise LessonError(f"{where}{key} is missing")
    if not isinstance(meta["minutes"], int) or meta["minutes"] <= 0:
        raise LessonError(f"{where}minutes must be a positive whole number, got {meta['minutes']!r}")
    devices = needs.get("devices", "cpu")
    if devices not in DEVICES:
        raise LessonError(f"{where}needs.devices must be one of {', '.join(DEVICES)}, got {devices!r}")
    colab = meta.get("colab", "tpu")
    if colab not in ("tpu", "cpu"):
        raise LessonError(f"{where}colab must be 'tpu' or 'cpu', got {colab!r}")
    if not needs.get("note"):
        raise LessonError(f"{where}needs.note is missing (one sentence: what the lesson needs, in words)")
    return Lesson(
        path=path,
        number=m.group(1),
        topic=m.group(2),
        title=str(meta["title"]).strip(),
        minutes=meta["minutes"],
        imports=_names(needs.get("imports"), f"{where}needs.imports"),
        optional=_names(needs.get("optional"), f"{where}needs.optional"),
        devices=devices,
        note=" ".join(str(needs["note"]).split()),
        colab=colab,
        objectives=tuple(" ".join(str(o).split()) for o in _names(meta["objectives"], f"{where}objectives")),
        prerequisites=_names(meta.get("prerequisites"), f"{where}prerequisites"),
        aliases=_names(meta.get("aliases"), f"{where}aliases"),
    )


def lessons(notebooks: str | os.PathLike | None = None) -> list[Lesson]:
    """Every lesson (``NN_topic.md``) in teaching order, read from its front matter."""
    folder = notebooks_dir(notebooks)
    found = [read(p) for p in sorted(folder.glob("[0-9][0-9]*_*.md"))]
    numbers = [lesson.number for lesson in found]
    if len(set(numbers)) != len(numbers):
        raise LessonError(f"two lessons share a number in {folder}: {numbers}")
    topics = {lesson.topic for lesson in found}
    for lesson in found:
        missing = [t for t in lesson.prerequisites if t not in topics]
        if missing:
            raise LessonError(
                f"{lesson.path.name}: prerequisites {missing} are not lesson topics (choose from {sorted(topics)})"
            )
    return found


@dataclass(frozen=True)
class Estimate:
    """What a lesson asks of a learner, counted from its MyST source, and the minutes that makes."""

    words: int  # prose, code blocks and front matter left out
    code_cells: int
    code_lines: int
    exercises: int

    @property
    def minutes(self) -> int:
        """Reading, running, code and exercises, rounded to the nearest 5 minutes."""
        raw = (
            self.words / READING_WPM
            + self.code_cells * CELL_SECONDS / 60
            + self.code_lines / CODE_LINES_PER_MINUTE
            + self.exercises * EXERCISE_MINUTES
        )
        return max(5, 5 * round(raw / 5))


def estimate(path: str | os.PathLike) -> Estimate:
    """The estimating rule applied to one lesson ``NN_topic.md`` (see :data:`READING_WPM` and the
    constants beside it); a lesson's ``minutes`` should be this, give or take 15%."""
    text = Path(path).read_text()
    if text.startswith("---"):
        text = text.split("\n---", 1)[1]
    # The setup cell is the same in every lesson and is run, not read: it counts as a cell, not as code.
    cells = _CODE_CELL.findall(text)
    read = [c for c in cells if SETUP_MARK not in c]
    body = [
        line
        for c in read
        for line in c.splitlines()
        if line.strip() and not line.startswith(":") and line.strip() != "---"
    ]
    prose = _FENCE.sub(" ", text)
    prose = re.sub(r"\]\([^)]*\)", "]", prose)  # a link's address is not read
    words = len(re.findall(r"[^\s#*|>`-]+", prose))
    exercises = sum(1 for c in cells if _EXERCISE.search(c))
    return Estimate(words=words, code_cells=len(cells), code_lines=len(body), exercises=exercises)


def by_topic(found: list[Lesson]) -> dict[str, Lesson]:
    return {lesson.topic: lesson for lesson in found}
