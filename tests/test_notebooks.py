"""Every lesson in notebooks/: paired, clean, well-formed, and it runs top to bottom, once.

Lessons are discovered from their front matter, never listed: a new notebooks/NN_topic.md is
tested as soon as it exists. The tests marked ``lessons`` share one execution of each lesson
(the ``executed`` fixture): whether it ran, how its checks ended, whether its stable outputs
match the reference, and how the student build's stubs fare (the rehearsal at the end of the run).
"""

from __future__ import annotations

import ast
import json
import re
import tomllib

import jupytext
import nbformat
import pytest

from conftest import CATALOG, EXECUTIONS, LESSONS, ROOT, least_exercises
from conftest import LESSON_IDS as IDS
from tpututor import exercises
from tpututor_course import reference, runner, student

REPO = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["tpututor"]
CHECK_CALL = re.compile(r"\bcheck\.(equal|close|that)\(")


def tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def cell_sources(nb) -> list[tuple[str, str, tuple[str, ...]]]:
    """What makes two notebooks the same lesson: cell type, source and tags, in order."""
    return [(c.cell_type, c.source.strip(), tuple(tags(c))) for c in nb.cells]


def read_pair(md):
    return jupytext.read(md), nbformat.read(md.with_suffix(".ipynb"), as_version=4)


def lines_of(nb, *, rehearsal: bool = False) -> list[str]:
    """Every stdout line of an executed notebook (the rehearsal cell's, or everything else's)."""
    out = []
    for cell in nb.cells:
        if cell.cell_type != "code" or (runner.REHEARSAL_TAG in tags(cell)) != rehearsal:
            continue
        for o in cell.get("outputs", []):
            out += str(o.get("text", "")).splitlines()
    return out


