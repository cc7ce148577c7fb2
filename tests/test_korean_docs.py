"""The Korean front page (README.ko.md) and instructor guide (docs/workshop.ko.md) keep up with the English.

README.ko.md is written by hand, so nothing regenerates it when README.md changes; these tests do
what a reviewer would. The two files are cut into sections at their ``##`` and ``###`` headings
(outside code blocks), the text before the first one being a section too, and paired in order:

- both have the same headings at the same levels in the same order (a dropped, added or moved
  section fails);
- each pair holds the same fenced code blocks, verbatim (commands and their comments are code, and
  code is never translated: docs/translating.md);
- each pair links the same targets, up to the Korean substitutions below, and the Korean links the
  Korean page wherever one exists;
- every inline code span of the English section is in its Korean counterpart (commands, flags,
  paths), and the Korean section is written in Korean (it holds Hangul).

The lesson tables between ``<!-- lessons:start -->`` and ``<!-- lessons:end -->`` are generated
(``make badges``, ``make translations``) and checked elsewhere (tests/test_launch.py,
tests/test_translate.py); they are left out here.

Korean substitutions, in link targets and code spans: ``notebooks/ko/`` for ``notebooks/``
(``notebooks%2Fko%2F`` in a Binder address), ``X.ko.md`` for ``X.md`` (``docs/errors.ko.md``,
``docs/workshop.ko.md``, ``README.ko.md``).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from conftest import ROOT

ENGLISH, KOREAN = ROOT / "README.md", ROOT / "README.ko.md"
HEADING = re.compile(r"^(#{1,3}) (.+)$")
TABLE = re.compile(r"<!-- lessons:start -->.*?<!-- lessons:end -->", re.S)
FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
LINK = re.compile(r"\]\(([^)\s]+)\)")
BARE_URL = re.compile(r"(?<![(<\w])https?://[^\s)<>\]`]+")
HANGUL = re.compile(r"[\uac00-\ud7a3]")
KOREAN_FORMS = ((r"notebooks/ko/", "notebooks/"), (r"notebooks%2Fko%2F", "notebooks%2F"), (r"\.ko\.md\b", ".md"))
DELIBERATELY_ENGLISH = {"README.md"}  # the language switch and "the English README"


def normalize(target: str) -> str:
    """A link target or code span with the Korean substitutions undone: the English form."""
    for pattern, english in KOREAN_FORMS:
        target = re.sub(pattern, english, target)
    return target


def sections(text: str) -> list[tuple[int, str, str]]:
    """(level, heading, body) for the text before the first ``##`` heading (level 1, or 0 without a
    ``#`` title) and for each ``##``/``###`` heading, headings inside fenced code skipped."""
    out, level, title, body, fenced = [], 0, "", [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fenced = not fenced
        m = None if fenced else HEADING.match(line)
        if m and len(m.group(1)) >= 2:
            out.append((level, title, "\n".join(body)))
            level, title, body = len(m.group(1)), m.group(2).strip(), []
        elif m and not out and not body:
            level, title = 1, m.group(2).strip()
        else:
            body.append(line)
    out.append((level, title, "\n".join(body)))
    return out


def fences(body: str) -> list[str]:
    return [block.strip() for block in FENCE.findall(TABLE.sub("", body))]


def prose(body: str) -> str:
    """A section without its generated table and fenced code."""
    return FENCE.sub("", TABLE.sub("", body))


def links(body: str) -> list[str]:
    text = CODE_SPAN.sub(" ", prose(body))
    return LINK.findall(text) + [u.rstrip(".,;:") for u in BARE_URL.findall(text)]


def code_spans(body: str) -> set[str]:
    return {normalize(m.group(2).strip()) for m in CODE_SPAN.finditer(prose(body))}


def korean_form(target: str, root: Path) -> str | None:
    """The Korean page for an English relative target, where one exists on disk."""
    path = target.split("#")[0]
    if "://" in target or path in DELIBERATELY_ENGLISH or path != normalize(path):
        return None
    if path.startswith("notebooks/"):
        candidate = "notebooks/ko/" + path[len("notebooks/") :]
    elif path.endswith(".md"):
        candidate = path[:-3] + ".ko.md"
    else:
        return None
    return candidate if (root / candidate).exists() and candidate.rstrip("/") != "notebooks/ko" else None


def parity_problems(english: str, korean: str, root: Path = ROOT) -> list[str]:
    """What keeps the Korean text from being the English's counterpart; empty when it is."""
    en, ko = sections(english), sections(korean)
    en_levels, ko_levels = [s[0] for s in en], [s[0] for s in ko]
    if en_levels != ko_levels:
        return [
            f"headings differ: English has {len(en)} sections at levels {en_levels} "
            f"({[s[1] for s in en]}), Korean {len(ko)} at {ko_levels} ({[s[1] for s in ko]}): "
            "every English ##/### section needs its Korean counterpart, in the same order"
        ]
    problems = []
    for (_, en_title, en_body), (_, ko_title, ko_body) in zip(en, ko):
        where = f"section {en_title or '(top)'!r} / {ko_title or '(top)'!r}"
        if fences(en_body) != fences(ko_body):
            problems.append(f"{where}: fenced code blocks differ (keep them verbatim)")
        en_links, ko_links = Counter(map(normalize, links(en_body))), Counter(map(normalize, links(ko_body)))
        if set(en_links) != set(ko_links):
            problems.append(
                f"{where}: link targets differ: only English {sorted(set(en_links) - set(ko_links))}, "
                f"only Korean {sorted(set(ko_links) - set(en_links))}"
            )
        for target in links(ko_body):
            if "://" not in target and not target.startswith("#"):
                if not (root / target.split("#")[0]).exists():
                    problems.append(f"{where}: {target} does not exist")
                elif korean_form(target, root):
                    problems.append(f"{where}: link {korean_form(target, root)}, the Korean page, not {target}")
        missing = code_spans(en_body) - code_spans(ko_body)
        if missing:
            problems.append(f"{where}: code spans of the English missing: {sorted(missing)}")
        if prose(en_body).strip() and not HANGUL.search(prose(ko_body)):
            problems.append(f"{where}: not translated (no Korean in it)")
    return problems


def test_the_korean_readme_has_every_section_of_the_english():
    problems = parity_problems(ENGLISH.read_text(), KOREAN.read_text())
    assert not problems, "README.ko.md is behind README.md:\n" + "\n".join(problems)


def test_the_korean_readme_keeps_its_generated_table_markers():
    text = KOREAN.read_text()
    assert text.count("<!-- lessons:start -->") == 1 and text.count("<!-- lessons:end -->") == 1
    assert "](notebooks/ko/00a_where_am_i.md)" in TABLE.search(text).group(0)


def test_the_korean_readme_links_the_korean_guide_where_the_english_links_the_guide():
    assert "](docs/workshop.md)" in ENGLISH.read_text()
    assert "](docs/workshop.ko.md)" in KOREAN.read_text()


def _drop(text: str, heading: str) -> str:
    """``text`` without the ``## heading`` section (up to the next ``##`` heading)."""
    return re.sub(rf"^## {re.escape(heading)}\n.*?(?=^## )", "", text, count=1, flags=re.M | re.S)


@pytest.mark.parametrize(
    "change",
    [
        "drop a section",
        "drop the last section",
        "add a section",
        "change a code block",
        "drop a link",
        "link the English page",
        "drop a command",
        "leave a section in English",
    ],
)
def test_the_check_catches_a_korean_readme_that_falls_behind(tmp_path, change):
    english, korean = ENGLISH.read_text(), KOREAN.read_text()
    before = set(parity_problems(english, korean))  # none (the test above), whatever they may be here
    ko_titles = [title for level, title, _ in sections(korean) if level == 2]
    if change == "drop a section":
        bad = _drop(korean, ko_titles[2])
    elif change == "drop the last section":
        bad = korean[: korean.index(f"## {ko_titles[-1]}")]
    elif change == "add a section":
        bad = korean.replace(f"## {ko_titles[1]}", f"## 번역에 참여하기\n\n번역 안내입니다.\n\n## {ko_titles[1]}")
    elif change == "change a code block":
        bad = korean.replace("make test    #", "make test-fast    #", 1)
    elif change == "drop a link":
        bad = korean.replace("[`constraints.txt`](constraints.txt)", "`constraints.txt`", 1)
    elif change == "link the English page":
        bad = korean.replace("](docs/workshop.ko.md)", "](docs/workshop.md)", 1)
    elif change == "drop a command":
        bad = korean.replace("`make test-fast`", "빠른 테스트", 1)
    else:
        heading = f"## {ko_titles[-1]}"
        english_body = english[english.rindex("\n## ") + 1 :].split("\n", 1)[1]
        bad = korean[: korean.index(heading)] + heading + "\n" + english_body
    assert bad != korean, change
    copy = tmp_path / "README.ko.md"
    copy.write_text(bad)
    assert set(parity_problems(english, copy.read_text())) - before, f"{change} went unnoticed"


def test_sections_skip_headings_inside_code_and_start_with_the_title():
    text = "# T\n\nintro\n\n## A\n\n```\n## not a heading\n```\n\n### B\n\nb\n"
    assert [(level, title) for level, title, _ in sections(text)] == [(1, "T"), (2, "A"), (3, "B")]
    assert fences(sections(text)[1][2]) == ["```\n## not a heading\n```"]


def test_korean_forms_of_links_count_as_the_english_target():
    assert normalize("notebooks/ko/04a_pytorch_xla.md") == "notebooks/04a_pytorch_xla.md"
    assert (
        normalize("https://mybinder.org/v2/gh/o/r/main?labpath=notebooks%2Fko%2F00_x.ipynb")
        == "https://mybinder.org/v2/gh/o/r/main?labpath=notebooks%2F00_x.ipynb"
    )
    assert normalize("docs/errors.ko.md") == "docs/errors.md" and normalize("README.ko.md") == "README.md"
    assert links("[a](x.md) `[b](y.md)` see https://example.com/p. and [![i](img.svg)](z)") == [
        "x.md",
        "img.svg",
        "z",
        "https://example.com/p",
    ]


# ----------------------------------------------------------------- the instructor guide


def test_the_korean_guide_has_the_english_guides_structure_and_commands():
    english, korean = (ROOT / "docs" / "workshop.md").read_text(), (ROOT / "docs" / "workshop.ko.md").read_text()
    en, ko = sections(english), sections(korean)
    assert [s[0] for s in en] == [s[0] for s in ko], "run python -m tpututor_course workshop"
    for (_, en_title, en_body), (_, ko_title, ko_body) in zip(en, ko):
        assert fences(en_body) == fences(ko_body), en_title
        assert code_spans(en_body) <= code_spans(ko_body), en_title
        assert HANGUL.search(ko_title + ko_body), f"{ko_title}: not in Korean"
        # the same schedule: every clock time of the English section, in the same order
        assert re.findall(r"^\| (\d\d:\d\d) \|", en_body, re.M) == re.findall(r"^\| (\d\d:\d\d) \|", ko_body, re.M)
