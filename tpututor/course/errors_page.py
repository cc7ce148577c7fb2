"""``python -m tpututor.course errors_page``: write ``docs/errors.md``, the error atlas, from ``tpututor.errors``.

    python -m tpututor.course errors_page            # (re)write docs/errors.md in this clone
    python -m tpututor.course errors_page --check    # exit 1 if docs/errors.md is not what the entries give
    python -m tpututor.course errors_page --out FILE # write (or check) another file
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from ..errors import render_page
from . import catalog

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpututor.course errors_page", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is stale; write nothing")
    parser.add_argument("--out", type=Path, default=None, help="the page (default: docs/errors.md in this clone)")
    args = parser.parse_args(argv)
    target = args.out or catalog.find_root() / "docs" / "errors.md"
    page = render_page()
    if args.check:
        if not target.exists() or target.read_text() != page:
            print(f"{target} is stale: run python -m tpututor.course errors_page", file=sys.stderr)
            return 1
        print(f"{target} is up to date")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page)
    print(f"wrote {target} ({page.count('<a id=')} entries)")
    return 0
