"""The Korean edition's style rules, checked on every catalogue entry.

A Korean engineer's review found English calques ("X's own" as X 자체의/자신의, "honest" as 정직한,
"classic" as 고전적인), 해요체 fragments in a 합니다체 text, and terms written two ways. The calques and
the losing spellings of the drifting terms are listed once, in ``RULES`` below, each with what to write
instead (docs/translating.md, "Style addendum", explains them); the terms' fixed forms are in
``i18n/ko/glossary.tsv`` and checked by test_translate's glossary test. Code, math, link targets and
quotations are not checked: a quotation keeps its source's words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import polib
import pytest

from tpututor_course import translate

ROOT = Path(__file__).resolve().parents[1]
CATALOGUES = sorted((ROOT / "i18n" / "ko").glob("[0-9][0-9]*_*.po"))


@dataclass(frozen=True)
class Rule:
    pattern: str  # a regular expression matched against the prose of a msgstr, line by line
    instead: str  # what to write instead, shown in the failure
    bad: str  # a sentence the rule must flag
    good: str  # the same sentence written as the rule asks, which it must pass


RULES = {
    '자체의 (for "X\'s own")': Rule(
        r"자체의",
        "drop it (PyTorch/XLA의 카운터), or say whose: 공식 가이드, 직접 만든, 고유한, 에 내장된",
        "PyTorch/XLA 자체의 카운터가 알려 줍니다.",
        "PyTorch/XLA의 카운터가 알려 줍니다.",
    ),
    '자신의 (for "X\'s own")': Rule(
        r"자신의",
        "drop it (모델의 로짓), or 직접/실제로: 컴파일러가 실제로 만든 것",
        "최적화된 HLO는 TPU 자신의\n것입니다.",
        "최적화된 HLO는 TPU 컴파일러가 실제로 만든 것입니다.",
    ),
    '정직한 (for "honest")': Rule(
        r"정직한",
        "제대로 된, 있는 그대로의, 공정한, 실제의",
        "정직한 시간 측정은 컴파일을 따로 잽니다.",
        "제대로 된 시간 측정은 컴파일을 따로 잽니다.",
    ),
    '정직하게 (for "honestly")': Rule(
        r"정직하게", "제대로, 공정하게, 있는 그대로", "스텝 시간을 정직하게 잽니다.", "스텝 시간을 제대로 잽니다."
    ),
    '고전적인 (for "classic")': Rule(
        r"고전적(?:인|으로)",
        "전형적인, 대표적인, 흔한 (흔히)",
        "고전적인 TPU 튜토리얼은 4×4 메시를 만듭니다.",
        "대표적인 TPU 튜토리얼은 4×4 메시를 만듭니다.",
    ),
    "해요체 ending (…니까요. …까지요. …을요.)": Rule(
        r"(?<![세필중개주수])요(?=[.!)]|$)",
        "합니다체: …이기 때문입니다, or fold the fragment into the sentence before it "
        "(imperatives …하세요 and questions …까요? are fine)",
        "손실이 일치합니다. 같은 데이터에 같은 프로그램이니까요.",
        "손실이 일치합니다. 같은 데이터에 같은 프로그램이기 때문입니다.",
    ),
    "매개변수 (glossary: parameter)": Rule(
        r"매개변수", "파라미터", "HLO의 매개변수 번호로 찾습니다.", "HLO의 파라미터 번호로 찾습니다."
    ),
    "단언 (glossary: assert)": Rule(
        r"단언",
        "assert (assert합니다, assert하지 않고)",
        "비율을 단언하지 않고 출력만 합니다.",
        "비율을 assert하지 않고 출력만 합니다.",
    ),
    "윈도 (glossary: window)": Rule(
        r"윈도(?!우)", "윈도우", "토큰 스트림을 윈도로 자릅니다.", "토큰 스트림을 윈도우로 자릅니다."
    ),
    "스케일링 북 (glossary: scaling-book)": Rule(
        r"스케일링\s*북|scaling book",
        "scaling-book",
        "스케일링 북의 LLaMA 3 숫자와 일치합니다.",
        "scaling-book의 LLaMA 3 숫자와 일치합니다.",
    ),
    "제자리 (glossary: in-place)": Rule(
        r"제자리",
        "in-place for an update or write in place; 그대로 for data that stays put",
        "캐시가 제자리에서 업데이트됩니다.",
        "캐시가 in-place로 업데이트됩니다.",
    ),
    "샤딩 방식 (glossary: placement)": Rule(
        r"샤딩\s*방식",
        "배치 위치 (placement); 샤딩 for sharding itself",
        "규칙은 샤딩 방식을 정할 뿐입니다.",
        "규칙은 배치 위치를 정할 뿐입니다.",
    ),
}

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
_CODE = re.compile(r"`[^`\n]+`")
_MATH = re.compile(r"\$[^$\n]+\$")
_LINK_TARGET = re.compile(r"\]\([^)\s]+\)")
_QUOTE = re.compile(r"\"[^\"]*\"|“[^”]*”")


def prose(text: str) -> str:
    """The text a rule reads: code, math, link targets and quotations blanked out."""
    for pattern in (_FENCE, _CODE, _MATH, _LINK_TARGET, _QUOTE):
        text = pattern.sub(" ", text)
    return text


def violations(text: str) -> list[str]:
    """Each listed calque or losing spelling in the prose of ``text``, with what to write instead."""
    text = prose(text)
    return [
        f"{name}: {match.group()!r} -> {rule.instead}"
        for name, rule in RULES.items()
        for match in re.finditer(rule.pattern, text, re.M)
    ]


def catalogue_violations(paths) -> list[str]:
    return [
        f"{path.stem} {entry.msgctxt}: {v}"
        for path in paths
        for entry in polib.pofile(str(path), wrapwidth=0)
        if entry.msgstr
        for v in violations(entry.msgstr)
    ]


def test_no_catalogue_writes_a_listed_calque_or_a_losing_spelling():
    found = catalogue_violations(CATALOGUES)
    assert found == [], "write instead:\n" + "\n".join(found)


# The Korean written outside the catalogues: the front page, the guides, the error atlas and the hints.
OTHER_KOREAN = [
    ROOT / "README.ko.md",
    ROOT / "docs" / "workshop.ko.md",
    ROOT / "docs" / "errors.ko.md",
    ROOT / "tpututor" / "data" / "errors_ko.toml",
    *sorted((ROOT / "tpututor" / "exercises" / "ko").glob("*.toml")),
]


@pytest.mark.parametrize("path", OTHER_KOREAN, ids=lambda p: p.name)
def test_the_korean_front_page_guides_atlas_and_hints_follow_the_same_rules(path):
    assert path.exists(), path
    found = [
        f"{path.name} line {n}: {v}"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for v in violations(line)
    ]
    assert found == [], "write instead:\n" + "\n".join(found)


def test_a_calque_planted_in_a_catalogue_is_reported_with_its_fix(tmp_path):
    po = polib.pofile(str(CATALOGUES[0]), wrapwidth=0)
    entry = next(e for e in po if e.msgctxt.startswith("cell "))
    entry.msgstr += "\n\n정직한 측정은 모델 자체의 시간을 잽니다."
    planted = tmp_path / CATALOGUES[0].name
    po.save(str(planted))
    found = catalogue_violations([planted])
    assert [v.split(": ", 1)[1].split(":")[0] for v in found] == ['자체의 (for "X\'s own")', '정직한 (for "honest")']
    assert found[0].startswith(f"{planted.stem} {entry.msgctxt}: ") and "공식 가이드" in found[0]


@pytest.mark.parametrize("name", RULES)
def test_each_rule_flags_a_planted_bad_sentence_and_passes_its_rewrite(name):
    rule = RULES[name]
    flagged = violations(rule.bad)
    assert [v for v in flagged if v.startswith(f"{name}:")], f"{name} missed {rule.bad!r}"
    assert all(rule.instead in v for v in flagged if v.startswith(f"{name}:")), "the failure names the fix"
    assert violations(rule.good) == []


def test_code_math_links_and_quotations_are_not_style_checked():
    assert violations("`model 자체의 params`를 씁니다.") == []
    assert violations("```python\n# 정직한 benchmark\nx = 1\n```\n끝입니다.") == []
    assert violations("[대표적인 글](https://example.com/자체의)을 봅니다.") == []
    assert violations("[고전적인 글](https://example.com/)을 봅니다."), "link text is prose"
    assert violations('문서는 "자체의 기록이요." 라고 적습니다.') == []


def test_imperatives_questions_and_nouns_ending_in_yo_are_not_haeyo_fragments():
    assert violations("셀을 다시 실행하세요. 무엇이 잘못될까요? 검사를 통과해야 합니다.") == []
    assert violations("(transformers 5.24는 0.8 이상 필요)") == []
    assert violations("(스텝 하나를 보는 개요)") == []
    assert violations("그동안 호스트가 하던 일까지요.")  # a fragment is flagged


def test_the_glossary_fixes_one_form_for_each_term_that_drifted():
    """The terms the review found written two ways: test_translate's glossary test holds every cell to
    these forms; here, that the decisions are in the glossary and a planted other form is flagged."""
    glossary = translate.Glossary.load(ROOT, "ko")
    decided = {
        "parameter": "파라미터",
        "parameters": "파라미터",
        "assert": "assert",
        "asserts": "assert",
        "asserted": "assert",
        "window": "윈도우",
        "windows": "윈도우",
        "scaling-book": "scaling-book",
        "scaling book": "scaling-book",
        "in-place": "in-place",
        "placement": "배치 위치",
        "placements": "배치 위치",
    }
    assert {term: glossary.terms.get(term) for term in decided} == decided
    assert glossary.violations("one parameter", "매개변수 하나") == ["parameter -> 파라미터"]
    assert glossary.violations("the ratio is asserted", "비율을 단언합니다") == ["asserted -> assert"]
    assert glossary.violations("a window of tokens", "토큰 윈도") == ["window -> 윈도우"]
    assert glossary.violations("the scaling book's rule", "스케일링 북의 규칙") == ["scaling book -> scaling-book"]
    assert glossary.violations("an in-place update", "제자리 업데이트") == ["in-place -> in-place"]
    assert glossary.violations("two input placements", "입력 샤딩 방식 두 가지") == ["placements -> 배치 위치"]
