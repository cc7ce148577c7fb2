"""The instructor guide, ``docs/workshop.md``, generated from the lessons and measured run times.

``make workshop`` runs every lesson in the ``ci`` and the ``full`` profile on this
machine (``python -m tpututor run``, which writes ``timings.json``), keeps both
records in ``docs/timings.json``, and writes the guide: agendas for a half and a
full day, per lesson its objectives, prerequisites, the runtime it wants, the
measured execution times and a reading time, and the common failures with
their fixes (from the doctor's warnings on faked machines and the pre-flight).

``python -m tpututor.workshop [CI_TIMINGS FULL_TIMINGS]``; with no arguments it
regenerates the guide from ``docs/timings.json``.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import launch

__all__ = ["Lesson", "read_lessons", "guide", "main"]

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@dataclass
class Lesson:
    stem: str
    title: str
    objectives: list[str]
    minutes: int | None
    needs: str
    runtime: str  # "CPU is enough" | "TPU better" | "TPU slice better" | "TPU slice needed"
    prerequisites: str


def _runtime(needs: str) -> str:
    text = needs.lower()
    if "slice is needed" in text:
        return "TPU slice needed"
    if "slice is better" in text:
        return "CPU is enough, TPU slice better"
    if "tpu is better" in text:
        return "CPU is enough, TPU better"
    return "CPU is enough"


def read_lessons(notebooks: Path = ROOT / "notebooks") -> list[Lesson]:
    """Title, objectives, time, needs and prerequisites of every lesson, read from its Markdown."""
    out = []
    for md in launch.lessons(notebooks):
        text = md.read_text()
        title, minutes, needs = launch.lesson_fields(text)
        needs_text = needs or "?"
        goals = re.search(r"\*\*You will learn to\*\*\n\n(.*?)\n\n", text, re.S)
        objectives = [" ".join(item.split()) for item in re.split(r"\n- ", "\n" + goals.group(1))[1:]] if goals else []
        prereq = re.search(r"(Lessons? [^.]*?) helps?\.", text)
        out.append(Lesson(md.stem, title, objectives, minutes, needs_text,
                          _runtime(needs_text), " ".join(prereq.group(1).split()) if prereq else "none"))
    return out


def _fmt_s(seconds: float | None) -> str:
    return "–" if seconds is None else (f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min")


def _agenda(lessons: Sequence[Lesson], start_h: int, budget_min: int, title: str) -> list[str]:
    """A schedule: each lesson's reading time plus 10 minutes of slack, a break every 90 minutes."""
    lines = [f"### {title}", "", "| time | what |", "|---|---|"]
    t, since_break = start_h * 60, 0
    for lesson in lessons:
        length = (lesson.minutes or 30) + 10
        if t - start_h * 60 + length > budget_min:
            break
        if since_break + length > 100:
            lines.append(f"| {t // 60:02d}:{t % 60:02d} | break (15 min) |")
            t, since_break = t + 15, 0
        lines.append(f"| {t // 60:02d}:{t % 60:02d} | {lesson.title} ({length} min) |")
        t, since_break = t + length, since_break + length
    lines.append(f"| {t // 60:02d}:{t % 60:02d} | wrap-up: `check.report()`, questions |")
    return lines


def _failures() -> list[str]:
    """Common failures and their fixes: the doctor's warnings on faked machines, then setup and pre-flight."""
    from . import fakes
    from .doctor import warnings_for
    from .runtime import detect

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
    out += _agenda(lessons, 9, 210, "Half day (3.5 hours)") + [""]
    out += _agenda(lessons, 9, 420, "Full day (7 hours)") + [""]
    out += ["## Lessons", "", "| lesson | runtime | reading time | runs in (ci) | runs in (full) |",
            "|---|---|---|---|---|"]
    for lesson in lessons:
        c = ci.get("lessons", {}).get(lesson.stem, {})
        f = full.get("lessons", {}).get(lesson.stem, {})
        out.append(f"| {lesson.title} | {lesson.runtime} | {lesson.minutes or '?'} min | "
                   f"{_fmt_s(c.get('seconds'))} | {_fmt_s(f.get('seconds'))} |")
    out.append("")
    for lesson in lessons:
        out += [f"### {lesson.title}", "", f"- **Runtime:** {lesson.runtime}. The lesson says: {lesson.needs}.",
                f"- **Prerequisites:** {lesson.prerequisites}.",
                f"- **Reading and exercises:** about {lesson.minutes or '?'} minutes.", "- **Objectives:**"]
        out += [f"  - {goal}" for goal in lesson.objectives]
        out.append("")
    out += ["## Common failures and their fixes", ""] + _failures() + [""]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    record = DOCS / "timings.json"
    if args:
        if len(args) != 2:
            print("usage: python -m tpututor.workshop [CI_TIMINGS FULL_TIMINGS]", file=sys.stderr)
            return 2
        timings = {}
        for path in args:
            run = json.loads(Path(path).read_text())
            if any(v["status"] != "ok" for v in run["lessons"].values()):
                print(f"{path}: a lesson failed; fix it before timing the workshop", file=sys.stderr)
                return 1
            timings[run["profile"]] = run
        DOCS.mkdir(exist_ok=True)
        record.write_text(json.dumps(timings, indent=2) + "\n")
    elif record.exists():
        timings = json.loads(record.read_text())
    else:
        print(f"no {record}: run make workshop", file=sys.stderr)
        return 2
    (DOCS / "workshop.md").write_text(guide(read_lessons(), timings))
    print(f"wrote {DOCS / 'workshop.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
