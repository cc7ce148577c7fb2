"""Execute lessons headless with papermill, render them to HTML, summarise the run.

Used by ``make run`` (``python -m tpututor run``) and by the test suite, so a
lesson runs the same way in both. Lessons are discovered, never listed by
hand: every ``notebooks/NN_*.ipynb``.
"""

from __future__ import annotations

import contextlib
import os
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

from .check import STRICT_ENV
from .config import ENV_VAR, profile as resolve_profile

__all__ = ["discover", "execute", "run_all", "write_timings", "format_table", "LessonResult", "NOTEBOOKS"]

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
CELL_TIMEOUT = {"ci": 300, "full": 1800}


def discover(directory: str | os.PathLike = NOTEBOOKS) -> list[Path]:
    """Every lesson notebook (``NN_topic.ipynb``) in teaching order."""
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"no notebooks folder at {directory}")
    return sorted(p for p in directory.glob("[0-9][0-9]*_*.ipynb") if p.is_file())


@dataclass
class LessonResult:
    lesson: str
    status: str  # "ok" | "failed"
    seconds: float
    device: str
    output: Path | None = None
    html: Path | None = None
    error: str | None = None


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


def execute(
    notebook: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    profile: str = "ci",
    html: bool = False,
    device: str = "",
    kernel: str = "python3",
    cell_timeout: int | None = None,
) -> LessonResult:
    """Run one notebook top to bottom with papermill; never raises for a failing lesson.

    The kernel sees ``TPUTUTOR_PROFILE=profile`` and strict exercise checks.
    The executed notebook is written to ``out_dir`` even when a cell fails,
    with the error in place, so the failure can be read.
    """
    import papermill

    notebook = Path(notebook)
    profile = resolve_profile(profile)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    output = out_dir / notebook.name
    start = time.perf_counter()
    status, error = "ok", None
    with _env(**{ENV_VAR: profile, STRICT_ENV: "1"}):
        try:
            papermill.execute_notebook(
                str(notebook), str(output), kernel_name=kernel, cwd=str(notebook.parent),
                progress_bar=False, log_output=False,
                execution_timeout=cell_timeout or CELL_TIMEOUT[profile],
            )
        except Exception as exc:  # a failing lesson is a result, not a crash of the runner
            status, error = "failed", _error_summary(exc)
    seconds = time.perf_counter() - start
    page = None
    if html and output.exists():
        page = render_html(output)
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
            lines.append(f"{r.lesson}: {r.error}")
    return "\n".join(lines)


def run_all(
    notebooks: Sequence[str | os.PathLike] | None = None,
    out_dir: str | os.PathLike = "build",
    *,
    profile: str | None = None,
    html: bool = True,
) -> list[LessonResult]:
    """Execute lessons one after another and print a line as each finishes."""
    from .runtime import detect

    chosen = resolve_profile(profile)
    paths = [Path(p) for p in notebooks] if notebooks else discover()
    device = detect().summary()
    print(f"tpututor: running {len(paths)} lesson(s), profile {chosen}, on {device}", flush=True)
    results = []
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no notebook at {path}")
        r = execute(path, out_dir, profile=chosen, html=html, device=device)
        print(f"  {r.lesson}: {r.status} in {r.seconds:.1f} s", flush=True)
        results.append(r)
    write_timings(results, Path(out_dir) / "timings.json", chosen, device)
    return results


def write_timings(results: Sequence[LessonResult], path: Path, profile: str, device: str) -> None:
    """Record a run (profile, machine, date, seconds per lesson) for the instructor guide."""
    import datetime
    import json
    import platform

    doc = {"profile": profile, "machine": device, "date": datetime.date.today().isoformat(),
           "python": platform.python_version(),
           "lessons": {r.lesson: {"status": r.status, "seconds": r.seconds} for r in results}}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2) + "\n")
