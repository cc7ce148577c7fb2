"""Translated editions of the lessons, kept in step with the English (``make translations``).

English stays the only source of code. Each lesson's translation is a gettext catalogue,
``i18n/<lang>/NN_topic.po``: one entry per markdown cell (the English text is the ``msgid``, the
translation the ``msgstr``) and one per translated front-matter field (``msgctxt`` ``front:title``,
``front:note``, ``front:objective N``). :func:`build` writes ``notebooks/<lang>/NN_topic.ipynb`` and
``.md`` from the English notebook: every code cell, its tags, metadata and id copied verbatim (but
for one call: the setup cell's ``launch.setup("NN_topic")`` names the language, so that the exercise
checks speak it, see :func:`localised_code`), every markdown cell replaced by its translation, the
badges rebuilt to open the translated notebook. What the checks print (titles, hints) is translated
in ``tpututor/exercises/<lang>/NN_topic.toml``, shipped with the package.

When an English cell changes, :func:`update` (``python -m tpututor_course translate update``) carries
the old translation over to the new text, marked *fuzzy*, with the old English kept as
``previous_msgid``; until a translator revises it, :func:`build` keeps the **English** text of that
cell, with a visible note that the translation is older than the original, rather than stale
translated text. A cell with no translation at all stays English too. A catalogue whose header has
``X-Tpututor-Status: translated`` promises that no cell is missing or stale (a test checks).

``i18n/<lang>/glossary.tsv`` fixes how terms are written: ``English<TAB>how the translation writes
it`` (the same word for terms that stay in English, such as TPU, XLA, ``jit``); a test checks that
every translated cell whose English uses a term writes it that way.
"""

from __future__ import annotations

import difflib
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import catalog, stamp

__all__ = [
    "LANGUAGES",
    "STALE_NOTE",
    "MISSING_NOTE",
    "Glossary",
    "catalogue_path",
    "cells_to_translate",
    "update",
    "localised_code",
    "render",
    "build",
    "lesson_table",
    "readme",
    "main",
]

LANGUAGES = ("ko",)
STALE_NOTE = {
    "ko": "> **번역이 원문보다 오래되었습니다.** 아래는 영어 원문입니다; 번역을 고치는 방법은 "
    "`docs/translating.md`에 있습니다."
}
MISSING_NOTE = {"ko": "> **아직 번역되지 않았습니다.** 아래는 영어 원문입니다."}
_TABLE = {"ko": ("| 레슨 | 열기 | 시간 | 필요한 것 |", "{minutes}분")}
_BADGE = re.compile(r"^\[!\[.*$", re.M)
_CODE_SPAN = re.compile(r"`[^`\n]+`")
_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_LINK_TEXT = re.compile(r"\[[^\]\n]*\]\([^)\s]*\)")


def _root(root: Path | None) -> Path:
    return root or catalog.find_root()


def catalogue_path(root: Path, lang: str, stem: str) -> Path:
    return root / "i18n" / lang / f"{stem}.po"


def _strip_badges(text: str) -> str:
    """A markdown cell without its badge lines (they are rebuilt per language), blank runs closed."""
    return re.sub(r"\n{3,}", "\n\n", _BADGE.sub("", text)).strip()


def cells_to_translate(notebook) -> list[tuple[int, str]]:
    """(cell index, English text to translate) for every markdown cell of a notebook."""
    return [(i, _strip_badges(c.source)) for i, c in enumerate(notebook.cells) if c.cell_type == "markdown"]


def _front_entries(lesson: catalog.Lesson) -> list[tuple[str, str]]:
    return [("front:title", lesson.title), ("front:note", lesson.note)] + [
        (f"front:objective {i + 1}", goal) for i, goal in enumerate(lesson.objectives)
    ]


def _load(path: Path):
    import polib

    if path.exists():
        return polib.pofile(str(path), wrapwidth=0)
    po = polib.POFile(wrapwidth=0)
    return po


