"""``python -m tpututor_course errors_page``: write the error atlas pages from ``tpututor.errors``:
``docs/errors.md`` and, in Korean, ``docs/errors.ko.md``.

    python -m tpututor_course errors_page            # (re)write docs/errors.md and docs/errors.ko.md
    python -m tpututor_course errors_page --check    # exit 1 if a page is not what the entries give
    python -m tpututor_course errors_page --lang ko  # only one language's page
    python -m tpututor_course errors_page --out FILE # write (or check) another file (English unless --lang)
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from tpututor.errors import LANGS, render_page

from . import catalog

__all__ = ["main", "page_path"]


def page_path(root: Path, lang: str) -> Path:
    """Where a clone keeps the atlas page in ``lang``: docs/errors.md, docs/errors.<lang>.md."""
    return root / "docs" / ("errors.md" if lang == "en" else f"errors.{lang}.md")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tpututor_course errors_page", description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is stale; write nothing")
    parser.add_argument("--lang", choices=LANGS, default=None, help="only this language's page (default: all)")
    parser.add_argument(
        "--out", type=Path, default=None, help="the page (default: docs/errors.md, docs/errors.<lang>.md in this clone)"
    )
    args = parser.parse_args(argv)
    if args.out:
        targets = {args.lang or "en": args.out}
    else:
        root = catalog.find_root()
        targets = {lang: page_path(root, lang) for lang in ([args.lang] if args.lang else LANGS)}
    stale = 0
    for lang, target in targets.items():
        page = render_page(lang)
        if args.check:
            if not target.exists() or target.read_text(encoding="utf-8") != page:
                print(f"{target} is stale: run python -m tpututor_course errors_page", file=sys.stderr)
                stale += 1
            else:
                print(f"{target} is up to date")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")
        print(f"wrote {target} ({page.count('<a id=')} entries)")
    return 1 if stale else 0
