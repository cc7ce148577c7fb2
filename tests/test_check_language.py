"""The exercise checks speak the lesson's language: a Korean lesson's checks print Korean.

A Korean notebook's setup cell is ``launch.setup("NN_topic", language="ko")`` (the translation build
writes it; no other code changes), and from then on :mod:`tpututor.check` prints each exercise's
Korean title, hint and message from ``tpututor/exercises/ko/NN_topic.toml``, shipped with the package.
The status word stays English (``PASSED``, ``FAILED``, ``NOT ATTEMPTED``): it is what a reader, the
runner and the tests look for. English output stays as it always was; a text with no current
translation shows in English, never as an error.
"""

from __future__ import annotations

import ast
import re

import nbformat
import pytest

from conftest import ROOT
from tpututor import check, exercises, launch
from tpututor_course import translate

LESSONS = exercises.lessons()
KO = ROOT / "notebooks" / "ko"


def check_calls(stem: str) -> dict[str, list[tuple[str, str]]]:
    """Exercise id -> (title, hint) of every check.that/equal/close call of the English lesson."""
    nb = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    calls: dict[str, list[tuple[str, str]]] = {}
    for cell in nb.cells:
        if cell.cell_type != "code" or "check." not in cell.source:
            continue
        code = "\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(code)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "check"
                and node.func.attr in ("that", "equal", "close")
            ):
                exercise_id, _, title = node.args[0].value.partition(" ")
                hint = next(k.value.value for k in node.keywords if k.arg == "hint")
                calls.setdefault(exercise_id, []).append((title, hint))
    return calls


def all_translations():
    for stem in LESSONS:
        yield from exercises.translations(stem, "ko").values()


def _fresh_checks(monkeypatch, lang: str) -> None:
    """Checks in ``lang`` with no strict checks, a fresh result list and no hint shown yet."""
    monkeypatch.delenv(check.STRICT_ENV, raising=False)
    monkeypatch.setattr(check, "RESULTS", [])
    monkeypatch.setattr(check, "_HINTS_SHOWN", {})
    check.set_language(lang)


@pytest.fixture
def korean(monkeypatch):
    """Checks in Korean for one test; English after."""
    _fresh_checks(monkeypatch, "ko")
    yield
    check.set_language("en")


@pytest.fixture
def english(monkeypatch):
    _fresh_checks(monkeypatch, "en")


# The catalogue: complete, and in step with the English lessons.


@pytest.mark.parametrize("stem", LESSONS)
def test_every_exercise_has_a_korean_title_a_korean_hint_and_as_many_hints_as_the_english(stem):
    english = exercises.for_lesson(stem)
    korean = exercises.translations(stem, "ko")
    assert list(korean) == list(english), f"tpututor/exercises/ko/{stem}.toml: one entry per exercise, in order"
    for exercise_id, entry in english.items():
        t = korean[exercise_id]
        assert t.title.strip() and t.hint.strip(), exercise_id
        assert len(t.hints) == len(entry.hints) and all(h.strip() for h in t.hints), exercise_id


@pytest.mark.parametrize("stem", LESSONS)
def test_each_exercise_has_one_check_call_and_the_catalogue_translates_its_current_english(stem):
    """The catalogue records the English it translates; when a lesson's title, hint or hints change,
    this fails until the Korean is revised (meanwhile the learner sees the new English)."""
    calls = check_calls(stem)
    assert sorted(calls) == sorted(exercises.for_lesson(stem))
    assert all(len(c) == 1 for c in calls.values()), "a second check call of one exercise needs its own entry"
    for exercise_id, [(title, hint)] in calls.items():
        t = exercises.translation(exercise_id, "ko")
        assert (t.english_title, t.english_hint) == (title, hint), exercise_id
        assert t.english_hints == exercises.get(exercise_id).hints, exercise_id


CODE_SPAN = re.compile(r"`[^`\n]+`")  # the rules of tests/test_translate.py for the lessons' prose
NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")


def _pairs():
    for t in all_translations():
        yield f"{t.id} title", t.english_title, t.title
        yield f"{t.id} hint", t.english_hint, t.hint
        for n, (english, korean) in enumerate(zip(t.english_hints, t.hints)):
            yield f"{t.id} hints[{n}]", english, korean


def test_code_spans_and_numbers_in_a_korean_text_equal_the_english_ones():
    lost = [
        f"{where}: {piece}"
        for where, english, korean in _pairs()
        for piece in set(CODE_SPAN.findall(english)) | set(NUMBER.findall(CODE_SPAN.sub("", english)))
        if piece not in korean
    ]
    assert lost == []


# Code written without backticks, as the hints write it: a word joined to more by ".", "=", "(" or "["
# (mesh.collectives, mesh=grid, hardware.lookup(chip)); the glossary's terms are looked for outside it.
CODE_WORDS = re.compile(r"\S*\w[.=(\[]\S+")


def test_glossary_terms_in_the_korean_texts_are_written_as_fixed():
    glossary = translate.Glossary.load(ROOT, "ko")
    wrong = [
        f"{where}: {v}"
        for where, english, korean in _pairs()
        for v in glossary.violations(CODE_WORDS.sub(" ", english), korean)
    ]
    assert wrong == []