def update(lang: str, stems: Sequence[str] | None = None, root: Path | None = None) -> list[str]:
    """Bring each lesson's catalogue in step with the English: new cells added empty, changed cells
    carried over as fuzzy, removed cells dropped. Returns a line per catalogue that changed."""
    import nbformat
    import polib

    root = _root(root)
    changed = []
    for lesson in catalog.lessons(root / "notebooks"):
        if stems and lesson.stem not in stems:
            continue
        path = catalogue_path(root, lang, lesson.stem)
        old = _load(path)
        before = str(old) if path.exists() else ""
        by_id = {(e.msgctxt, e.msgid): e for e in old}
        unused = [e for e in old if e.msgstr]
        new = polib.POFile(wrapwidth=0)
        new.metadata = old.metadata or {
            "Project-Id-Version": f"tpututor {lesson.stem}",
            "Language": lang,
            "Content-Type": "text/plain; charset=UTF-8",
            "X-Tpututor-Status": "draft",
        }
        english = nbformat.read(lesson.notebook, as_version=4)
        wanted = [(f"cell {n + 1}", text) for n, (_, text) in enumerate(cells_to_translate(english))]
        wanted += _front_entries(lesson)
        for ctxt, text in wanted:
            same = by_id.get((ctxt, text)) or next((e for e in old if e.msgid == text and e.msgstr), None)
            if same is not None:
                entry = polib.POEntry(
                    msgctxt=ctxt,
                    msgid=text,
                    msgstr=same.msgstr,
                    flags=list(same.flags),
                    previous_msgid=same.previous_msgid,
                )
                if same in unused:
                    unused.remove(same)
            else:
                close = max(unused, key=lambda e: difflib.SequenceMatcher(None, e.msgid, text).ratio(), default=None)
                if close is not None and difflib.SequenceMatcher(None, close.msgid, text).ratio() >= 0.5:
                    entry = polib.POEntry(
                        msgctxt=ctxt, msgid=text, msgstr=close.msgstr, flags=["fuzzy"], previous_msgid=close.msgid
                    )
                    unused.remove(close)
                else:
                    entry = polib.POEntry(msgctxt=ctxt, msgid=text, msgstr="")
            new.append(entry)
        path.parent.mkdir(parents=True, exist_ok=True)
        if str(new) != before:
            new.save(str(path))
            stale = sum("fuzzy" in e.flags for e in new)
            missing = sum(not e.msgstr for e in new)
            changed.append(f"{path.relative_to(root)}: {len(new)} entries, {stale} fuzzy, {missing} untranslated")
    return changed


def _translated(entry, lang: str, english: str) -> tuple[str, str]:
    """(note, text) a translated notebook shows for one entry: its translation with no note, or the
    English with the note saying why."""
    if entry is not None and entry.msgstr and "fuzzy" not in entry.flags:
        return "", entry.msgstr
    return (STALE_NOTE[lang] if entry is not None and entry.msgstr else MISSING_NOTE[lang]), english


def _front(meta: dict, entries: dict) -> dict:
    """The front matter of a translated lesson: title, needs note and objectives translated where the
    catalogue has a current translation, English elsewhere."""

    def pick(ctxt: str, english: str) -> str:
        e = entries.get(ctxt)
        return e.msgstr if e is not None and e.msgstr and "fuzzy" not in e.flags else english

    out = {**meta, "title": pick("front:title", meta["title"])}
    out["needs"] = {**meta["needs"], "note": pick("front:note", " ".join(str(meta["needs"]["note"]).split()))}
    out["objectives"] = [
        pick(f"front:objective {i + 1}", " ".join(str(g).split())) for i, g in enumerate(meta["objectives"])
    ]
    return out


def localised_code(source: str, stem: str, lang: str) -> str:
    """A code cell as the translated lesson has it: the English code, except that the setup cell's
    ``launch.setup("NN_topic")`` becomes ``launch.setup("NN_topic", language="<lang>")`` so that the
    exercise checks print in that language. No other code changes."""
    return source.replace(f'launch.setup("{stem}")', f'launch.setup("{stem}", language="{lang}")')


def render(lesson: catalog.Lesson, lang: str, root: Path, s: stamp.Settings):
    """The translated notebook (nbformat) of one lesson, from its English .ipynb and its catalogue."""
    import copy

    import nbformat

    english = nbformat.read(lesson.notebook, as_version=4)
    po = _load(catalogue_path(root, lang, lesson.stem))
    by_ctxt = {e.msgctxt: e for e in po}
    nb = copy.deepcopy(english)
    for n, (index, text) in enumerate(cells_to_translate(english)):
        entry = by_ctxt.get(f"cell {n + 1}")
        if entry is not None and entry.msgid != text:
            entry = None  # the catalogue was not updated for this English: treat it as missing
        note, body = _translated(entry, lang, text)
        if index == 0:  # the badges go back under the heading, opening the translated notebook
            head, _, rest = body.partition("\n")
            badges = stamp.badges(lesson.stem, s, folder=f"notebooks/{lang}")
            body = f"{head}\n\n{badges}\n" + (f"\n{note}\n" if note else "") + rest
        elif note:
            body = f"{note}\n\n{body}"
        nb.cells[index].source = body
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = localised_code(cell.source, lesson.stem, lang)
    nb.metadata["tpututor"] = _front(english.metadata["tpututor"], by_ctxt)
    nb.metadata["tpututor"]["language"] = lang
    nb.metadata["tpututor"]["source"] = f"notebooks/{lesson.path.name}"
    return nb


