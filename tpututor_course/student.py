"""The student build: every lesson with its worked answers replaced by stubs.

Each cell tagged ``solution`` is rewritten statement by statement:
``answer = <expression>`` becomes ``answer = ...`` and a function keeps its
signature (and docstring) with ``...`` for a body, so it returns None. The
check cells report ``...`` and None as NOT ATTEMPTED, so a student notebook
runs top to bottom without an error before anything is filled in.

``make student`` (``python -m tpututor_course student``) writes ``build/student/``. The test
suite does not execute the student build separately: :func:`rehearse` replays each exercise, as
the student build has it, at the end of the one run of the lesson (see ``course.runner``).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "stub_source",
    "student_notebook",
    "build",
    "exercises",
    "bound_names",
    "rehearse",
    "REHEARSAL_MARK",
    "STUB_HEADER",
    "ANSWERS_NOTE",
    "STUDENT_NOTE",
    "HIDDEN_NOTE",
]

STUB_HEADER = "# Your answer: replace each ... (the check below reports NOT ATTEMPTED until you do)."
# The sentence every lesson's Exercises section starts with, and what the student build says instead.
ANSWERS_NOTE = "The answer cells hold worked answers: cover them, write your own, run the check."
STUDENT_NOTE = "Write your answer in each answer cell, replacing every `...`, then run the check below it."
# What a lesson whose worked answers are out of sight (in tpututor.exercises) says instead of ANSWERS_NOTE.
HIDDEN_NOTE = (
    "Each answer cell holds a stub: replace its `...` with your answer, then run the check below "
    "it. Stuck? The stub's first line names `check.hint` (a hint, and another each time you call "
    "it) and `check.solution` (a worked answer)."
)


def stub_source(source: str, exercise_id: str | None = None) -> str:
    """A solution cell's code with every answer replaced by ``...``; with ``exercise_id``, the header
    also says how to ask for a hint and for the worked answer (``check.hint``, ``check.solution``)."""
    tree = ast.parse(source)
    lines = [
        STUB_HEADER
        if exercise_id is None
        else f"# Your answer: replace each ... below. Stuck? check.hint({exercise_id!r}) (again for more), "
        f"check.solution({exercise_id!r})."
    ]
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = " = ".join(ast.unparse(t) for t in node.targets)
            lines.append(f"{targets} = ...")
        elif isinstance(node, ast.AnnAssign):
            lines.append(f"{ast.unparse(node.target)}: {ast.unparse(node.annotation)} = ...")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stub = copy.copy(node)
            doc = ast.get_docstring(node)
            stub.body = ([ast.Expr(ast.Constant(doc))] if doc else []) + [ast.Expr(ast.Constant(...))]
            lines.append(ast.unparse(stub) + "  # your code here")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            lines.append(ast.unparse(node))
        # anything else (prints, loops) is part of the worked answer: dropped
    return "\n".join(lines)


def bound_names(source: str) -> list[str]:
    """The names a cell binds at its top level (assignments, defs, classes, loop targets)."""
    names: list[str] = []

    def targets(node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                targets(elt)
        elif isinstance(node, ast.Starred):
            targets(node.value)

    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                targets(t)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For, ast.AsyncFor)):
            targets(node.target)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars)
    return list(dict.fromkeys(names))


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def exercises(nb) -> list[tuple[Any, Any]]:
    """(solution cell, its check cell) for every exercise: a cell tagged ``solution`` and the code cell after it."""
    code = [c for c in nb.cells if c.cell_type == "code"]
    return [(c, code[i + 1]) for i, c in enumerate(code[:-1]) if "solution" in _tags(c)]


REHEARSAL_MARK = "tpututor-rehearsal: "


def rehearse(shell, pairs_json: str) -> list[dict]:
    """Replay each exercise as the student build has it, in the kernel the lesson ran in.

    For each (solution, check) pair: forget the names the worked answer bound, run its stub,
    run the check, and record the check's verdicts and any error; then the same for each answer
    known to be wrong (``pair["wrong"]``, from ``tpututor.exercises``). Strict checks are off, output
    is swallowed; one line ``tpututor-rehearsal: [...]`` (JSON) is printed for the test suite.
    """
    from tpututor import check

    def run(answer: str, check_source: str, forget: str) -> dict:
        for name in bound_names(forget):
            shell.user_ns.pop(name, None)
        before, error = len(check.RESULTS), None
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            for source in (answer, check_source):
                try:
                    exec(compile(shell.transform_cell(source), "<rehearsal>", "exec"), shell.user_ns)
                except Exception as exc:  # the student build would stop here: that is the finding
                    error = f"{type(exc).__name__}: {exc}"
                    break
        return {"statuses": [r.status for r in check.RESULTS[before:]], "error": error}

    verdicts = []
    strict = os.environ.pop(check.STRICT_ENV, None)
    try:
        for pair in json.loads(pairs_json):
            verdict = {
                "check": pair["check"].strip().splitlines()[-1][:120],
                **run(stub_source(pair["solution"]), pair["check"], pair["solution"]),
            }
            verdict["wrong"] = [
                {"why": w["why"], **run(w["code"], pair["check"], pair["solution"] + "\n" + w["code"])}
                for w in pair.get("wrong", [])
            ]
            verdicts.append(verdict)
    finally:
        if strict is not None:
            os.environ[check.STRICT_ENV] = strict
    print(REHEARSAL_MARK + json.dumps(verdicts))
    return verdicts


def student_notebook(nb):
    """A copy of a notebook (nbformat node) with its solution cells stubbed and outputs cleared."""
    out = copy.deepcopy(nb)
    for cell in out.cells:
        if cell.cell_type == "markdown":
            cell.source = cell.source.replace(ANSWERS_NOTE, STUDENT_NOTE)
            continue
        if cell.cell_type != "code":
            continue
        cell.outputs, cell.execution_count = [], None
        tags = cell.metadata.get("tags", [])
        if "solution" in tags:
            if not cell.source.lstrip().startswith("# Your answer"):  # a stub already: the answers are hidden
                cell.source = stub_source(cell.source)
            cell.metadata["tags"] = [t for t in tags if t != "solution"] + ["exercise"]
    out.metadata["tpututor"] = {"build": "student"}
    return out


def build(notebooks: str | Path | None = None, out: str | Path = "build/student") -> list[Path]:
    """Write the student version of every lesson to ``out``; returns the files written."""
    import nbformat

    from .runner import discover

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in discover(notebooks):
        nb = nbformat.read(path, as_version=4)
        if not any("solution" in c.metadata.get("tags", []) for c in nb.cells):
            raise ValueError(f"{path.name} has no cell tagged solution: every lesson needs exercises")
        target = out / path.name
        nbformat.write(student_notebook(nb), target)
        written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out = args[0] if args else "build/student"
    for path in build(out=out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
