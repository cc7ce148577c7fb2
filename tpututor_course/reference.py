"""Stable outputs: the cells whose output must not change by accident, and the check that it did not.

A code cell tagged ``nbval-check-output`` has a stable output (an exercise verdict, a detection
line on fake machines). ``tests/reference/NN_topic.ipynb`` keeps those outputs from a ``ci`` run;
:func:`differences` compares them with a notebook that was *already executed* (the test suite's
one run of each lesson), so no lesson runs twice. Text is compared (stdout, ``text/plain``,
``text/markdown``, errors); stderr (progress bars, warnings), images and HTML are not.

``python -m tpututor_course reference [EXECUTED_FOLDER]`` rewrites the references, from the
executed notebooks in the folder given (e.g. ``build/test-run``) or from a fresh ``ci`` run.
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import catalog

__all__ = ["STABLE_TAG", "reference_dir", "stable_cells", "reference_from", "differences", "write", "main"]

STABLE_TAG = "nbval-check-output"
_TEXT_MIME = ("text/plain", "text/markdown")


def _tags(cell) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def reference_dir(root: Path | None = None) -> Path:
    return (root or catalog.find_root()) / "tests" / "reference"


def stable_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code" and STABLE_TAG in _tags(c)]


def reference_from(executed):
    """A copy of an executed notebook keeping only the stable cells' outputs."""
    import nbformat

    nb = nbformat.from_dict(executed)
    nb.metadata.pop("papermill", None)
    nb.cells = [c for c in nb.cells if "tpututor-rehearsal" not in _tags(c)]
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code" and STABLE_TAG not in _tags(cell):
            cell.outputs = []
            cell.execution_count = None
    return nb


def _text(outputs) -> str:
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            if out.get("name") != "stderr":  # progress bars, warnings and timings go to stderr
                parts.append(out.get("text", ""))
        elif out.get("output_type") in ("execute_result", "display_data"):
            parts += [str(out.get("data", {}).get(m, "")) for m in _TEXT_MIME if m in out.get("data", {})]
        elif out.get("output_type") == "error":
            parts.append(f"{out.get('ename')}: {out.get('evalue')}")
    return "".join(parts).rstrip()


def differences(reference, executed) -> list[str]:
    """What differs between the stable outputs of a reference and an executed notebook (empty: none)."""
    ref, got = stable_cells(reference), stable_cells(executed)
    if [c.source for c in ref] != [c.source for c in got]:
        return ["the stable cells' sources differ: the reference is older than the lesson (make reference)"]
    out = []
    for i, (r, g) in enumerate(zip(ref, got)):
        want, have = _text(r.outputs), _text(g.outputs)
        if want != have:
            first = r.source.strip().splitlines()[0][:60]
            out.append(f"stable cell {i + 1} ({first}...): expected {want[-300:]!r}, got {have[-300:]!r}")
    return out


def write(executed_dir: Path, root: Path | None = None) -> list[Path]:
    """Write the references of the lessons with stable cells executed in a folder (the others are left
    as they are, so one lesson's reference can be refreshed from a run of that lesson alone)."""
    import nbformat

    target = reference_dir(root)
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for lesson in catalog.lessons(None if root is None else root / "notebooks"):
        executed = Path(executed_dir) / lesson.notebook.name
        if not stable_cells(nbformat.read(lesson.notebook, as_version=4)) or not executed.exists():
            continue
        nbformat.write(reference_from(nbformat.read(executed, as_version=4)), target / executed.name)
        written.append(target / executed.name)
    if not written:
        raise FileNotFoundError(f"no executed lesson with stable cells in {executed_dir}")
    return written


def main(argv: Sequence[str] | None = None) -> int:
    from .runner import discover, execute

    args = list(sys.argv[1:] if argv is None else argv)
    if args:
        folder = Path(args[0])
        for path in write(folder):
            print(f"wrote {path}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        failed = [r for r in (execute(p, tmp, profile="ci") for p in discover()) if r.status != "ok"]
        for r in failed:
            print(f"{r.lesson}: {r.status}, references not written: {r.error}", file=sys.stderr)
        if failed:
            return 1
        for path in write(Path(tmp)):
            print(f"wrote {path}")
    return 0
