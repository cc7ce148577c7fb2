"""``python -m tpututor_course run``: execute lessons headless with papermill into a build folder::

    python -m tpututor_course run [--profile ci|full] [--out build] [--no-html] [--jobs N]
                                  [--allow-skip LESSONS] [NOTEBOOK ...]

``make run`` and ``make test`` use it. Exit status: 0 every lesson ran (or was skipped where
allowed), 1 a lesson failed or skipped unexpectedly, 2 bad usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .runner import format_table, run_all

PROG = "python -m tpututor_course run"


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description="Execute lessons headless with papermill into a build folder.")
    p.add_argument("notebooks", nargs="*", help="notebooks to run (default: every lesson)")
    p.add_argument(
        "--profile", choices=["full", "ci"], default=None, help="problem sizes (default: $TPUTUTOR_PROFILE, else full)"
    )
    p.add_argument("--out", default="build", help="folder for executed notebooks (default build)")
    p.add_argument("--no-html", dest="html", action="store_false", help="skip the HTML rendering")
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="lessons at a time, each in its own process (default 1; timings then include the others' load)",
    )
    p.add_argument(
        "--allow-skip",
        default=None,
        metavar="LESSONS",
        help="with it, a skipped lesson fails the run unless named here (comma-separated), e.g. "
        "05_tf_tpustrategy where a runtime has no TensorFlow by design",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        results = run_all(args.notebooks or None, args.out, profile=args.profile, html=args.html, jobs=args.jobs)
    except (FileNotFoundError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    print()
    print(format_table(results))
    print(f"\nexecuted notebooks{' and HTML' if args.html else ''} are in {args.out}/")
    if args.allow_skip is not None:
        allowed = {name.strip() for name in args.allow_skip.split(",") if name.strip()}
        unexpected = [r.lesson for r in results if r.status == "skipped" and r.lesson not in allowed]
        if unexpected:
            print(f"{PROG}: error: skipped, but expected to run here: {', '.join(unexpected)}", file=sys.stderr)
            return 1
    return 0 if all(r.status != "failed" for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
