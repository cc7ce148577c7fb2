"""Execute lessons headless with papermill, render them to HTML, summarise the run.

Used by ``make run`` (``python -m tpututor_course run``) and by the test suite, so a lesson runs the
same way in both. The lessons are those of the clone (:mod:`tpututor_course.catalog`), or the
notebooks named. A lesson whose front matter ``imports`` a framework that is missing or broken
here is *skipped* with the reason (``make colab`` relies on this), never half-run.

With ``rehearse=True`` (the test suite) the run ends with one more cell, added to the executed
copy only: it replays every exercise as the student build has it (the worked answer replaced by
its stub, the names it bound removed) and records each check's verdict, so one execution shows
both that the worked answers pass and that the student version says NOT ATTEMPTED.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import traceback
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpututor.check import STRICT_ENV
from tpututor.config import ENV_VAR
from tpututor.config import profile as resolve_profile

from . import catalog

__all__ = [
    "discover",
    "execute",
    "with_answers",
    "run_all",
    "write_timings",
    "format_table",
    "LessonResult",
    "REHEARSAL_TAG",
    "missing_imports",
]

CELL_TIMEOUT = {"ci": 300, "full": 1800}
REHEARSAL_TAG = "tpututor-rehearsal"


def discover(directory: str | os.PathLike | None = None) -> list[Path]:
    """Every lesson notebook (``NN_topic.ipynb``) in teaching order."""
    return [lesson.notebook for lesson in catalog.lessons(directory)]


@dataclass
class LessonResult:
    lesson: str
    status: str  # "ok" | "failed" | "skipped"
    seconds: float
    device: str
    output: Path | None = None
    html: Path | None = None
    error: str | None = None  # why it failed, or why it was skipped


@contextlib.contextmanager
def _env(**values: str) -> Iterator[None]:
    """Set environment variables for the kernels started inside the block."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _error_summary(exc: BaseException) -> str:
    # papermill's PapermillExecutionError carries the failing cell's exception.
    ename, evalue = getattr(exc, "ename", None), getattr(exc, "evalue", None)
    if ename:
        return f"{ename}: {evalue}"
    last = traceback.format_exception_only(type(exc), exc)[-1].strip()
    return last[:500]


def missing_imports(notebook: Path) -> list[str]:
    """What the lesson's front matter ``imports`` that cannot be used here, each with the reason."""
    from tpututor import frameworks

    md = notebook.with_suffix(".md")
    if not md.exists():
        return []
    out = []
    for name in catalog.read(md).imports:
        status = frameworks.status(name)
        if not status.usable:
            out.append(f"{name} ({status.error})")
    return out


def with_answers(nb, lesson: str):
    """``nb`` (changed in place, and returned) with the worked answers of ``tpututor.exercises`` in its
    answer cells, where the lesson keeps them there (a lesson that still shows them is left as it is)."""
    from tpututor import exercises as store

    from .student import exercises

    known = store.for_lesson(lesson)
    for solution, check_cell in exercises(nb):
        entry = known.get(store.id_in(check_cell.source) or "")
        if entry is not None:
            solution.source = entry.solution
    return nb


def _prepared(notebook: Path, folder: Path, rehearse: bool) -> Path:
    """A copy of ``notebook`` with the worked answers kept in ``tpututor.exercises`` put into its answer
    cells (the notebook a learner opens holds stubs), and with ``rehearse`` the rehearsal cell appended:
    every check run again against its stub and against each answer known to be wrong."""
    import nbformat

    from tpututor import exercises as store

    from .student import exercises

    nb = with_answers(nbformat.read(notebook, as_version=4), notebook.stem)
    known = store.for_lesson(notebook.stem)
    pairs = []
    for solution, check_cell in exercises(nb):
        entry = known.get(store.id_in(check_cell.source) or "")
        pairs.append(
            {
                "solution": solution.source,
                "check": check_cell.source,
                "wrong": [{"why": w.why, "code": w.code} for w in (entry.wrong if entry else ())],
            }
        )
    if rehearse:
        # The kernel runs in the output folder; the tooling is importable from the clone it lives in.
        source = (
            f"import sys\nsys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
            "from tpututor_course import student as _student\n"
            f"_student.rehearse(get_ipython(), {json.dumps(pairs)!r})"
        )
        nb.cells.append(nbformat.v4.new_code_cell(source, metadata={"tags": [REHEARSAL_TAG]}))
    path = folder / notebook.name
    nbformat.write(nb, path)
    return path


