"""Self-checking exercises.

An exercise has two cells. The *answer* cell, tagged ``solution``, is where
the learner writes code; the student build swaps it for a stub that leaves
the answer as ``...``. The *check* cell calls one of these functions and
prints one line: ``PASSED``, ``FAILED`` with a hint, or ``NOT ATTEMPTED``.

    answer = 2 * 4096**3                     # solution cell
    check.equal("00.1 FLOPs of x @ x.T", answer, expected, hint="2 * m * n * k")

A wrong answer never stops the notebook for a learner. With
``TPUTUTOR_STRICT_CHECKS=1`` (set by ``make test`` and ``make run``) a failure
raises :class:`ExerciseFailed`, so CI notices a solution that stopped being right.
Every result is kept in :data:`RESULTS` for a progress summary.

The Korean lessons call ``launch.setup(..., language="ko")``, which calls :func:`set_language`: the
lines then carry the exercise's Korean title, hint and message from the catalogue shipped with the
package (``tpututor/exercises/ko/NN_topic.toml``), with the status word (``PASSED``, ``FAILED``,
``NOT ATTEMPTED``) kept in English, so that a line is found the same way in any language. A text the
catalogue lacks, or whose English it records is not the English the lesson passes, shows in English.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import validate

__all__ = [
    "ExerciseFailed",
    "CheckBroken",
    "Result",
    "RESULTS",
    "LANGUAGES",
    "attempted",
    "equal",
    "close",
    "that",
    "hint",
    "solution",
    "set_language",
    "language",
    "summary",
    "progress",
    "report",
    "report_text",
]

STRICT_ENV = "TPUTUTOR_STRICT_CHECKS"
LANGUAGES = validate.LANGUAGES

# What a check says around the learner's values, per language. The English is what every English
# lesson has always printed (CI's reference outputs compare it); a key missing in a language is English.
_MESSAGES: dict[str, dict[str, str]] = {
    "en": {
        "stub": "replace the ... with your answer",
        "fill answer": "fill in the answer cell above",
        "fill exercise": "fill in the exercise cell above",
        "hint": "Hint: {hint}",
        "got": "got {got}. {hint}",
        "not a number": "expected a number, got {got}. {hint}",
        "off": "got {got}, off by more than {rel}. {hint}",
        "raised": "{error}. {hint}",
        "seed": "{message} [seed {seed}: the same inputs come back with seed={seed}]",
        "check raised": "the check itself raised {error}",
        "check returned": "the check returned {got}, not True or False",
        "broken": "{why}. This is a bug in the lesson's check, not in your answer: please report it",
        "no hints": "{id} has no hints: check.solution({id!r}) shows the worked answer",
        "next hint": " (hint {n} of {total}: call again for the next)",
        "last hint": " (the last hint; check.solution({id!r}) shows the worked answer)",
        "hint for": "Hint for {id}{more}:\n{hint}",
        "solution": "A worked answer for {id} (one of many; yours may differ and still pass):\n\n{solution}",
    },
    "ko": {
        "stub": "... 자리에 답을 쓰세요",
        "fill answer": "위의 답 셀을 채우세요",
        "fill exercise": "위의 연습 문제 셀을 채우세요",
        "hint": "힌트: {hint}",
        "got": "받은 값: {got}. {hint}",
        "not a number": "숫자가 필요합니다. 받은 값: {got}. {hint}",
        "off": "받은 값 {got}: 기대한 값에서 {rel} 넘게 벗어납니다. {hint}",
        "raised": "{error}. {hint}",
        "seed": "{message} [seed {seed}: seed={seed}로 같은 입력을 다시 만들 수 있습니다]",
        "check raised": "확인 코드 자체에서 예외가 났습니다: {error}",
        "check returned": "확인 코드가 True나 False가 아닌 값을 반환했습니다: {got}",
        "broken": "{why}. 여러분의 답이 아니라 레슨의 확인 코드에 있는 버그입니다. 알려 주세요",
        "no hints": "{id}에는 힌트가 없습니다. check.solution({id!r})이 풀이 예시를 보여 줍니다",
        "next hint": " ({total}개 중 {n}번째, 다시 호출하면 다음 힌트가 나옵니다)",
        "last hint": " (마지막 힌트입니다. check.solution({id!r})이 풀이 예시를 보여 줍니다)",
        "hint for": "{id}의 힌트{more}:\n{hint}",
        "solution": "{id}의 풀이 예시입니다(여러 풀이 중 하나일 뿐이며, 답이 달라도 통과할 수 있습니다):\n\n{solution}",
    },
}

_LANGUAGE = "en"


def set_language(lang: str) -> None:
    """Print checks, hints and worked-answer notes in ``lang`` (``"en"`` or ``"ko"``) from now on.

    ``launch.setup(..., language="ko")``, the Korean lessons' setup cell, calls it. An unknown
    language is a ValueError naming the known ones.
    """
    global _LANGUAGE
    _LANGUAGE = validate.language(lang)


def language() -> str:
    """The language checks print in (``"en"`` unless :func:`set_language` said otherwise)."""
    return _LANGUAGE


def _say(key: str, **values: Any) -> str:
    """One message in the current language (English where the language lacks it)."""
    return _MESSAGES.get(_LANGUAGE, {}).get(key, _MESSAGES["en"][key]).format(**values)


def _text(exercise: str, hint: str | None = None) -> tuple[str, str | None]:
    """The exercise's name and hint as the current language writes them: ``"03.1 <title>"`` and the
    hint from the language's catalogue where it has them for this very English, else the English."""
    if _LANGUAGE == "en":
        return exercise, hint
    try:
        from . import exercises

        words = exercise.split(maxsplit=1)
        entry = exercises.translation(words[0], _LANGUAGE) if words else None
    except Exception:  # a missing or unreadable catalogue never breaks a check: English it is
        entry = None
    if entry is None:
        return exercise, hint
    title = entry.title if len(words) == 2 and entry.title and words[1] == entry.english_title else None
    name = f"{words[0]} {title}" if title else exercise
    if hint is not None and entry.hint and hint == entry.english_hint:
        hint = entry.hint
    return name, hint


