"""The instructor guide, ``docs/workshop.md``, generated from the lessons and measured run times.

``make workshop`` runs every lesson in the ``ci`` and the ``full`` profile on this
machine (``python -m tpututor run``, which writes ``timings.json``), keeps both
records in ``docs/timings.json``, and writes the guide: agendas for a half day, a
full day and the whole course, per lesson its objectives, prerequisites, the runtime it wants, the
measured execution times and a reading time, and the common failures with
their fixes (from the doctor's warnings on faked machines and the pre-flight).

``python -m tpututor.course workshop [CI_TIMINGS FULL_TIMINGS]``; with no arguments it
regenerates the guide from ``docs/timings.json``. Lessons are read through
:mod:`tpututor.course.catalog`, from their front matter.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Sequence

from . import catalog
from .catalog import Lesson

__all__ = ["guide", "main"]


def _fmt_s(seconds: float | None) -> str:
    return "–" if seconds is None else (f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min")


def _clock(t: int) -> str:
    return f"{t // 60:02d}:{t % 60:02d}"


def _agenda(lessons: Sequence[Lesson], title: str, days: int, hours: float, start_h: int = 9) -> list[str]:
    """A schedule over ``days`` days of ``hours`` hours from ``start_h``: each lesson's reading time plus
    10 minutes of slack, a 15-minute break before 100 minutes pass without one, lunch (60 min) once a
    full day passes 12:30. A lesson that does not fit the day moves to the next; lessons that fit no
    day are listed as left out."""
    lines = [f"### {title}", ""]
    queue = list(lessons)
    full_day = hours >= 6
    for day in range(1, days + 1):
        if days > 1:
            lines += [f"**Day {day}**", ""]
        lines += ["| time | what |", "|---|---|"]
        t, end, since_break, lunch = start_h * 60, start_h * 60 + int(hours * 60), 0, not full_day
        while queue:
            length = queue[0].minutes + 10
            if not lunch and t >= 11 * 60 + 30 and t + length > 12 * 60 + 45:  # it would run into lunchtime
                lines.append(f"| {_clock(t)} | lunch (60 min) |")
                t, since_break, lunch = t + 60, 0, True
            pause = 15 if since_break and since_break + length > 100 else 0
            if t + pause + length > end - 15:
                break
            if pause:
                lines.append(f"| {_clock(t)} | break (15 min) |")
                t, since_break = t + pause, 0
            lesson = queue.pop(0)
            lines.append(f"| {_clock(t)} | {lesson.heading} ({length} min) |")
            t, since_break = t + length, since_break + length
        lines += [f"| {_clock(t)} | wrap-up: `check.report()`, questions |", ""]
    if queue:
        lines += ["Left for another day: " + ", ".join(lesson.heading for lesson in queue) + ".", ""]
    return lines


def _failures() -> list[str]:
    """Common failures and their fixes: the doctor's warnings on faked machines, then setup and pre-flight."""
    from ..doctor import warnings_for
    from ..runtime import detect
    from . import fakes

    # (situation, fake machine, what the frameworks said when probed)
    cases = [(m.description, m, None) for m in fakes.MACHINES.values()] + [
        ("a Cloud TPU VM where JAX starts on the CPU", fakes.MACHINES["tpu-vm-v6e-8"],
         {"jax": {"platform": "cpu", "devices": ["cpu:0"]}}),
        ("torch_xla beside a torch it was not built for",
         fakes.Machine("mismatch", packages={"torch": "2.13.0", "torch-xla": "2.9.0"}), None),
        ("a TPU type in the environment but no chip visible",
         fakes.Machine("env only", env={"TPU_ACCELERATOR_TYPE": "v5litepod-8"}), None),
    ]
    rows = ["| situation | what the doctor or the setup cell says | fix |", "|---|---|---|"]
    seen = set()
    with tempfile.TemporaryDirectory() as tmp:
        for i, (situation, machine, probes) in enumerate(cases):
            for warning in warnings_for(detect(fakes.make_host(Path(tmp) / str(i), machine)), probes):
                if warning in seen:
                    continue
                seen.add(warning)
                head, _, fix = warning.rpartition(": ") if ": pip" in warning else (warning, "", "")
                rows.append(f"| {situation} | {head or warning} | {fix or '(the message says what to do)'} |")
    rows += [
        "| a Colab or Kaggle runtime without internet access to GitHub | `%pip install` of tpututor fails | "
        "upload a wheel of tpututor, or clone the repository into the runtime first |",
        "| Colab's TPU runtime is not available (quota) | the setup line says CPU only | "
        "run on the CPU runtime (every lesson works), or use Kaggle's TPU v5e-8 |",
        "| a lesson needs a framework the runtime lacks (TensorFlow on Colab TPU) | the section prints "
        "\"not installed here: skipped\" | nothing to do for the workshop; install it to follow that section |",
        "| the pre-flight says NOT READY | a FAIL line names the check | each FAIL line has its fix under it "
        "(`python -m tpututor doctor --preflight`) |",
    ]
    return rows


