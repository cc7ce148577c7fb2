"""The student build: every lesson with its worked answers replaced by stubs.

Each cell tagged ``solution`` is rewritten statement by statement:
``answer = <expression>`` becomes ``answer = ...`` and a function keeps its
signature (and docstring) with ``...`` for a body, so it returns None. The
check cells report ``...`` and None as NOT ATTEMPTED, so a student notebook
runs top to bottom without an error before anything is filled in.

``make student`` (``python -m tpututor.student``) writes ``build/student/``.
"""

from __future__ import annotations

import ast
import copy
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["stub_source", "student_notebook", "build", "STUB_HEADER", "ANSWERS_NOTE", "STUDENT_NOTE"]

STUB_HEADER = "# Your answer: replace each ... (the check below reports NOT ATTEMPTED until you do)."
# The sentence every lesson's Exercises section starts with, and what the student build says instead.
ANSWERS_NOTE = "The answer cells hold worked answers: cover them, write your own, run the check."
STUDENT_NOTE = "Write your answer in each answer cell, replacing every `...`, then run the check below it."


def stub_source(source: str) -> str:
    """A solution cell's code with every answer replaced by ``...``."""
    tree = ast.parse(source)
    lines = [STUB_HEADER]
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
            cell.source = stub_source(cell.source)
            cell.metadata["tags"] = [t for t in tags if t != "solution"] + ["exercise"]
    out.metadata["tpututor"] = {"build": "student"}
    return out


def build(notebooks: str | Path | None = None, out: str | Path = "build/student") -> list[Path]:
    """Write the student version of every lesson to ``out``; returns the files written."""
    import nbformat

    from .runner import NOTEBOOKS, discover

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in discover(notebooks or NOTEBOOKS):
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
