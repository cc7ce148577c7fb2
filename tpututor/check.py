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
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["ExerciseFailed", "CheckBroken", "Result", "RESULTS", "attempted", "equal", "close", "that", "hint", "solution",
           "summary", "progress",
           "report", "report_text"]

STRICT_ENV = "TPUTUTOR_STRICT_CHECKS"


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
    if not attempted(got):
        return _record(Result(exercise, "not attempted", "replace the ... with your answer"))
    try:
        ok = _same(got, expected)
    except Exception:  # e.g. objects whose == raises
        ok = False
    if ok:
        return _record(Result(exercise, "passed"))
    return _record(Result(exercise, "failed", f"got {_short(got)}. Hint: {hint}"))


def close(exercise: str, got: Any, expected: float, *, hint: str, rel: float = 1e-2) -> Result:
    """Pass when the number ``got`` is within ``rel`` (relative) of ``expected``."""
    if not attempted(got):
        return _record(Result(exercise, "not attempted", "replace the ... with your answer"))
    try:
        value = float(got)
    except (TypeError, ValueError):
        return _record(Result(exercise, "failed", f"expected a number, got {_short(got)}. Hint: {hint}"))
    if math.isclose(value, expected, rel_tol=rel):
        return _record(Result(exercise, "passed"))
    return _record(Result(exercise, "failed", f"got {value:.4g}, off by more than {rel:.0%}. Hint: {hint}"))


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
            code = getattr(a, "__code__", None) or getattr(getattr(a, "__call__", None), "__code__", None)
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
    return message if seed is None else f"{message} [seed {seed}: the same inputs come back with seed={seed}]"


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
    answers = answer if isinstance(answer, tuple) else (answer,)
    if not all(attempted(a) for a in answers):
        return _record(Result(exercise, "not attempted", "fill in the answer cell above"))
    try:
        ok = test()
    except NotImplementedError:
        ok = ...
    except Exception as exc:  # the learner's code raised: report it, do not crash the notebook
        if _learners(exc, answers):
            return _record(Result(exercise, "failed", _seeded(f"{type(exc).__name__}: {exc}. Hint: {hint}", seed)))
        return _broken(exercise, f"the check itself raised {type(exc).__name__}: {exc}")
    if not attempted(ok):
        return _record(Result(exercise, "not attempted", "fill in the exercise cell above"))
    if not _is_bool(ok):
        return _broken(exercise, f"the check returned {_short(ok)}, not True or False")
    if ok:
        return _record(Result(exercise, "passed"))
    return _record(Result(exercise, "failed", _seeded(f"Hint: {hint}", seed)))


def _broken(exercise: str, why: str) -> Result:
    """A check that cannot judge: said plainly (it is the lesson's bug), raised under strict checks."""
    result = Result(exercise, "failed", f"{why}. This is a bug in the lesson's check, not in your answer: "
                                        "please report it")
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
        print(f"{entry.id} has no hints: check.solution({entry.id!r}) shows the worked answer")
        return
    n = _HINTS_SHOWN.get(entry.id, 0)
    shown = min(n, len(entry.hints) - 1)
    _HINTS_SHOWN[entry.id] = n + 1
    more = (f" (hint {shown + 1} of {len(entry.hints)}: call again for the next)" if shown + 1 < len(entry.hints)
            else f" (the last hint; check.solution({entry.id!r}) shows the worked answer)")
    print(f"Hint for {entry.id}{more}:\n{entry.hints[shown]}")


def solution(exercise: str) -> None:
    """Show the worked answer of an exercise (``check.solution("00.1")``): try the hints first."""
    from . import exercises

    entry = exercises.get(exercise)
    print(f"A worked answer for {entry.id} (one of many; yours may differ and still pass):\n\n{entry.solution}")


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