class ExerciseFailed(AssertionError):
    """Raised for a failed check when strict checks are on (CI)."""


@dataclass(frozen=True)
class Result:
    exercise: str
    status: str  # "passed" | "failed" | "not attempted"
    message: str = ""

    @property
    def lesson(self) -> str:
        """The lesson an exercise belongs to: "00" for "00.3b what limits ..."; "-" when it names none."""
        words = self.exercise.split()
        return words[0].split(".", 1)[0] if words and "." in words[0] else "-"

    def _ipython_display_(self) -> None:
        """Show nothing when a check is a cell's last line: the result is already printed."""

    def __str__(self) -> str:
        text = f"{self.status.upper():<13} {self.exercise}"
        return f"{text}: {self.message}" if self.message else text


RESULTS: list[Result] = []


def _empty_body(code) -> bool:
    """True for a function whose body does nothing but return None (a docstring and ``...``:
    what the student build leaves of a worked answer)."""
    import dis

    ops = [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in ("RESUME", "NOP", "CACHE")]
    return ops in ([("LOAD_CONST", None), ("RETURN_VALUE", None)], [("RETURN_CONST", None)])


def attempted(value: Any) -> bool:
    """False for the stub values ``...`` and ``None`` and for a function with an empty body (the
    student build's stub); True for anything else."""
    if value is Ellipsis or value is None:
        return False
    if callable(value):  # a wrapped stub (``@jax.jit def f(x): ...``) is still a stub
        import inspect

        try:
            value = inspect.unwrap(value)
        except ValueError:  # a wrapper cycle: judge the outer function
            pass
    code = getattr(value, "__code__", None)
    return code is None or not _empty_body(code)


