"""``make release``: tag ``v<version>`` once everything that names the release agrees.

The setup cell of every lesson installs ``tpututor @ git+https://github.com/<repository>@v<version>``,
the badges point at ``<repository>/<branch>``, and ``pyproject.toml`` and ``tpututor.__version__``
carry the version. A release is tagged only when all of them, the README's lesson table and
``tpututor/data/lessons.json`` agree and the working tree is clean; otherwise each disagreement
is printed with its fix and nothing is tagged. ``--check`` only checks.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tpututor import __version__

from . import catalog, stamp

__all__ = ["problems", "main"]


def problems(root: Path | None = None) -> list[str]:
    """Everything that would make a release inconsistent, each with its fix (empty: ready)."""
    root = root or catalog.find_root()
    s = stamp.settings(root / "pyproject.toml")
    found = catalog.lessons(root / "notebooks")
    everyone = catalog.by_topic(found)
    out = []
    if s.version != __version__:
        out.append(
            f"pyproject.toml says version {s.version} but tpututor.__version__ is {__version__}: make them equal"
        )
    for lesson in found:
        text = lesson.path.read_text()
        if stamp.stamp_text(text, lesson, everyone, s) != text:
            out.append(
                f"{lesson.path.name}: its heading, badges, card or setup cell are not stamped for "
                f"{s.repository}@{s.tag}: run make badges"
            )
        elif s.requirement not in text:
            out.append(f"{lesson.path.name}: its setup cell does not install {s.requirement}: run make badges")
    if stamp.lesson_table(found, s) not in (root / "README.md").read_text():
        out.append("README.md: the lesson table is out of date: run make badges")
    data = root / "tpututor" / "data" / "lessons.json"
    if not data.exists() or data.read_text() != stamp.lessons_json(found):
        out.append("tpututor/data/lessons.json is out of date: run make badges")
    return out


def _git(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = catalog.find_root()
    found = problems(root)
    tag = stamp.settings(root / "pyproject.toml").tag
    if "--check" not in args:
        if _git(root, "status", "--porcelain").stdout.strip():
            found.append("the working tree has uncommitted changes: commit them first")
        if _git(root, "rev-parse", "-q", "--verify", f"refs/tags/{tag}").returncode == 0:
            found.append(f"tag {tag} exists already: bump the version in pyproject.toml and tpututor/__init__.py")
    for problem in found:
        print(f"release: {problem}", file=sys.stderr)
    if found:
        print(f"release: {tag} not tagged", file=sys.stderr)
        return 1
    if "--check" in args:
        print(f"release: ready to tag {tag}")
        return 0
    done = _git(root, "tag", "-a", tag, "-m", f"tpututor {tag}")
    if done.returncode != 0:
        print(f"release: git tag failed: {done.stderr.strip()}", file=sys.stderr)
        return 1
    print(f"release: tagged {tag}; push it with: git push origin {tag}")
    return 0
