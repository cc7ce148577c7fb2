"""The lessons' exercises, out of sight: worked answers, hints, and answers known to be wrong.

A lesson's notebook holds each exercise as a stub (the answer cell) and its check. What a learner
should not see before asking lives here, one file per lesson (``tpututor/exercises/NN_topic.toml``),
shipped with the package so a Colab install has it:

.. code-block:: toml

    ["00.1"]
    hints = ["first hint", "a stronger one", "nearly the answer"]
    solution = '''
    def jax_devices(slice_name): ...
    '''

    [["00.1".wrong]]
    why = "counts every number as chips"
    code = '''
    def jax_devices(slice_name): ...
    '''

``check.hint("00.1")`` shows the hints one at a time, ``check.solution("00.1")`` the worked answer.
The course runner puts the worked answers into the answer cells when it executes a lesson (CI,
``make run``, the site), and its rehearsal runs every check against each wrong answer, which must
FAIL, and against the stub, which must say NOT ATTEMPTED.

A translation of what a learner reads (each exercise's title, its check's hint and its hints) lives
beside them, one file per language and lesson (``tpututor/exercises/ko/NN_topic.toml``), with the
English it translates, so that :mod:`tpututor.check` shows English wherever the English has changed:

.. code-block:: toml

    ["00.1"]
    title = "..."    # the words after the id in check.that("00.1 ...", ...)
    hint = "..."     # its hint= argument
    hints = ["...", "...", "..."]

    ["00.1".english]
    title = "JAX devices per slice"
    hint = "..."
    hints = ["...", "...", "..."]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from importlib import resources

__all__ = ["Exercise", "Wrong", "Translation", "for_lesson", "get", "id_in", "lessons", "translations", "translation"]

# The exercise a check cell judges: the first argument of its check call, "00.1 ..." -> "00.1".
_CHECK_ID = re.compile(r"check\.(?:equal|close|that)\(\s*[\"'](\d\d\.\d+[a-z]?)\b")


@dataclass(frozen=True)
class Wrong:
    """An answer a learner really writes, and that the check must fail."""

    why: str
    code: str


@dataclass(frozen=True)
class Exercise:
    id: str  # "00.1"
    lesson: str  # "00a_where_am_i"
    hints: tuple[str, ...]
    solution: str
    wrong: tuple[Wrong, ...]


def id_in(check_source: str) -> str | None:
    """The exercise id a check cell names (``check.that("00.1 ...", ...)`` -> ``"00.1"``)."""
    m = _CHECK_ID.search(check_source)
    return m.group(1) if m else None


def lessons() -> list[str]:
    """The lessons whose exercises live here."""
    return sorted(p.name.removesuffix(".toml") for p in resources.files(__name__).iterdir() if p.name.endswith(".toml"))


def _parts(exercise_id: str) -> list[str]:
    """The lessons numbered like an exercise id ("09.2" -> the parts 09a_..., 09b_..., 09c_...)."""
    return [lesson for lesson in lessons() if lesson[:2] == exercise_id[:2]]


def _lesson_of(exercise_id: str) -> str | None:
    """The lesson an exercise id belongs to ("00.1" -> "00b_getting_a_tpu"): the one with that number, or
    the part of it (``09a_...``, ``09b_...``) that holds the id; None if none."""
    group = _parts(exercise_id)
    return next((lesson for lesson in group if exercise_id in for_lesson(lesson)), group[0] if group else None)


def _read(*parts: str) -> dict:
    """A toml file of this package (``_read("ko", "00a_where_am_i.toml")``); empty when there is none."""
    import tomllib

    path = resources.files(__name__).joinpath(*parts)
    return tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}


@cache
def for_lesson(lesson: str) -> dict[str, Exercise]:
    """Every exercise of ``lesson`` (``"00a_where_am_i"``), by id; empty when its answers are still in
    the notebook."""
    out = {}
    for exercise_id, entry in _read(f"{lesson}.toml").items():
        out[exercise_id] = Exercise(
            exercise_id,
            lesson,
            tuple(entry.get("hints", ())),
            entry["solution"].strip("\n"),
            tuple(Wrong(w["why"], w["code"].strip("\n")) for w in entry.get("wrong", ())),
        )
    return out


def get(exercise_id: str) -> Exercise:
    """One exercise by id (``"00.1"``); an unknown id is a KeyError naming the lesson's ids."""
    exercise_id = str(exercise_id).strip().split()[0] if str(exercise_id).strip() else ""
    lesson = _lesson_of(exercise_id)
    if lesson is not None:
        found = for_lesson(lesson)
        if exercise_id in found:
            return found[exercise_id]
        parts = _parts(exercise_id)
        ids = sorted((i for part in parts for i in for_lesson(part)), key=lambda i: int(i.split(".")[1]))
        raise KeyError(
            f"no exercise {exercise_id!r} in lesson {exercise_id[:2]} ({', '.join(parts)}); it has {', '.join(ids)}"
        )
    raise KeyError(
        f"no exercise {exercise_id!r}: exercises are numbered like '01.2', the second exercise of the lesson numbered 01"
    )


@dataclass(frozen=True)
class Translation:
    """What a learner reads of one exercise, in another language, and the English it translates."""

    id: str  # "00.1"
    lang: str  # "ko"
    title: str  # the exercise's name after its id
    hint: str  # the hint its check call passes
    hints: tuple[str, ...]  # check.hint's hints, in the order of the English ones
    english_title: str
    english_hint: str
    english_hints: tuple[str, ...]


@cache
def translations(lesson: str, lang: str) -> dict[str, Translation]:
    """The ``lang`` translation of every exercise of ``lesson``, by id; empty when there is none."""
    out = {}
    for exercise_id, entry in _read(lang, f"{lesson}.toml").items():
        english = entry.get("english", {})
        out[exercise_id] = Translation(
            exercise_id,
            lang,
            entry.get("title", ""),
            entry.get("hint", ""),
            tuple(entry.get("hints", ())),
            english.get("title", ""),
            english.get("hint", ""),
            tuple(english.get("hints", ())),
        )
    return out


def translation(exercise_id: str, lang: str) -> Translation | None:
    """One exercise's ``lang`` translation (``translation("00.1", "ko")``); None when there is none."""
    lesson = _lesson_of(str(exercise_id))
    return None if lesson is None else translations(lesson, lang).get(str(exercise_id))