def test_lessons_are_discovered():
    assert LESSONS, "no lessons found in notebooks/"
    assert [p.with_suffix(".ipynb") for p in LESSONS] == runner.discover(ROOT / "notebooks")
    numbers = [lesson.number for lesson in CATALOG]
    groups = list(dict.fromkeys(n[:2] for n in numbers))
    assert groups == [f"{i:02d}" for i in range(len(groups))], "numbered 00, 01, ..."
    for group in groups:
        parts = [n[2:] for n in numbers if n[:2] == group]
        assert parts in ([""], list("abcdefgh"[: len(parts)])), (
            f"lesson {group} is one lesson or parts a, b, ...: {parts}"
        )


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_every_md_has_its_ipynb_and_they_are_in_sync(md):
    assert md.with_suffix(".ipynb").exists(), f"{md.name} has no .ipynb: run make sync"
    text_nb, ipynb = read_pair(md)
    assert cell_sources(text_nb) == cell_sources(ipynb), f"{md.name} and its .ipynb differ: run make sync"
    assert ipynb.metadata["jupytext"]["formats"] == "ipynb,md:myst"
    assert ipynb.metadata["tpututor"] == text_nb.metadata["tpututor"], "front matter in both files (make sync)"


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_committed_ipynb_carries_no_outputs(md):
    _, ipynb = read_pair(md)
    dirty = [i for i, c in enumerate(ipynb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{md.with_suffix('.ipynb').name}: cells {dirty} carry outputs: run make sync"


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_lesson_follows_the_course_anatomy(md):
    nb, _ = read_pair(md)
    cells = nb.cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert cells[0].cell_type == "markdown" and cells[0].source.startswith(f"# {md.stem.split('_')[0]} ·")
    for badge in ("colab.research.google.com/github", "kaggle.com/kernels/welcome", "mybinder.org/v2/gh"):
        links = [u for u in re.findall(r"\((https://[^)]+)\)", cells[0].source) if badge in u]
        assert links, f"missing {badge} badge"
        assert REPO["repository"] in links[0] and md.stem in links[0], links[0]
    assert "**You will learn to**" in cells[0].source and "**Time:**" in cells[0].source
    code_tags = [tags(c) for c in cells if c.cell_type == "code"]
    assert sum("setup" in t for t in code_tags) == 1, "one setup cell, tagged setup"
    assert sum("parameters" in t for t in code_tags) == 1, "one parameters cell, tagged parameters"
    assert "## Exercises" in text and "## Summary" in text and "## Further reading" in text


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_every_exercise_is_an_answer_cell_then_one_check(md):
    nb, _ = read_pair(md)
    pairs = student.exercises(nb)
    assert len(pairs) >= least_exercises(md.stem), (
        "at least two exercises (one in a part of a split lesson), each an answer cell tagged solution and its check"
    )
    for _solution, check_cell in pairs:
        assert len(CHECK_CALL.findall(check_cell.source)) == 1, (
            f"the cell after a solution holds exactly one check: {check_cell.source[:80]!r}"
        )
    solutions = [c for c in nb.cells if "solution" in tags(c)]
    assert len(solutions) == len(pairs)
    checks_elsewhere = [
        c for c in nb.cells if c.cell_type == "code" and CHECK_CALL.search(c.source) and c not in [p[1] for p in pairs]
    ]
    assert not checks_elsewhere, "a check call outside an exercise's check cell"


def test_a_split_lesson_ends_its_parts_with_two_exercises_at_least():
    counts: dict[str, int] = {}
    for md in LESSONS:
        counts[md.stem[:2]] = counts.get(md.stem[:2], 0) + len(student.exercises(read_pair(md)[0]))
    assert {n: c for n, c in counts.items() if c < 2} == {}


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_no_cell_after_the_exercises_uses_an_answer(md):
    """In the student build the answers are `...`: a later non-exercise cell must not depend on them."""
    nb, _ = read_pair(md)
    pairs = student.exercises(nb)
    answers = {name for s, _ in pairs for name in student.bound_names(s.source)}
    exercise_cells = {id(c) for pair in pairs for c in pair}
    first = nb.cells.index(pairs[0][0])
    for cell in nb.cells[first:]:
        if cell.cell_type != "code" or id(cell) in exercise_cells:
            continue
        used = {n.id for n in ast.walk(ast.parse(cell.source)) if isinstance(n, ast.Name)}
        assert not used & answers, f"{cell.source[:60]!r} uses the answers {sorted(used & answers)}"


@pytest.mark.parametrize("md", [p for p in LESSONS if reference.stable_cells(jupytext.read(p))], ids=lambda p: p.stem)
def test_reference_for_stable_cells_matches_the_lesson(md):
    ref = reference.reference_dir(ROOT) / md.with_suffix(".ipynb").name
    assert ref.exists(), f"no {ref.relative_to(ROOT)}: run make reference"
    lesson = runner.with_answers(jupytext.read(md), md.stem)  # executed as CI runs it: worked answers in
    assert cell_sources(nbformat.read(ref, as_version=4)) == cell_sources(lesson), (
        f"{ref.name} is older than the lesson: run make reference"
    )
    assert all(c.outputs for c in reference.stable_cells(nbformat.read(ref, as_version=4))), (
        "every stable cell has a reference output"
    )


def test_stable_outputs_compare_what_a_cell_prints_not_its_progress_bars():
    def cell(*outputs):
        return nbformat.v4.new_code_cell(
            "check.that(...)",
            metadata={"tags": [reference.STABLE_TAG]},
            outputs=[nbformat.v4.new_output("stream", name=n, text=x) for n, x in outputs],
        )

    def nb(c):
        return nbformat.v4.new_notebook(cells=[c])

    want = nb(cell(("stdout", "PASSED  07.3\n"), ("stderr", "traces: 100%| 9/9 [00:01, 4.58it/s]\n")))
    same = nb(cell(("stdout", "PASSED  07.3\n"), ("stderr", "traces: 100%| 9/9 [00:02, 3.10it/s]\n")))
    other = nb(cell(("stdout", "FAILED  07.3\n")))
    assert reference.differences(want, same) == []
    assert reference.differences(want, other) and "FAILED" in reference.differences(want, other)[0]


# ----------------------------------------------------------------- the one run of each lesson


@pytest.mark.lessons
@pytest.mark.parametrize("stem", IDS)
def test_lesson_runs_top_to_bottom_and_every_worked_answer_passes(stem, executed):
    result = executed(stem)
    assert result.status == "ok", f"{stem} {result.status} after {result.seconds} s: {result.error}"
    nb = nbformat.read(result.output, as_version=4)
    lines = lines_of(nb)
    checks = len(student.exercises(nb))
    passed = [ln for ln in lines if ln.startswith("PASSED ")]
    assert len(passed) == checks, f"{len(passed)} PASSED lines for {checks} check cells"
    assert not [ln for ln in lines if ln.startswith(("FAILED ", "NOT ATTEMPTED "))]


@pytest.mark.lessons
@pytest.mark.parametrize("stem", [s for s, p in zip(IDS, LESSONS) if reference.stable_cells(jupytext.read(p))])
def test_stable_outputs_match_the_reference(stem, executed):
    result = executed(stem)
    assert result.status == "ok", result.error
    ref = nbformat.read(reference.reference_dir(ROOT) / f"{stem}.ipynb", as_version=4)
    assert reference.differences(ref, nbformat.read(result.output, as_version=4)) == []


def rehearsal_verdicts(result) -> tuple[list[dict], int]:
    """The rehearsal's verdicts of an executed lesson, and how many exercises the lesson has."""
    assert result.status == "ok", result.error
    nb = nbformat.read(result.output, as_version=4)
    marked = [ln for ln in lines_of(nb, rehearsal=True) if ln.startswith(student.REHEARSAL_MARK)]
    assert len(marked) == 1, "the rehearsal cell ran"
    return json.loads(marked[0][len(student.REHEARSAL_MARK) :]), len(student.exercises(nb))


@pytest.mark.lessons
@pytest.mark.parametrize("stem", IDS)
def test_the_student_build_says_not_attempted_for_every_exercise(stem, executed):
    verdicts, exercises_in_lesson = rehearsal_verdicts(executed(stem))
    assert len(verdicts) == exercises_in_lesson >= least_exercises(stem)
    for v in verdicts:
        assert v["error"] is None and v["statuses"] == ["not attempted"], v


@pytest.mark.lessons
@pytest.mark.parametrize("stem", IDS)
def test_every_check_fails_every_answer_known_to_be_wrong(stem, executed):
    for v in rehearsal_verdicts(executed(stem))[0]:
        for wrong in v["wrong"]:
            assert wrong["error"] is None and wrong["statuses"] == ["failed"], (v["check"], wrong)


# Lessons whose worked answers are out of sight (in tpututor/exercises); the others still show them.
ANSWERS_HIDDEN = exercises.lessons()


@pytest.mark.parametrize("stem", ANSWERS_HIDDEN)
def test_a_lesson_with_hidden_answers_shows_only_stubs_and_keeps_two_wrong_answers_per_exercise(stem):
    for path in (ROOT / "notebooks" / f"{stem}.ipynb", ROOT / "notebooks" / "ko" / f"{stem}.ipynb"):
        nb = nbformat.read(path, as_version=4)
        pairs = student.exercises(nb)
        known = exercises.for_lesson(stem)
        assert sorted(exercises.id_in(c.source) for _, c in pairs) == sorted(known), path.name
        for solution, check_cell in pairs:
            entry = known[exercises.id_in(check_cell.source)]
            assert solution.source.strip() == student.stub_source(entry.solution, entry.id).strip(), (
                f"{path.name}: the answer cell of {entry.id} is not the stub of its worked answer: "
                f"{solution.source[:120]!r}"
            )
    for entry in exercises.for_lesson(stem).values():
        assert len(entry.wrong) >= 2 and entry.hints, f"{entry.id}: two wrong answers and a hint at least"


@pytest.mark.lessons
def test_each_lesson_was_executed_exactly_once(executed):
    for stem in IDS:
        executed(stem)
    assert EXECUTIONS == {stem: 1 for stem in IDS}


# ----------------------------------------------------------------- references by number

REF = re.compile(r"\b[Ll]essons? (\d\d[a-z]?)\b")
NEXT_NUMBER = re.compile(r"(?:,| and| or|–|-|to) (\d\d[a-z]?)\b")


def _mentions(text: str):
    """(number, the words about it) for every 'lesson NN' in a text: the words run from the number to
    the next number of the same list, or to the end of the sentence (at most 160 characters)."""
    for m in REF.finditer(text):
        start, numbers = m.start(1), [(m.group(1), m.start(1))]
        pos = m.end(1)
        while True:
            chunk = text[pos : pos + 160]
            nxt = NEXT_NUMBER.search(chunk)
            stop = re.search(r"[.;:!?](\s|$)|\n\n", chunk)
            if nxt and (not stop or nxt.start() < stop.start()) and nxt.start() < 80:
                numbers.append((nxt.group(1), pos + nxt.start(1)))
                pos += nxt.end(1)
            else:
                break
        ends = [p for _, p in numbers[1:]] + [start + 200]
        for (number, at), end in zip(numbers, ends):
            sentence = re.split(r"[.;!?](?:\s|$)|\n\n", text[at:end])[0]
            yield number, sentence


def _reference_files():
    files = list((ROOT / "notebooks").rglob("*.md")) + [ROOT / "README.md"] + list((ROOT / "docs").glob("*.md"))
    files += list((ROOT / "tpututor").rglob("*.py")) + list((ROOT / "tests").glob("*.py"))
    files += list((ROOT / "benchmarks").glob("*.py")) + list((ROOT / "binder").glob("*"))
    return [f for f in files if f.is_file() and f.name != "test_notebooks.py"]


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_inline_code_never_wraps_across_a_line(md):
    """A `span` broken over two lines reads as two spans with prose between them to a translator's
    checker (and to some renderers): keep each on one line."""
    nb, _ = read_pair(md)
    broken = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown":
            continue
        for line in re.sub(r"^```.*?^```", "", cell.source, flags=re.S | re.M).splitlines():
            if re.sub(r"``.*?``", "", line).count("`") % 2:
                broken.append(f"cell {i}: {line.strip()[:70]}")
    assert not broken, "\n".join(broken)


def test_every_lesson_reference_by_number_names_that_lessons_topic():
    by_number = {lesson.number: lesson for lesson in CATALOG}
    stale = []
    for path in _reference_files():
        for number, words in _mentions(path.read_text()):
            lesson = by_number.get(number)
            names = (
                [lesson.title, lesson.title.split(":")[0], lesson.topic.replace("_", " "), *lesson.aliases]
                if lesson
                else []
            )
            if not any(name.lower() in " ".join(words.split()).lower() for name in names):
                stale.append(
                    f"{path.relative_to(ROOT)}: 'lesson {number}{words[2:60]}' does not name "
                    + (f"{lesson.heading} (say which, or add an alias)" if lesson else "any lesson")
                )
    assert not stale, "\n".join(stale)


NOTE_KINDS = "TPU|GPU|TPU or GPU|TPU slice"
NOTE = re.compile(rf"^> \*\*On an? ({NOTE_KINDS}) \(not checked here\):\*\*(.*?)(?=\n\n|\n[^>]|\Z)", re.M | re.S)
SOURCED = re.compile(r"Sources?: \[[^\]]+\]\(https?://[^)]+\).*, read \d{4}-\d{2}-\d{2}\.\s*$")
MEASURED = re.compile(r"Measured: \[[^\]]+\]\(([^)]+)\) on [^,]+, \d{4}-\d{2}-\d{2}\.")


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_every_not_checked_here_note_is_sourced_and_dated_or_points_at_a_measurement(md):
    text = md.read_text()
    for label in re.findall(r"\*\*On an? [^*]*\(not checked here\)[^*]*\*\*", text):
        assert re.fullmatch(rf"\*\*On an? ({NOTE_KINDS}) \(not checked here\):\*\*", label), (
            f"{md.name}: {label!r} is not the course's note label"
        )
    for _kind, body in NOTE.findall(text):
        body = " ".join(line.lstrip("> ") for line in body.splitlines())
        measured = MEASURED.search(body)
        assert SOURCED.search(body) or measured, (
            f"{md.name}: a note with no 'Source: [..](url), read DATE.': {body[:120]}"
        )
        if measured:
            assert (md.parent / measured.group(1)).resolve().exists(), (
                f"{md.name}: {measured.group(1)} is not committed"
            )