def test_the_korean_texts_are_korean():
    english_only = [where for where, _, korean in _pairs() if not re.search("[\uac00-\ud7a3]", korean)]
    assert english_only == []


# What a check prints in Korean.


def _english_of(exercise_id: str):
    t = exercises.translation(exercise_id, "ko")
    return t, f"{exercise_id} {t.english_title}", t.english_hint


def test_a_korean_failed_line_starts_with_FAILED_and_shows_the_korean_title_and_hint(korean, capsys):
    t, name, hint = _english_of("03.1")
    r = check.that(name, lambda: False, hint=hint)
    line = capsys.readouterr().out.rstrip("\n")
    assert line == f"FAILED        03.1 {t.title}: 힌트: {t.hint}"
    assert (r.status, r.lesson, r.exercise) == ("failed", "03", f"03.1 {t.title}")
    assert "Hint" not in line


def test_korean_equal_and_close_keep_the_status_words_and_the_values(korean, capsys):
    t, name, hint = _english_of("03.2")
    check.equal(name, 5, 1, hint=hint)
    check.equal(name, 1, 1, hint=hint)
    check.equal(name, ..., 1, hint=hint)
    t11, name11, hint11 = _english_of("11.4")
    check.close(name11, 2.0, 1.0, hint=hint11)
    check.close(name11, "lots", 1.0, hint=hint11)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"FAILED        03.2 {t.title}: 받은 값: 5. 힌트: {t.hint}"
    assert lines[1] == f"PASSED        03.2 {t.title}"
    assert lines[2] == f"NOT ATTEMPTED 03.2 {t.title}: ... 자리에 답을 쓰세요"
    assert lines[3].startswith(f"FAILED        11.4 {t11.title}: 받은 값 2: 기대한 값에서 1% 넘게")
    assert lines[3].endswith(f"힌트: {t11.hint}")
    assert lines[4].startswith("FAILED") and "숫자가 필요합니다. 받은 값: 'lots'" in lines[4]
    assert check.summary() == {"passed": 0, "failed": 1, "not attempted": 1}, "the latest result per exercise"


def test_korean_not_attempted_broken_check_and_seed_messages(korean, capsys):
    t, name, hint = _english_of("04.4")
    check.that(name, lambda: True, hint=hint, answer=...)
    check.that(name, lambda: ..., hint=hint)
    check.that(name, lambda: "yes", hint=hint)
    check.that(name, lambda: {}["missing"], hint=hint, answer=lambda: 1)  # the KeyError is the check's own
    check.that(name, lambda: 1 / 0, hint=hint, seed=7)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"NOT ATTEMPTED 04.4 {t.title}: 위의 답 셀을 채우세요"
    assert lines[1] == f"NOT ATTEMPTED 04.4 {t.title}: 위의 연습 문제 셀을 채우세요"
    assert (
        lines[2].startswith("FAILED")
        and "True나 False가 아닌 값을 반환했습니다: 'yes'" in lines[2]
        and "확인 코드에 있는 버그" in lines[2]
    )
    assert "확인 코드 자체에서 예외가 났습니다: KeyError" in lines[3] and "힌트" not in lines[3]
    assert lines[4].startswith("FAILED") and "ZeroDivisionError" in lines[4] and f"힌트: {t.hint}" in lines[4]
    assert lines[4].endswith("[seed 7: seed=7로 같은 입력을 다시 만들 수 있습니다]")


def test_korean_hints_come_one_at_a_time_with_a_korean_preamble_then_the_solution(korean, capsys):
    t = exercises.translation("03.1", "ko")
    for n in range(len(t.hints)):
        check.hint("03.1")
        out = capsys.readouterr().out
        assert out.startswith("03.1의 힌트 (") and t.hints[n] in out
        assert t.english_hints[n] not in out
    assert "마지막 힌트입니다. check.solution('03.1')" in out
    check.solution("03.1")
    out = capsys.readouterr().out
    assert out.startswith("03.1의 풀이 예시입니다") and exercises.get("03.1").solution in out


# English, as it always was.


def test_english_lines_are_unchanged(english, capsys):
    check.equal("e1 a title", 3, 3, hint="h")
    check.equal("e2", 4, 3, hint="think again")
    check.equal("e3", ..., 3, hint="h")
    check.close("e4", 1.5, 1.0, hint="h")
    check.close("e5", "x", 1.0, hint="h")
    check.that("e6", lambda: True, hint="h", answer=None)
    check.that("e7", lambda: ..., hint="h")
    check.that("e8", lambda: False, hint="h", seed=3)
    check.that("e9", lambda: "no", hint="h")
    check.that("03.1 one program for three steps", lambda: False, hint="anything")
    assert capsys.readouterr().out.splitlines() == [
        "PASSED        e1 a title",
        "FAILED        e2: got 4. Hint: think again",
        "NOT ATTEMPTED e3: replace the ... with your answer",
        "FAILED        e4: got 1.5, off by more than 1%. Hint: h",
        "FAILED        e5: expected a number, got 'x'. Hint: h",
        "NOT ATTEMPTED e6: fill in the answer cell above",
        "NOT ATTEMPTED e7: fill in the exercise cell above",
        "FAILED        e8: Hint: h [seed 3: the same inputs come back with seed=3]",
        (
            "FAILED        e9: the check returned 'no', not True or False. This is a bug in the lesson's check, "
            "not in your answer: please report it"
        ),
        "FAILED        03.1 one program for three steps: Hint: anything",
    ]


