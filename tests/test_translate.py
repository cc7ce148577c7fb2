"""The translated editions: English is the only source of code, and the translations keep in step.

The first tests build a one-lesson toy repository and translate it, so they pin the generator's
behaviour whatever the real lessons say. The rest check the committed Korean edition: generated
exactly from the English and the catalogues, code cells identical, no missing or stale cell in a
lesson marked translated, glossary terms written as fixed, code, links and numbers untouched.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import polib
import pytest

from conftest import LESSON_IDS, ROOT, TEST_RUN
from tpututor_course import catalog, runner, translate

TOY_LESSON = """\
---
jupytext:
  formats: ipynb,md:myst
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3 (ipykernel)
  language: python
  name: python3
tpututor:
  title: A toy lesson
  minutes: 5
  needs:
    devices: cpu
    note: a CPU is enough
  objectives: [add two numbers, print the sum]
---

# 00 · A toy lesson

[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)](https://colab.research.google.com/github/tpututor/tpututor/blob/main/notebooks/00_toy.ipynb)

This lesson adds numbers with `jax.jit` on a TPU.

```{code-cell} ipython3
:tags: [parameters]

n = 2  # how many
```

Now the sum, compiled by XLA:

```{code-cell} ipython3
print(n + n)
```
"""

KOREAN = {
    "cell 1": "# 00 · 장난감 강의\n\n이 강의는 TPU에서 `jax.jit`으로 수를 더합니다.",
    "cell 2": "이제 XLA가 컴파일한 합계입니다:",
    "front:title": "장난감 강의",
    "front:note": "CPU면 충분합니다",
    "front:objective 1": "두 수 더하기",
    "front:objective 2": "합계 출력하기",
}


@pytest.fixture
def toy(tmp_path):
    """A repository with one lesson, its Korean catalogue filled in."""
    import jupytext

    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    shutil.copy(ROOT / "jupytext.toml", tmp_path / "jupytext.toml")
    md = tmp_path / "notebooks" / "00_toy.md"
    md.write_text(TOY_LESSON)
    nbformat.write(jupytext.read(md), md.with_suffix(".ipynb"))
    translate.update("ko", root=tmp_path)
    fill(tmp_path, "00_toy", KOREAN)
    return tmp_path


def fill(root: Path, stem: str, texts: dict[str, str]) -> None:
    po = polib.pofile(str(translate.catalogue_path(root, "ko", stem)), wrapwidth=0)
    for entry in po:
        if entry.msgctxt in texts:
            entry.msgstr = texts[entry.msgctxt]
            entry.flags = [f for f in entry.flags if f != "fuzzy"]
    po.save()


def edit_english(root: Path, old: str, new: str) -> None:
    import jupytext

    md = root / "notebooks" / "00_toy.md"
    md.write_text(md.read_text().replace(old, new))
    nbformat.write(jupytext.read(md), md.with_suffix(".ipynb"))


def korean(root: Path):
    translate.build("ko", root=root)
    return nbformat.read(root / "notebooks" / "ko" / "00_toy.ipynb", as_version=4)


def test_update_makes_one_entry_per_markdown_cell_and_per_front_matter_field(tmp_path):
    import jupytext

    (tmp_path / "notebooks").mkdir()
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    md = tmp_path / "notebooks" / "00_toy.md"
    md.write_text(TOY_LESSON)
    nbformat.write(jupytext.read(md), md.with_suffix(".ipynb"))
    translate.update("ko", root=tmp_path)
    po = polib.pofile(str(translate.catalogue_path(tmp_path, "ko", "00_toy")))
    assert [e.msgctxt for e in po] == list(KOREAN)
    assert all(e.msgstr == "" for e in po) and po.metadata["X-Tpututor-Status"] == "draft"
    assert "colab-badge" not in po[0].msgid, "badges are rebuilt per language, not translated"


def test_build_copies_every_code_cell_verbatim_and_replaces_only_the_markdown(toy):
    english = nbformat.read(toy / "notebooks" / "00_toy.ipynb", as_version=4)
    ko = korean(toy)
    assert len(ko.cells) == len(english.cells)
    for e, k in zip(english.cells, ko.cells):
        assert (k.cell_type, k.id) == (e.cell_type, e.id)
        if e.cell_type == "code":
            assert (k.source, k.metadata) == (e.source, e.metadata)
    assert "이제 XLA가 컴파일한 합계입니다" in ko.cells[2].source
    assert ko.metadata["tpututor"]["title"] == "장난감 강의"
    assert ko.metadata["tpututor"]["objectives"] == ["두 수 더하기", "합계 출력하기"]
    assert ko.metadata["tpututor"]["language"] == "ko"


def test_the_badges_of_a_translated_lesson_open_the_translated_notebook(toy):
    first = korean(toy).cells[0].source
    assert first.startswith("# 00 · 장난감 강의")
    assert "blob/main/notebooks/ko/00_toy.ipynb" in first
    assert "notebooks/00_toy.ipynb" not in first.replace("notebooks/ko/00_toy.ipynb", "")


def test_a_changed_english_cell_marks_its_translation_stale_and_the_build_shows_english_with_a_note(toy):
    edit_english(toy, "Now the sum, compiled by XLA:", "Now the sum of both, compiled by XLA:")
    translate.update("ko", root=toy)
    po = polib.pofile(str(translate.catalogue_path(toy, "ko", "00_toy")))
    entry = next(e for e in po if e.msgctxt == "cell 2")
    assert "fuzzy" in entry.flags and entry.previous_msgid == "Now the sum, compiled by XLA:"
    assert entry.msgstr == KOREAN["cell 2"], "the old translation is kept for the translator to revise"
    cell = korean(toy).cells[2].source
    assert cell.startswith(translate.STALE_NOTE["ko"]) and "번역이 원문보다 오래되었습니다" in cell
    assert "Now the sum of both, compiled by XLA:" in cell and KOREAN["cell 2"] not in cell


def test_a_revised_translation_replaces_the_english_again(toy):
    edit_english(toy, "Now the sum, compiled by XLA:", "Now the sum of both, compiled by XLA:")
    translate.update("ko", root=toy)
    fill(toy, "00_toy", {"cell 2": "이제 XLA가 컴파일한 두 수의 합계입니다:"})
    cell = korean(toy).cells[2].source
    assert cell == "이제 XLA가 컴파일한 두 수의 합계입니다:"


def test_an_untranslated_cell_shows_the_english_with_a_note(toy):
    edit_english(
        toy,
        "```{code-cell} ipython3\nprint(n + n)\n```\n",
        "```{code-cell} ipython3\nprint(n + n)\n```\n\nA closing remark about HBM.\n",
    )
    translate.update("ko", root=toy)
    cell = korean(toy).cells[-1].source
    assert cell == translate.MISSING_NOTE["ko"] + "\n\nA closing remark about HBM."


def test_the_glossary_flags_a_term_the_translation_writes_another_way():
    glossary = translate.Glossary({"TPU": "TPU", "sharding": "샤딩", "jit": "jit"})
    assert glossary.violations("Run it on a TPU with `jit`.", "TPU에서 `jit`으로 실행합니다.") == []
    assert glossary.violations("Run it on a TPU.", "텐서 처리 장치에서 실행합니다.") == ["TPU -> TPU"]
    assert glossary.violations("sharding over devices", "분할") == ["sharding -> 샤딩"]
    assert glossary.violations("the jitted function", "jit된 함수") == [], "a longer word is not the term"
    assert glossary.violations("call `shard_map(f, mesh)` on a [sharding guide](https://x.y)", "호출합니다") == [], (
        "code and the titles of cited sources are not prose"
    )
    assert glossary.violations("the sharding\nof it", "그 샤\n딩") == ["sharding -> 샤딩"]
    assert glossary.violations("sharding", "샤딩") == []
    longer = translate.Glossary({"gradient": "그래디언트", "gradient descent": "경사 하강법"})
    assert longer.violations("plain gradient descent", "평범한 경사 하강법") == [], "the longer term wins"
    assert longer.violations("a gradient and gradient descent", "경사 하강법") == ["gradient -> 그래디언트"]


def test_an_unknown_language_is_refused_with_the_choices(toy):
    with pytest.raises(ValueError, match="choose one of ko"):
        translate.build("xx", root=toy)


# The committed Korean edition.

CATALOGUES = sorted((ROOT / "i18n" / "ko").glob("[0-9][0-9]*_*.po"))
KO = ROOT / "notebooks" / "ko"


def catalogue(stem: str) -> polib.POFile:
    return polib.pofile(str(translate.catalogue_path(ROOT, "ko", stem)), wrapwidth=0)


def test_every_lesson_has_a_korean_catalogue_marked_translated():
    assert [p.stem for p in CATALOGUES] == LESSON_IDS
    drafts = [stem for stem in LESSON_IDS if catalogue(stem).metadata.get("X-Tpututor-Status") != "translated"]
    assert drafts == [], f"catalogues still in draft: {drafts}"


@pytest.mark.parametrize("stem", LESSON_IDS)
def test_the_catalogue_is_in_step_with_the_english(stem):
    """Every markdown cell and front-matter field of the English has its entry, and no other."""
    lesson = next(lesson for lesson in catalog.lessons(ROOT / "notebooks") if lesson.stem == stem)
    english = nbformat.read(lesson.notebook, as_version=4)
    wanted = [text for _, text in translate.cells_to_translate(english)]
    po = catalogue(stem)
    cells = [e.msgid for e in po if e.msgctxt.startswith("cell ")]
    assert cells == wanted, f"run: python -m tpututor_course translate update {stem}"


@pytest.mark.parametrize("stem", LESSON_IDS)
def test_a_lesson_marked_translated_has_no_missing_or_stale_cell(stem):
    po = catalogue(stem)
    if po.metadata.get("X-Tpututor-Status") != "translated":
        pytest.skip(f"{stem} is a draft")
    missing = [e.msgctxt for e in po if not e.msgstr]
    stale = [e.msgctxt for e in po if "fuzzy" in e.flags]
    assert (missing, stale) == ([], []), "see docs/translating.md"


def test_regenerating_reproduces_the_committed_korean_files_exactly(tmp_path):
    written = translate.build("ko", root=ROOT, out=tmp_path)
    assert sorted(p.name for p in written) == sorted(p.name for p in KO.glob("[0-9][0-9]*_*.*"))
    stale = [p.name for p in written if p.read_bytes() != (KO / p.name).read_bytes()]
    assert stale == [], f"notebooks/ko/ is out of date: make translations ({stale})"


@pytest.mark.parametrize("stem", LESSON_IDS)
def test_the_korean_code_cells_equal_the_english_but_for_the_setup_call_naming_the_language(stem):
    """Every code cell is the English one, id, source and metadata, with one change allowed: the setup
    cell's launch.setup("NN_topic") is launch.setup("NN_topic", language="ko"), so that the checks
    print Korean. Nothing else in the code differs."""
    english = nbformat.read(ROOT / "notebooks" / f"{stem}.ipynb", as_version=4)
    ko = nbformat.read(KO / f"{stem}.ipynb", as_version=4)
    code = lambda nb: [(c.id, c.source, c.metadata) for c in nb.cells if c.cell_type == "code"]  # noqa: E731
    setup, with_language = f'launch.setup("{stem}")', f'launch.setup("{stem}", language="ko")'
    expected = [(i, s.replace(setup, with_language), m) for i, s, m in code(english)]
    assert sum(setup in s for _, s, _ in code(english)) == 1, "the English lesson has one setup call"
    assert code(ko) == expected


def _entries():
    for path in CATALOGUES:
        for entry in polib.pofile(str(path), wrapwidth=0):
            if entry.msgstr and "fuzzy" not in entry.flags:
                yield path.stem, entry


def test_glossary_terms_are_written_as_fixed():
    glossary = translate.Glossary.load(ROOT, "ko")
    wrong = [f"{stem} {e.msgctxt}: {v}" for stem, e in _entries() for v in glossary.violations(e.msgid, e.msgstr)]
    assert wrong == []


CODE_SPAN = re.compile(r"`[^`\n]+`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
MATH = re.compile(r"\$[^$\n]+\$")


def test_code_links_and_math_survive_translation_untouched():
    """Inline code, link targets and math are the same strings in the translation as in the English."""
    lost = []
    for stem, e in _entries():
        for pattern in (CODE_SPAN, LINK, MATH):
            for piece in set(pattern.findall(e.msgid)):
                if piece not in e.msgstr:
                    lost.append(f"{stem} {e.msgctxt}: {piece}")
    assert lost == []


def test_numbers_survive_translation():
    """Every number the English states (a measured figure, a version, a lesson number) is in the translation."""
    number = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
    lost = []
    for stem, e in _entries():
        prose = LINK.sub("", CODE_SPAN.sub("", e.msgid))
        for n in set(number.findall(prose)):
            if n not in e.msgstr:
                lost.append(f"{stem} {e.msgctxt}: {n}")
    assert lost == []


@pytest.mark.slow
@pytest.mark.lessons
def test_a_korean_lesson_runs_top_to_bottom():
    """The smoke test: one Korean notebook executed as CI executes the English ones."""
    result = runner.execute(KO / "00a_where_am_i.ipynb", TEST_RUN / "ko", profile="ci")
    assert result.status == "ok", result.error


def test_the_korean_readme_lists_every_lesson_as_generated():
    readme = ROOT / "README.ko.md"
    table = translate.lesson_table("ko", ROOT)
    assert table in readme.read_text(), "README.ko.md's table is out of date: make translations"
    assert table.count("\n") == len(LESSON_IDS) + 1
    assert "README.ko.md" in (ROOT / "README.md").read_text(), "the English README links the Korean one"