def _record(result: Result) -> Result:
    RESULTS.append(result)
    print(result)
    if result.status == "failed" and os.environ.get(STRICT_ENV, "") not in ("", "0"):
        raise ExerciseFailed(str(result))
    return result


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _same(a: Any, b: Any) -> bool:
    """Equality that also holds for arrays (NumPy, JAX, torch) and for pytrees of them."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if hasattr(a, "shape") or hasattr(b, "shape"):  # arrays: same shape and elements
        import numpy as np

        try:
            x, y = np.asarray(a), np.asarray(b)
        except Exception:
            return False
        return x.shape == y.shape and bool(np.array_equal(x, y))
    return bool(a == b)


def equal(exercise: str, got: Any, expected: Any, *, hint: str) -> Result:
    """Pass when ``got`` equals ``expected``: arrays element by element, pytrees leaf by leaf."""
    exercise, hint = _text(exercise, hint)
    if not attempted(got):
        return _record(Result(exercise, "not attempted", _say("stub")))
    try:
        ok = _same(got, expected)
    except Exception:  # e.g. objects whose == raises
        ok = False
    if ok:
        return _record(Result(exercise, "passed"))
    return _record(Result(exercise, "failed", _say("got", got=_short(got), hint=_say("hint", hint=hint))))


def close(exercise: str, got: Any, expected: float, *, hint: str, rel: float = 1e-2) -> Result:
    """Pass when the number ``got`` is within ``rel`` (relative) of ``expected``."""
    exercise, hint = _text(exercise, hint)
    if not attempted(got):
        return _record(Result(exercise, "not attempted", _say("stub")))
    try:
        value = float(got)
    except (TypeError, ValueError):
        return _record(Result(exercise, "failed", _say("not a number", got=_short(got), hint=_say("hint", hint=hint))))
    if math.isclose(value, expected, rel_tol=rel):
        return _record(Result(exercise, "passed"))
    return _record(
        Result(exercise, "failed", _say("off", got=f"{value:.4g}", rel=f"{rel:.0%}", hint=_say("hint", hint=hint)))
    )


class CheckBroken(RuntimeError):
    """The check's own code failed (not the learner's): a bug in the lesson, raised under strict checks."""


def _is_bool(value: Any) -> bool:
    """A real yes or no: ``bool``, or a NumPy/JAX/torch boolean scalar; not ``"False"``, not ``[False]``."""
    if isinstance(value, bool):
        return True
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    return dtype is not None and str(dtype) in ("bool", "torch.bool") and tuple(shape or ()) == ()


# Exceptions that, raised by a check's own code, say the check is wrong (a name it lacks, a key or an
# attribute it expected, an import that failed). Any other one a check raises (ValueError, AssertionError,
# TypeError, ...) is taken as its verdict on a wrong answer: checks raise those on purpose, with a message.
_CHECK_BUGS = (NameError, KeyError, AttributeError, ImportError, SyntaxError)


def _learners(exc: BaseException, answers: tuple) -> bool:
    """Whether the exception is the learner's: raised by (or through) one of their functions, or raised
    by the check on purpose about their answer; False for a programming error in the check's own code
    (:data:`_CHECK_BUGS` with no frame of the learner's functions on its traceback)."""
    if not isinstance(exc, _CHECK_BUGS):
        return True
    import inspect

    codes = set()
    for a in answers:
        if callable(a):
            try:
                a = inspect.unwrap(a)
            except ValueError:
                pass
            code = getattr(a, "__code__", None) or getattr(
                inspect.getattr_static(type(a), "__call__", None), "__code__", None
            )
            todo = [code] if code is not None else []
            while todo:  # the function and everything defined inside it (closures, lambdas)
                c = todo.pop()
                codes.add(c)
                todo += [k for k in c.co_consts if hasattr(k, "co_code")]
    if not codes:
        return True
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code in codes:
            return True
        tb = tb.tb_next
    return False


def _seeded(message: str, seed: int | None) -> str:
    return message if seed is None else _say("seed", message=message, seed=seed)


def that(exercise: str, test: Callable[[], bool], *, hint: str, answer: Any = True, seed: int | None = None) -> Result:
    """Pass when ``test()`` returns True.

    ``answer`` is what the learner wrote (a value, a function, or a tuple of them): while any of
    it is still a stub, the check says NOT ATTEMPTED without running ``test``. So does a test that
    raises ``NotImplementedError`` or returns ``...``. An exception from the learner's code is a
    failure, reported with the hint; a programming error in the check's own code (a NameError,
    KeyError, AttributeError or ImportError with no frame of the learner's functions on its
    traceback) is reported as a broken check, not as the learner's mistake, and so is a test that
    returns anything but a real boolean. ``seed``, when the check draws random inputs,
    is printed in a FAILED line so the failure can be replayed.
    """
    exercise, hint = _text(exercise, hint)
    answers = answer if isinstance(answer, tuple) else (answer,)
    if not all(attempted(a) for a in answers):
        return _record(Result(exercise, "not attempted", _say("fill answer")))
    try:
        ok = test()
    except NotImplementedError:
        ok = ...
    except Exception as exc:  # the learner's code raised: report it, do not crash the notebook
        if _learners(exc, answers):
            return _record(
                Result(
                    exercise,
                    "failed",
                    _seeded(_say("raised", error=f"{type(exc).__name__}: {exc}", hint=_say("hint", hint=hint)), seed),
                )
            )
        return _broken(exercise, _say("check raised", error=f"{type(exc).__name__}: {exc}"))
    if not attempted(ok):
        return _record(Result(exercise, "not attempted", _say("fill exercise")))
    if not _is_bool(ok):
        return _broken(exercise, _say("check returned", got=_short(ok)))
    if ok:
        return _record(Result(exercise, "passed"))
    return _record(Result(exercise, "failed", _seeded(_say("hint", hint=hint), seed)))


def _broken(exercise: str, why: str) -> Result:
    """A check that cannot judge: said plainly (it is the lesson's bug), raised under strict checks."""
    result = Result(exercise, "failed", _say("broken", why=why))
    RESULTS.append(result)
    print(result)
    if os.environ.get(STRICT_ENV, "") not in ("", "0"):
        raise CheckBroken(str(result))
    return result


_HINTS_SHOWN: dict[str, int] = {}


def hint(exercise: str) -> None:
    """Show the next hint of an exercise (``check.hint("00.1")``); call it again for a stronger one."""
    from . import exercises

    entry = exercises.get(exercise)
    if not entry.hints:
        print(_say("no hints", id=entry.id))
        return
    hints = entry.hints
    if _LANGUAGE != "en":
        try:
            local = exercises.translation(entry.id, _LANGUAGE)
        except Exception:  # an unreadable catalogue: the English hints
            local = None
        if local is not None and local.hints and local.english_hints == entry.hints:
            hints = local.hints
    n = _HINTS_SHOWN.get(entry.id, 0)
    shown = min(n, len(hints) - 1)
    _HINTS_SHOWN[entry.id] = n + 1
    more = (
        _say("next hint", n=shown + 1, total=len(hints)) if shown + 1 < len(hints) else _say("last hint", id=entry.id)
    )
    print(_say("hint for", id=entry.id, more=more, hint=hints[shown]))


def solution(exercise: str) -> None:
    """Show the worked answer of an exercise (``check.solution("00.1")``): try the hints first."""
    from . import exercises

    entry = exercises.get(exercise)
    print(_say("solution", id=entry.id, solution=entry.solution))


def _latest(results: list[Result] | None) -> list[Result]:
    """The last result of each exercise (a learner may run a check several times)."""
    return list({r.exercise: r for r in (RESULTS if results is None else results)}.values())


def summary(results: list[Result] | None = None) -> dict[str, int]:
    """Counts of passed, failed and not-attempted exercises (latest result per exercise)."""
    counts = {"passed": 0, "failed": 0, "not attempted": 0}
    for r in _latest(results):
        counts[r.status] += 1
    return counts


def progress(results: list[Result] | None = None) -> dict[str, dict[str, int]]:
    """Per lesson, the counts of :func:`summary` (latest result per exercise)."""
    out: dict[str, dict[str, int]] = {}
    for r in _latest(results):
        counts = out.setdefault(r.lesson, {"passed": 0, "failed": 0, "not attempted": 0})
        counts[r.status] += 1
    return dict(sorted(out.items()))


def report_text(results: list[Result] | None = None) -> str:
    """This session's exercises per lesson as a small table: passed, failed, not attempted."""
    rows = progress(results)
    lines = ["lesson  passed  failed  not attempted"]
    lines += [f"{lesson:<7} {c['passed']:>6}  {c['failed']:>6}  {c['not attempted']:>13}" for lesson, c in rows.items()]
    if not rows:
        lines.append("(no exercise checked yet in this session)")
    return "\n".join(lines)


def report(results: list[Result] | None = None) -> None:
    """Print this session's exercises per lesson (returns nothing, so a cell shows it once)."""
    print(report_text(results))