def test_english_hint_and_solution_preambles_are_unchanged(english, capsys):
    entry = exercises.get("01.4")
    check.hint("01.4")
    assert capsys.readouterr().out == (
        f"Hint for 01.4 (hint 1 of {len(entry.hints)}: call again for the next):\n{entry.hints[0]}\n"
    )
    for _ in entry.hints:
        check.hint("01.4")
    assert capsys.readouterr().out.endswith(
        f"Hint for 01.4 (the last hint; check.solution('01.4') shows the worked answer):\n{entry.hints[-1]}\n"
    )
    check.solution("01.4")
    assert capsys.readouterr().out == (
        f"A worked answer for 01.4 (one of many; yours may differ and still pass):\n\n{entry.solution}\n"
    )


# The language setting.


def test_an_unknown_language_is_refused_naming_the_known_ones(fake):
    with pytest.raises(ValueError, match="'xx'.*choose one of en, ko"):
        check.set_language("xx")
    with pytest.raises(ValueError, match="choose one of en, ko"):
        launch.setup(None, fake("laptop-cpu"), language="xx")
    assert check.language() == "en"


def test_launch_setup_sets_the_checks_language_and_english_is_the_default(fake, capsys):
    try:
        launch.setup(None, fake("laptop-cpu"), language="ko")
        assert check.language() == "ko"
        launch.setup(None, fake("laptop-cpu"))
        assert check.language() == "en"
    finally:
        check.set_language("en")


@pytest.mark.parametrize("stem", sorted(p.stem for p in KO.glob("[0-9][0-9]*_*.ipynb")))
def test_the_korean_setup_cell_passes_language_ko(stem):
    nb = nbformat.read(KO / f"{stem}.ipynb", as_version=4)
    setup = [c.source for c in nb.cells if c.cell_type == "code" and "launch.setup(" in c.source]
    assert len(setup) == 1 and setup[0].endswith(f'launch.setup("{stem}", language="ko")'), setup


def test_the_translation_build_changes_only_the_setup_call_of_a_code_cell():
    cell = launch.SETUP_CELL.format(requirement="tpututor", lesson="03a_xla_fusion")
    ko = translate.localised_code(cell, "03a_xla_fusion", "ko")
    assert ko == cell.replace('launch.setup("03a_xla_fusion")', 'launch.setup("03a_xla_fusion", language="ko")')
    assert ko != cell
    for other in ("print(1)", 'launch.setup("00a_where_am_i")', 'check.hint("03.1")'):
        assert translate.localised_code(other, "03a_xla_fusion", "ko") == other


# A missing or stale translation: English, never an error.


def test_a_missing_or_stale_korean_entry_falls_back_to_english(korean, capsys, monkeypatch):
    t = exercises.translation("03.1", "ko")
    check.that("99.1 an exercise of no lesson", lambda: False, hint="its hint")
    check.that("03.1 a title the catalogue has never seen", lambda: False, hint="a hint it has never seen")
    check.that(f"03.1 {t.english_title}", lambda: False, hint="a changed hint")
    check.that("03.1", lambda: False, hint=t.english_hint)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "FAILED        99.1 an exercise of no lesson: 힌트: its hint"
    assert lines[1] == "FAILED        03.1 a title the catalogue has never seen: 힌트: a hint it has never seen"
    assert lines[2] == f"FAILED        03.1 {t.title}: 힌트: a changed hint"
    assert lines[3] == f"FAILED        03.1: 힌트: {t.hint}"

    monkeypatch.setattr(exercises, "translation", lambda exercise_id, lang: None)  # no Korean catalogue at all
    check.that(f"03.1 {t.english_title}", lambda: False, hint=t.english_hint)
    check.hint("03.1")
    out = capsys.readouterr().out
    assert out.startswith(f"FAILED        03.1 {t.english_title}: 힌트: {t.english_hint}")
    assert exercises.get("03.1").hints[0] in out


def test_korean_hints_for_changed_english_hints_show_the_english(korean, capsys, monkeypatch):
    t = exercises.translation("03.1", "ko")
    stale = exercises.Translation(
        t.id,
        t.lang,
        t.title,
        t.hint,
        t.hints,
        t.english_title,
        t.english_hint,
        ("an older English hint",) + t.english_hints[1:],
    )
    monkeypatch.setattr(exercises, "translation", lambda exercise_id, lang: stale)
    check.hint("03.1")
    out = capsys.readouterr().out
    assert exercises.get("03.1").hints[0] in out and t.hints[0] not in out


def test_a_language_with_no_catalogue_has_no_translations():
    assert exercises.translations("03a_xla_fusion", "xx") == {}
    assert exercises.translation("99.1", "ko") is None