def build(lang: str, root: Path | None = None, out: Path | None = None) -> list[Path]:
    """Write ``notebooks/<lang>/`` (or ``out``) for every lesson that has a catalogue; returns the files."""
    import jupytext
    import jupytext.config
    import nbformat

    root = _root(root)
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    out = out or root / "notebooks" / lang
    out.mkdir(parents=True, exist_ok=True)
    s = stamp.settings(root / "pyproject.toml")
    config = jupytext.config.load_jupytext_config(str(root / "notebooks"))
    written = []
    for lesson in catalog.lessons(root / "notebooks"):
        if not catalogue_path(root, lang, lesson.stem).exists():
            continue
        nb = render(lesson, lang, root, s)
        ipynb, md = out / lesson.notebook.name, out / lesson.path.name
        nbformat.write(nb, ipynb)
        md.write_text(jupytext.writes(nb, fmt="md:myst", config=config))
        written += [ipynb, md]
    return written


def lesson_table(lang: str, root: Path | None = None) -> str:
    """The translated README's lesson table, from the translated lessons' front matter."""
    root = _root(root)
    head, minutes = _TABLE[lang]
    s = stamp.settings(root / "pyproject.toml")
    rows = [head, "|---|---|---|---|"]
    for lesson in catalog.lessons(root / "notebooks" / lang):
        links = " ".join(stamp.badges(lesson.stem, s, folder=f"notebooks/{lang}").splitlines())
        rows.append(
            f"| [{lesson.heading}](notebooks/{lang}/{lesson.path.name}) | {links} | "
            f"{minutes.format(minutes=lesson.minutes)} | {lesson.note} |"
        )
    return "\n".join(rows)


def readme(lang: str, root: Path | None = None) -> Path:
    """Rewrite the lesson table of ``README.<lang>.md`` (between its lessons:start/end markers)."""
    root = _root(root)
    path = root / f"README.{lang}.md"
    text = path.read_text()
    if "<!-- lessons:start -->" not in text:
        raise ValueError(f"{path.name} has no <!-- lessons:start --> ... <!-- lessons:end --> block")
    table = lesson_table(lang, root)
    new = re.sub(
        r"(<!-- lessons:start -->\n)(?:.*?\n)?(<!-- lessons:end -->)",
        lambda m: m.group(1) + table + "\n" + m.group(2),
        text,
        flags=re.S,
    )
    if new != text:
        path.write_text(new)
    return path


@dataclass(frozen=True)
class Glossary:
    """How a translation writes each term: English term -> its fixed form."""

    terms: dict[str, str]

    @classmethod
    def load(cls, root: Path, lang: str) -> Glossary:
        path = root / "i18n" / lang / "glossary.tsv"
        terms = {}
        for line in path.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                english, _, fixed = line.partition("\t")
                terms[english.strip()] = fixed.strip()
        return cls(terms)

    def violations(self, english: str, translated: str) -> list[str]:
        """The terms the English prose uses that the translation does not write the fixed way. Code
        (inline or fenced) and link text are not prose here: code stays as written, and the titles of
        cited sources stay in English."""
        out = []
        prose = _CODE_SPAN.sub(" ", _LINK_TEXT.sub(" ", _FENCE.sub(" ", english)))
        flat = " ".join(translated.split())  # a term the translation wraps across lines still counts
        # Longest terms first, each blanked once checked: "gradient descent" has its own form, so the
        # "gradient" inside it is not looked for again.
        for term in sorted(self.terms, key=len, reverse=True):
            pattern = rf"(?<![\w/.]){re.escape(term)}(?![\w/])"
            if re.search(pattern, prose):
                if self.terms[term] not in flat:
                    out.append(f"{term} -> {self.terms[term]}")
                prose = re.sub(pattern, " ", prose)
        return out


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tpututor_course translate")
    parser.add_argument("what", choices=["update", "build"])
    parser.add_argument("--lang", default="ko", choices=LANGUAGES)
    parser.add_argument("lessons", nargs="*", help="only these lessons (NN_topic), for update")
    args = parser.parse_intermixed_args(list(argv) if argv is not None else None)
    if args.what == "update":
        for line in update(args.lang, args.lessons or None) or ["translations: nothing to change"]:
            print(line)
        return 0
    files = build(args.lang)
    print(f"translations: wrote {len(files)} files in notebooks/{args.lang}/")
    root = catalog.find_root()
    if (root / f"README.{args.lang}.md").exists():
        print(f"translations: {readme(args.lang, root).name} lesson table up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