def execute(
    notebook: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    profile: str = "ci",
    html: bool = False,
    device: str = "",
    kernel: str = "python3",
    cell_timeout: int | None = None,
    rehearse: bool = False,
) -> LessonResult:
    """Run one notebook top to bottom with papermill; never raises for a failing lesson.

    The kernel sees ``TPUTUTOR_PROFILE=profile`` and strict exercise checks. The executed
    notebook is written to ``out_dir`` even when a cell fails, with the error in place.
    """
    import tempfile

    import papermill

    notebook = Path(notebook)
    profile = resolve_profile(profile)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / notebook.name
    missing = missing_imports(notebook)
    if missing:
        return LessonResult(notebook.stem, "skipped", 0.0, device, None, None, f"needs {', '.join(missing)}")
    start = time.perf_counter()
    status, error = "ok", None
    with tempfile.TemporaryDirectory() as tmp, _env(**{ENV_VAR: profile, STRICT_ENV: "1"}):
        source = _prepared(notebook, Path(tmp), rehearse)
        try:
            papermill.execute_notebook(
                str(source),
                str(output),
                kernel_name=kernel,
                cwd=str(notebook.parent),
                progress_bar=False,
                log_output=False,
                execution_timeout=cell_timeout or CELL_TIMEOUT[profile],
            )
        except Exception as exc:  # a failing lesson is a result, not a crash of the runner
            status, error = "failed", _error_summary(exc)
    seconds = time.perf_counter() - start
    page = render_html(output) if html and output.exists() else None
    return LessonResult(notebook.stem, status, round(seconds, 1), device, output, page, error)


def render_html(notebook: Path) -> Path:
    """Write ``notebook`` as a standalone HTML page beside it."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter().from_notebook_node(nbformat.read(notebook, as_version=4))
    page = notebook.with_suffix(".html")
    page.write_text(body, encoding="utf-8")
    return page


def format_table(results: Sequence[LessonResult]) -> str:
    """A plain-text summary table: lesson, status, seconds, device."""
    rows = [("lesson", "status", "seconds", "device")]
    rows += [(r.lesson, r.status, f"{r.seconds:.1f}", r.device) for r in results]
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    for r in results:
        if r.error:
            lines.append(f"{r.lesson} {r.status}: {r.error}")
    return "\n".join(lines)


def run_all(
    notebooks: Sequence[str | os.PathLike] | None = None,
    out_dir: str | os.PathLike = "build",
    *,
    profile: str | None = None,
    html: bool = True,
    jobs: int = 1,
) -> list[LessonResult]:
    """Execute lessons, ``jobs`` at a time (each in its own worker process and kernel), and print a
    line as each finishes; the results come back in teaching order."""
    from concurrent.futures import as_completed

    from tpututor.runtime import detect

    if jobs < 1:
        raise ValueError(f"jobs={jobs}: run at least one lesson at a time (jobs >= 1)")
    chosen = resolve_profile(profile)
    paths = [Path(p) for p in notebooks] if notebooks else discover()
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no notebook at {path}")
    device = detect().summary()
    at_a_time = f", {jobs} at a time" if jobs > 1 and len(paths) > 1 else ""
    print(f"tpututor: running {len(paths)} lesson(s), profile {chosen}{at_a_time}, on {device}", flush=True)

    def report(r: LessonResult) -> None:
        print(
            f"  {r.lesson}: {r.status}" + (f" ({r.error})" if r.status == "skipped" else f" in {r.seconds:.1f} s"),
            flush=True,
        )

    by_path: dict[Path, LessonResult] = {}
    if jobs == 1 or len(paths) == 1:
        for path in paths:
            by_path[path] = execute(path, out_dir, profile=chosen, html=html, device=device)
            report(by_path[path])
    else:
        pool, futures = start(paths, out_dir, jobs, profile=chosen, html=html, device=device)
        with pool:
            running = {future: path for path, future in futures.items()}
            for done in as_completed(running):
                by_path[running[done]] = done.result()
                report(by_path[running[done]])
    results = [by_path[path] for path in paths]
    write_timings(results, Path(out_dir) / "timings.json", chosen, device)
    return results


def start(paths: Sequence[Path], out_dir: str | os.PathLike, jobs: int, *, profile: str = "ci", **options: Any):
    """Submit lessons to ``jobs`` worker processes (spawned: each starts clean), the longest first by
    :func:`recorded_seconds`, each running :func:`execute` with ``options``.

    Returns (the pool, {path: future of its LessonResult}); the caller shuts the pool down.
    """
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    pool = ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn"))
    longest_first = sorted(paths, key=lambda p: -recorded_seconds(Path(p).stem, profile))
    return pool, {Path(p): pool.submit(execute, p, out_dir, profile=profile, **options) for p in longest_first}


def recorded_seconds(stem: str, profile: str = "ci") -> float:
    """How long ``stem`` took in the instructor guide's last recorded run (``docs/timings.json``) in
    ``profile``; 60 when it has no record. Used to start the longest lessons first."""
    try:
        doc = json.loads((catalog.find_root() / "docs" / "timings.json").read_text())
    except (OSError, ValueError):
        doc = {}
    return float(doc.get(profile, {}).get("lessons", {}).get(stem, {}).get("seconds", 60.0))


def write_timings(results: Sequence[LessonResult], path: Path, profile: str, device: str) -> None:
    """Record a run (profile, machine, date, seconds per lesson) for the instructor guide and the site."""
    import datetime
    import platform

    doc = {
        "profile": profile,
        "machine": device,
        "date": datetime.date.today().isoformat(),
        "python": platform.python_version(),
        "lessons": {
            r.lesson: {"status": r.status, "seconds": r.seconds, **({"error": r.error} if r.error else {})}
            for r in results
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
