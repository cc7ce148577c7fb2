"""docs/package.md, the map of the code, agrees with the tree and with what the lessons import.

Plain file reading only: the modules are found on disk and the lessons' imports with a regular
expression over the code cells of ``notebooks/NN_topic.md``, so nothing here starts a framework.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

PAGE = ROOT / "docs" / "package.md"
PACKAGES = ("tpututor", "tpututor_course")
LESSON_FILES = sorted((ROOT / "notebooks").glob("[0-9][0-9]*_*.md"))

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$", re.M)
CODE_CELL = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.M | re.S)
FROM_IMPORT = re.compile(r"^[ \t]*from[ \t]+(tpututor(?:\.\w+)*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)", re.M)
PLAIN_IMPORT = re.compile(r"^[ \t]*import[ \t]+(tpututor(?:\.\w+)*)", re.M)
LESSON_REF = re.compile(r"\b(\d\d[a-z]?) \(([^)]*)\)")
EVERY_LESSON = "every lesson"


def rows() -> dict[str, str]:
    """The page's table rows: module path -> its last cell (the lessons that use it)."""
    return {path: cells.split("|")[-1].strip() for path, cells in ROW.findall(PAGE.read_text())}


def public_modules() -> list[str]:
    """Every public module file and (sub)package of both packages, as the page spells them (the ``.py``
    files under ``tpututor/data/``, the error atlas's examples, are data: the data rows cover them)."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.is_relative_to(ROOT / "tpututor" / "data"):
                continue
            if path.name == "__init__.py":
                found.append(path.parent.relative_to(ROOT).as_posix() + "/")
            elif not path.name.startswith("_") and "__pycache__" not in path.parts:
                found.append(path.relative_to(ROOT).as_posix())
    return found


def module_path(dotted: str) -> str | None:
    """``tpututor.serving.planner`` -> ``tpututor/serving/planner.py`` (a package -> its folder);
    None when no such module or package exists."""
    base = ROOT / dotted.replace(".", "/")
    if (base / "__init__.py").exists():
        return base.relative_to(ROOT).as_posix() + "/"
    if base.with_suffix(".py").exists():
        return base.with_suffix(".py").relative_to(ROOT).as_posix()
    return None


def imported_modules(lesson: Path) -> set[str]:
    """The tpututor modules a lesson's code cells import, as paths (``from X import name`` counts
    ``X.name`` when that is a module, else ``X``)."""
    code = "\n".join(CODE_CELL.findall(lesson.read_text()))
    found = {module_path(m.group(1)) for m in PLAIN_IMPORT.finditer(code)}
    for m in FROM_IMPORT.finditer(code):
        for name in m.group(2).strip().strip("()").split(","):
            words = name.split()
            if words:
                found.add(module_path(f"{m.group(1)}.{words[0]}") or module_path(m.group(1)))
    found.discard(None)
    return found


def lessons_listed(cell: str) -> set[str]:
    """The lesson numbers a row's lessons cell names ("every lesson" names them all)."""
    if cell.startswith(EVERY_LESSON):
        return {path.stem.split("_")[0] for path in LESSON_FILES}
    return {number for number, _ in LESSON_REF.findall(cell)}


def test_the_lesson_imports_are_found():
    """A guard on the regex: the first lesson's own setup and imports cells are read."""
    assert {"tpututor/", "tpututor/launch.py", "tpututor/check.py"} <= imported_modules(LESSON_FILES[0])


def test_every_public_module_and_subpackage_has_a_row():
    listed = rows()
    missing = [path for path in public_modules() if path not in listed]
    assert not missing, f"add a row to docs/package.md for: {', '.join(missing)}"


def test_every_data_file_or_folder_has_a_row_and_a_folders_row_covers_the_files_in_it():
    listed = rows()
    data = sorted((ROOT / "tpututor" / "data").iterdir())
    paths = [p.relative_to(ROOT).as_posix() + ("/" if p.is_dir() else "") for p in data if p.name != "__pycache__"]
    missing = [path for path in paths if path not in listed]
    assert not missing, f"add a row to docs/package.md for: {', '.join(missing)}"


def test_every_row_names_a_path_that_exists():
    gone = [path for path in rows() if not (ROOT / path).exists()]
    assert not gone, f"docs/package.md lists paths that do not exist: {', '.join(gone)}"


@pytest.mark.parametrize("lesson", LESSON_FILES, ids=[p.stem for p in LESSON_FILES])
def test_each_module_a_lesson_imports_lists_that_lesson(lesson: Path):
    listed, number = rows(), lesson.stem.split("_")[0]
    wrong = [
        f"{path}: add {number}" if path in listed else f"{path}: no row"
        for path in sorted(imported_modules(lesson))
        if number not in lessons_listed(listed.get(path, ""))
    ]
    assert not wrong, f"docs/package.md, {lesson.stem}: " + "; ".join(wrong)


def test_each_lesson_a_row_lists_imports_that_module():
    """The other direction: no row claims a lesson that does not import it (a stale entry)."""
    uses = {path.stem.split("_")[0]: imported_modules(path) for path in LESSON_FILES}
    stale = [
        f"{path}: {number}"
        for path, cell in rows().items()
        for number in sorted(lessons_listed(cell))
        if path not in uses.get(number, set())
    ]
    assert not stale, "docs/package.md lists lessons that do not import the module: " + "; ".join(stale)


def test_each_lesson_number_in_the_map_names_that_lessons_topic():
    topics = {path.stem.split("_")[0]: path.stem.split("_", 1)[1].replace("_", " ") for path in LESSON_FILES}
    wrong = [
        f"{number} ({topic}): expected {number} ({topics.get(number, 'no such lesson')})"
        for cell in rows().values()
        for number, topic in LESSON_REF.findall(cell)
        if topic.lower() != topics.get(number, "").lower()
    ]
    assert not wrong, "; ".join(wrong)
