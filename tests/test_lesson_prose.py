"""Readable prose (issue 31): a reader skimming a lesson gets each section's point from its first line,
and can tell a quiz (answer with one value) from an exercise where they write code.

Lessons are read as the other tests read them: found from their front matter (``catalog.lessons``),
their cells through jupytext.
"""

from __future__ import annotations

import ast
import re

import jupytext
import pytest

from conftest import CATALOG

# Lessons not yet brought to these rules (a lesson listed here is skipped). Every lesson follows them now;
# a new lesson that does not yet goes here until it does.
TODO_LESSONS: set[str] = set()
CHECKED = [lesson for lesson in CATALOG if lesson.stem not in TODO_LESSONS]
IDS = [lesson.stem for lesson in CHECKED]

NUMBERED_HEADING = re.compile(r"^(?:## \d+\.|### \d+\.\d+) .*$", re.M)
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.S | re.M)
EXERCISE_TITLE = re.compile(r"^\*\*(\d\d\.\d+) ([^*]+?)\*\*", re.M)
QUIZ_LABEL = "Quiz:"


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def first_paragraphs(md) -> list[tuple[str, str]]:
    """(heading, first line of the prose after it) for every numbered section of a lesson."""
    cells = jupytext.read(md).cells
    found = []
    for index, cell in enumerate(cells):
        if cell.cell_type != "markdown":
            continue
        text = FENCE.sub("", cell.source)  # a heading-like line inside a code block is not a heading
        for match in NUMBERED_HEADING.finditer(text):
            rest = text[match.end() :].strip()
            if not rest and index + 1 < len(cells) and cells[index + 1].cell_type == "markdown":
                rest = cells[index + 1].source.strip()  # the heading stands alone in its cell
            found.append((match.group(0), rest.splitlines()[0] if rest else ""))
    return found


def exercises(md) -> list[tuple[str, str, ast.Module]]:
    """(exercise id, bold title, parsed answer cell) for every exercise of a lesson."""
    title = None
    out = []
    for cell in jupytext.read(md).cells:
        if cell.cell_type == "markdown":
            titles = EXERCISE_TITLE.findall(cell.source)
            if titles:
                title = titles[-1]
        elif "solution" in tags(cell) and title is not None:
            out.append((title[0], title[1], ast.parse(cell.source)))
    return out


def answers_with_values_only(answer: ast.Module) -> bool:
    """The answer cell only assigns names (``kernels_032 = ...``): the learner gives values, writes no function."""
    return bool(answer.body) and all(isinstance(s, (ast.Assign, ast.AnnAssign)) for s in answer.body)


def test_the_todo_set_names_lessons_that_exist():
    assert TODO_LESSONS <= {lesson.stem for lesson in CATALOG}, "a lesson in TODO_LESSONS was renamed or removed"


@pytest.mark.parametrize("lesson", CHECKED, ids=IDS)
def test_every_numbered_section_opens_with_its_takeaway_in_bold(lesson):
    sections = first_paragraphs(lesson.path)
    assert sections, f"{lesson.stem}: no numbered sections (## 1. ...) found"
    plain = [heading for heading, first in sections if not first.startswith("**")]
    assert not plain, (
        f"{lesson.stem}: these sections do not open with a bold one-sentence takeaway "
        f"(**What the section shows.** at the start of its first paragraph): {plain}"
    )


@pytest.mark.parametrize("lesson", CHECKED, ids=IDS)
def test_an_exercise_answered_with_a_single_value_is_labelled_quiz(lesson):
    found = exercises(lesson.path)
    assert found, f"{lesson.stem}: no exercises with a solution cell found"
    unlabelled = [ex for ex, title, answer in found if answers_with_values_only(answer) and QUIZ_LABEL not in title]
    mislabelled = [ex for ex, title, answer in found if not answers_with_values_only(answer) and QUIZ_LABEL in title]
    assert not unlabelled, f"{lesson.stem}: answered with values, so title them **NN.N Quiz: ...**: {unlabelled}"
    assert not mislabelled, f"{lesson.stem}: the learner writes code in these, so they are not quizzes: {mislabelled}"


@pytest.mark.parametrize("lesson", CHECKED, ids=IDS)
def test_every_lesson_has_an_exercise_where_the_learner_writes_code(lesson):
    assert any(not answers_with_values_only(answer) for _, _, answer in exercises(lesson.path)), (
        f"{lesson.stem}: every exercise is a quiz; add one where the learner writes a function"
    )


# A year from 2000 to 2039 inside parentheses: "(read 2026-12-01)", "(tagged 2025-11-17)", "(ISCA 2023)";
# and a link inside parentheses, a source set aside in the sentence: "([JAX, matmul precision](https://...))".
DATED_ASIDE = re.compile(r"\([^()]*\b20[0-3]\d\b[^()]*\)")
LINKED_ASIDE = re.compile(r"\([^()]*\[[^\]]+\]\([^()]*\)[^()]*\)")
SOURCE_LINE = ("Source:", "Sources:")


def dated_asides(md) -> list[str]:
    """Parentheses holding a date or a link inside a lesson's prose: the lesson card, tables, a
    ``Source:`` line and the further reading are where dates and sources belong, so those are not searched."""
    found = []
    for cell in jupytext.read(md).cells:
        if cell.cell_type != "markdown":
            continue
        prose = FENCE.sub("", cell.source).split("## Further reading")[0]
        for paragraph in re.split(r"\n\s*\n", prose):
            if paragraph.lstrip().startswith(("|", "#", "[![", ">", *SOURCE_LINE)):
                continue  # tables, headings, badges, notes (their Source: form is tested apart), source lines
            code_free = re.sub(r"`[^`]*`", "``", paragraph)
            flat = re.sub(r"\]\([^)]*\)", "]", code_free)  # no link targets
            found += [" ".join(m.group(0).split()) for m in DATED_ASIDE.finditer(flat)]
            found += [" ".join(m.group(0).split())[:90] for m in LINKED_ASIDE.finditer(code_free)]
    return found


@pytest.mark.parametrize("lesson", CHECKED, ids=IDS)
def test_sources_and_dates_sit_in_a_source_line_after_the_paragraph_not_inside_a_sentence(lesson):
    asides = dated_asides(lesson.path)
    assert not asides, (
        f"{lesson.stem}: move each source and date out of the sentence, into a line after its paragraph "
        f"that starts 'Source:' (docs/writing_a_lesson.md): {asides}"
    )