def guide(lessons: Sequence[Lesson], timings: dict) -> str:
    """The whole instructor guide as Markdown."""
    ci, full = timings.get("ci", {}), timings.get("full", {})
    out = [
        "# Instructor guide",
        "",
        "Generated by `make workshop` from the lessons and from real runs of every lesson on one machine;",
        "edit the lessons, not this file.",
        "",
        f"Execution times were measured with `make run` on: {ci.get('machine', '?')} "
        f"(Python {ci.get('python', '?')}, {ci.get('date', '?')}), in the `ci` profile (small sizes, what CI runs) "
        "and the `full` profile (the sizes the lessons were written for). They are the time to execute a lesson "
        "top to bottom, not the time to teach it: that is the reading time.",
        "",
        "## Before the day",
        "",
        "- Every learner (or the room's shared runtime) runs `python -m tpututor doctor --preflight`; each FAIL",
        "  line says how to fix it. On Colab the first cell of every lesson does the set-up.",
        "- `make student` writes `build/student/`: the lessons with the worked answers replaced by `...`. Hand",
        "  those out; keep the originals as the answer key. An unanswered exercise reports NOT ATTEMPTED.",
        "- At the end of a lesson, `check.report()` prints each learner's passed, failed and not-attempted",
        "  exercises per lesson.",
        "",
        "## Agendas",
        "",
    ]
    out += _agenda(lessons, "Half day (3.5 hours): the first lessons", 1, 3.5)
    out += _agenda(lessons, "Full day (8 hours with lunch)", 1, 8)
    days = next(d for d in range(1, 10) if not _agenda(lessons, "", d, 8)[-2].startswith("Left"))
    out += _agenda(lessons, f"The whole course ({days} days of 8 hours)", days, 8)
    out += ["## Lessons", "", "| lesson | runtime | reading time | runs in (ci) | runs in (full) |",
            "|---|---|---|---|---|"]
    for lesson in lessons:
        c = ci.get("lessons", {}).get(lesson.stem, {})
        f = full.get("lessons", {}).get(lesson.stem, {})
        out.append(f"| {lesson.heading} | {lesson.runtime} | {lesson.minutes} min | "
                   f"{_fmt_s(c.get('seconds'))} | {_fmt_s(f.get('seconds'))} |")
    out.append("")
    everyone = catalog.by_topic(list(lessons))
    for lesson in lessons:
        before = ", ".join(everyone[t].heading for t in lesson.prerequisites) or "none"
        out += [f"### {lesson.heading}", "", f"- **Runtime:** {lesson.runtime}. The lesson says: {lesson.note}.",
                f"- **Prerequisites:** {before}.",
                f"- **Reading and exercises:** about {lesson.minutes} minutes.", "- **Objectives:**"]
        out += [f"  - {goal}" for goal in lesson.objectives]
        out.append("")
    out += ["## Common failures and their fixes", ""] + _failures() + [""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = catalog.find_root()
    docs = root / "docs"
    record = docs / "timings.json"
    if args:
        if len(args) != 2:
            print("usage: python -m tpututor.course workshop [CI_TIMINGS FULL_TIMINGS]", file=sys.stderr)
            return 2
        timings = {}
        for path in args:
            run = json.loads(Path(path).read_text())
            if any(v["status"] != "ok" for v in run["lessons"].values()):
                print(f"{path}: a lesson failed or was skipped; the guide times every lesson", file=sys.stderr)
                return 1
            timings[run["profile"]] = run
        docs.mkdir(exist_ok=True)
        record.write_text(json.dumps(timings, indent=2) + "\n")
    elif record.exists():
        timings = json.loads(record.read_text())
    else:
        print(f"no {record}: run make workshop", file=sys.stderr)
        return 2
    (docs / "workshop.md").write_text(guide(catalog.lessons(root / "notebooks"), timings))
    print(f"wrote {docs / 'workshop.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
