"""``python -m tpututor_course COMMAND``: the course tools, run from a clone (see ``tpututor_course``)."""

from __future__ import annotations

import sys

COMMANDS = (
    "run",
    "stamp",
    "student",
    "workshop",
    "reference",
    "release",
    "errors_page",
    "device",
    "site",
    "translate",
    "pins",
)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in COMMANDS:
        print(f"usage: python -m tpututor_course {{{','.join(COMMANDS)}}} [ARGS]", file=sys.stderr)
        return 2
    import importlib

    try:
        return importlib.import_module(f"tpututor_course.{args[0]}").main(args[1:])
    except FileNotFoundError as exc:
        print(f"python -m tpututor_course {args[0]}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
