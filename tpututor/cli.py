"""``python -m tpututor``: doctor, chips and run.

    python -m tpututor doctor [--json] [--no-probe]
    python -m tpututor chips [--json]
    python -m tpututor run [--profile ci|full] [--out build] [--no-html] [NOTEBOOK ...]

Exit status: 0 success, 1 a lesson failed, 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Sequence

from . import __version__


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tpututor", description="Helpers for the tpututor course.")
    p.add_argument("--version", action="version", version=f"tpututor {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    d = sub.add_parser("doctor", help="what this runtime is and what each framework sees")
    d.add_argument("--json", action="store_true", help="print a JSON document instead of text")
    d.add_argument("--no-probe", dest="probe", action="store_false",
                   help="skip asking each framework for its devices (fast; devices are null)")
    d.add_argument("--timeout", type=float, default=120.0, metavar="S",
                   help="seconds each framework probe may take (default 120)")

    c = sub.add_parser("chips", help="the chip table (TPUs and GPUs) with sources")
    c.add_argument("--json", action="store_true", help="print JSON rows instead of a table")

    r = sub.add_parser("run", help="execute lessons headless with papermill into a build folder")
    r.add_argument("notebooks", nargs="*", help="notebooks to run (default: every lesson)")
    r.add_argument("--profile", choices=["full", "ci"], default=None,
                   help="problem sizes (default: $TPUTUTOR_PROFILE, else full)")
    r.add_argument("--out", default="build", help="folder for executed notebooks (default build)")
    r.add_argument("--no-html", dest="html", action="store_false", help="skip the HTML rendering")
    return p


def _doctor(args: argparse.Namespace) -> int:
    from .doctor import format_report, report

    doc = report(probe=args.probe, timeout=args.timeout)
    print(json.dumps(doc, indent=2, sort_keys=False) if args.json else format_report(doc))
    return 0


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _chips(args: argparse.Namespace) -> int:
    from .hardware import chips

    rows = chips()
    if args.json:
        print(json.dumps([asdict(c) for c in rows], indent=2))
        return 0
    print(f"{'chip':<10} {'bf16 TFLOP/s':>12} {'HBM GiB':>7} {'HBM GB/s':>9} {'ICI/NVLink GB/s':>15}  source")
    for c in rows:
        print(f"{c.name:<10} {_num(c.bf16_tflops):>12} {_num(c.hbm_gib):>7} {_num(c.hbm_gbps):>9} "
              f"{_num(c.interconnect_gbps):>15}  {c.source} ({c.source_date})")
    return 0


def _run(args: argparse.Namespace) -> int:
    from .runner import format_table, run_all

    try:
        results = run_all(args.notebooks or None, args.out, profile=args.profile, html=args.html)
    except (FileNotFoundError, ValueError) as exc:
        print(f"python -m tpututor run: error: {exc}", file=sys.stderr)
        return 2
    print()
    print(format_table(results))
    print(f"\nexecuted notebooks{' and HTML' if args.html else ''} are in {args.out}/")
    return 0 if all(r.status == "ok" for r in results) else 1


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_usage(sys.stderr)
        print("python -m tpututor: error: choose a command: doctor, chips or run", file=sys.stderr)
        return 2
    return {"doctor": _doctor, "chips": _chips, "run": _run}[args.command](args)
