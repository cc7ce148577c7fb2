"""The error atlas: TPU and XLA errors learners meet, each with its cause, its fix and its proof.

Each :class:`Entry` quotes a message exactly as the framework versions in ``versions`` print it
(``…`` marks a part that changes from run to run: a number, a path, a name), says what causes it,
how to fix it and where the course teaches it. An entry that can happen on a CPU carries the code
that produces it (``example``) and the same code fixed (``fixed``); ``tests/test_errors.py`` runs
both, so a framework upgrade that rewords a message fails CI. An entry that needs a TPU or a GPU
says so and cites its source with the date it was read. ::

    from tpututor import errors
    for match in errors.explain(pasted_text):
        print(match.entry.title, match.entry.fix)

The same from a shell, on any machine with tpututor installed (Colab too, no clone needed):
``python -m tpututor doctor --explain "<the error text>"``. :func:`render_page` writes the atlas
as a page (``python -m tpututor_course errors_page`` keeps ``docs/errors.md`` in step).

The entries are data, shipped with the package: ``tpututor/data/errors/<framework>.toml`` holds each
entry's text (one file per framework, read at import), and ``tpututor/data/errors/examples/<id>.py`` and
``<id>.fixed.py`` its code, read as text when ``Entry.example`` or ``Entry.fixed`` is first asked for
(the package never imports them: they import frameworks). This module holds the matcher and the page.

The atlas speaks English and Korean (:data:`LANGS`): ``lang="ko"`` in :func:`explain`,
:func:`format_matches`, :func:`where_taught` and :func:`render_page` (``doctor --explain ... --lang ko``,
``docs/errors.ko.md``) gives each entry's title, cause, fix and notes in Korean, from
``tpututor/data/errors_ko.toml``; the quoted messages stay in English, as the frameworks print them.
Standard library only.
"""

from __future__ import annotations

import difflib
import math
import re
import textwrap
import tomllib
import unicodedata
from dataclasses import asdict, dataclass, fields, replace
from functools import cache, lru_cache
from importlib import resources

from . import validate

__all__ = [
    "Entry",
    "Match",
    "BadText",
    "ENTRIES",
    "ATLAS_URL",
    "ATLAS_URLS",
    "LANGS",
    "POINTER",
    "get",
    "localized",
    "pieces",
    "quoted_in",
    "explain",
    "format_matches",
    "where_taught",
    "render_page",
    "GAP",
    "REPRO",
]

ATLAS_URL = "https://github.com/tpututor/tpututor/blob/main/docs/errors.md"
LANGS = validate.LANGUAGES  # the languages the atlas is written in: English, and Korean from data/errors_ko.toml
ATLAS_URLS = {"en": ATLAS_URL, "ko": ATLAS_URL.removesuffix("errors.md") + "errors.ko.md"}  # the page per language
POINTER = (
    'Seen an error? Paste it: python -m tpututor doctor --explain "<the error text>" '
    f"(or read the error atlas, {ATLAS_URL})."
)
GAP = "…"  # in a quoted message: a part that changes from run to run
REPRO = {
    "cpu": "reproduced on a CPU",
    "faked": "reproduced on a CPU by the framework's own check, fed a faked machine or install",
    "tpu": "needs a TPU: not reproduced here",
    "gpu": "needs a GPU: not reproduced here",
    "install": "needs an install this environment does not have: not reproduced here",
}


@dataclass(frozen=True)
class Entry:
    """One error: what it says, why, what to do, where the course teaches it, and its proof.

    The fields come from ``tpututor/data/errors/<framework>.toml``; ``example`` and ``fixed``, from the
    files ``data/errors/examples/<id>.py`` and ``<id>.fixed.py``."""

    id: str
    title: str
    framework: str  # "JAX", "TensorFlow", "PyTorch/XLA" or "TPU runtime (libtpu)"
    message: str  # exactly as printed; GAP marks a part that changes from run to run
    cause: str
    fix: str
    lesson: str  # the topic of the lesson that teaches it (or the nearest one), e.g. "xla_fusion"
    taught: str  # the heading of the section that teaches it ("Recompilation"); "" when none does yet
    versions: tuple[str, ...]  # the versions this message was seen with
    repro: str  # a key of REPRO
    variants: tuple[str, ...] = ()  # other texts the example also prints (asserted like ``message``)
    also: tuple[tuple[str, str], ...] = ()  # (where, text): the same problem elsewhere (another version,
    # a TPU), quoted from ``sources`` or, for "jax 0.7.2", checked under Colab's JAX when that venv exists
    keywords: tuple[str, ...] = ()  # words a learner may use for it instead of the message
    runner: str = ""  # "jax", "tensorflow", "torch_xla": one shared interpreter; "process": a fresh one
    silent: bool = False  # nothing is printed: ``message`` is the symptom, which ``example`` asserts
    hardware: str = ""  # "TPU" or "GPU" when what ``note`` says happens only there
    note: str = ""  # what the sources say that no test here checks
    sources: tuple[tuple[str, str], ...] = ()  # (title, url) behind ``note``
    read: str = ""  # when the sources were read

    @property
    def example(self) -> str:
        """Code that produces the message (repro "cpu" or "faked"), run by the tests; "" when there is none."""
        return _code(self.id, "")

    @property
    def fixed(self) -> str:
        """The example with the fix applied, run by the tests ("" when the fix needs hardware)."""
        return _code(self.id, ".fixed")

    @property
    def reproduced(self) -> bool:
        return self.repro in ("cpu", "faked")

    @property
    def texts(self) -> tuple[str, ...]:
        """Every quoted text: the message, the variants the example prints, and ``also``'s."""
        return (self.message, *self.variants, *(text for _, text in self.also))

    def to_dict(self) -> dict:
        """Every field, and the code (``example``, ``fixed``) in the place it had when it was a field."""
        out = {}
        for key, value in asdict(self).items():
            out[key] = value
            if key == "keywords":
                out.update(example=self.example, fixed=self.fixed)
        return out


# ------------------------------------------------------------------------------------------ entries

_ATLAS = ("jax", "tpu_runtime", "tensorflow", "pytorch_xla")  # data/errors/<name>.toml, in the page's order
_PAIRS = ("also", "sources")  # fields whose TOML value is a list of [a, b] pairs
_LISTS = ("versions", "variants", "keywords")  # fields whose TOML value is a list of strings


def _data():
    """The atlas's folder in the installed package (a clone's, for an editable install)."""
    return resources.files("tpututor").joinpath("data", "errors")


def _entry(table: dict, framework: str, where: str) -> Entry:
    """One [[entries]] table of an atlas file as an Entry (its lists as tuples)."""
    known = {f.name for f in fields(Entry)} - {"framework"}
    unknown = set(table) - known
    if unknown:
        raise ValueError(f"{where}: entry {table.get('id')!r} has unknown fields {sorted(unknown)}")
    values = {key: tuple(value) for key, value in table.items() if key in _LISTS}
    values.update({key: tuple(tuple(pair) for pair in table[key]) for key in _PAIRS if key in table})
    return Entry(**{**table, **values, "framework": framework})


def _load() -> tuple[Entry, ...]:
    """Every entry of the atlas files, in the order of :data:`_ATLAS` and, in each, of the file."""
    entries = []
    for name in _ATLAS:
        where = f"tpututor/data/errors/{name}.toml"
        atlas = tomllib.loads(_data().joinpath(f"{name}.toml").read_text(encoding="utf-8"))
        entries += [_entry(table, atlas["framework"], where) for table in atlas["entries"]]
    return tuple(entries)


@cache
def _code(entry_id: str, suffix: str) -> str:
    """The text of ``data/errors/examples/<entry_id><suffix>.py``, byte for byte ("" when there is none)."""
    path = _data().joinpath("examples", f"{entry_id}{suffix}.py")
    return path.read_bytes().decode("utf-8") if path.is_file() else ""


ENTRIES: tuple[Entry, ...] = _load()


def get(entry_id: str) -> Entry:
    """The entry with this id; an unknown id is a KeyError listing the known ones."""
    for entry in ENTRIES:
        if entry.id == entry_id:
            return entry
    raise KeyError(f"no error atlas entry {entry_id!r}; the entries are {', '.join(e.id for e in ENTRIES)}")


# ------------------------------------------------------------------------------------ languages


@cache
def _catalogue(lang: str) -> dict:
    """The translation of the atlas into ``lang`` (not English): ``tpututor/data/errors_<lang>.toml``."""
    return tomllib.loads(
        resources.files("tpututor").joinpath("data", f"errors_{lang}.toml").read_text(encoding="utf-8")
    )


@cache
def localized(entry: Entry, lang: str = "en") -> Entry:
    """The entry with its prose (title, cause, fix, taught, note, the labels of ``also``, versions said in
    words) in ``lang``; the quoted messages, code and sources stay as they are. English is the entry itself."""
    if validate.language(lang) == "en":
        return entry
    words = _catalogue(lang)["entries"].get(entry.id, {})
    labels = words.get("also", [])
    also = tuple((labels[n] if n < len(labels) else where, text) for n, (where, text) in enumerate(entry.also))
    versions = tuple(words.get("versions", entry.versions))
    return replace(
        entry,
        also=also,
        versions=versions,
        **{field: words.get(field, getattr(entry, field)) for field in ("title", "cause", "fix", "taught", "note")},
    )


# The words around the entries, in English; a translation has the same keys in its catalogue's [text].
_TEXT = {
    "one_match": "1 matching entry in the error atlas:",
    "n_matches": "{n} matching entries in the error atlas, best first:",
    "exact": "the message matches",
    "fuzzy": "a fuzzy match, {score}",
    "message": "Message:",
    "cause": "Cause:",
    "fix": "Fix:",
    "course": "Course:",
    "proof": "Proof:",
    "more": "More:",
    "source": "; source: {url}",
    "near": " The closest topics in the atlas, which may be unrelated: {topics}.",
    "no_match": "No entry in the error atlas matches this text: the atlas does not say what causes it.{near} Read "
    "the atlas: {url} ({page} in a clone); or search the framework's issue tracker for the message's "
    "first line, without the numbers and paths that are yours.",
    "lesson": "lesson {number} ({title})",
    "nearest_lesson": "the {title} lesson",
    "section": '{lesson}, section "{taught}"',
    "not_taught": "not taught in a lesson yet; nearest: {lesson}",
    "page_comment": "<!-- Generated from tpututor/data/errors/ by `python -m tpututor_course errors_page`: edit "
    "the entries (and their example files) there. -->",
    "page_title": "# Error atlas",
    "page_intro": "The TPU and XLA errors learners paste into a search box, each with what causes it, how to fix it "
    "and where the course teaches it. Every message is quoted as the versions under *Seen with* "
    "print it; `{gap}` marks a part that changes from run to run (a number, a path, a name). {cpu} "
    "of the {total} entries happen on a CPU too: each comes with the code that produces it and the "
    "code that fixes it, and `tests/test_errors.py` runs both, so a framework upgrade that rewords "
    "a message fails CI and the entry gets updated. {faked} more are produced by the framework's "
    "own code with its hardware check faked. The rest need a TPU (or a mismatched install) and "
    "cite their source.",
    "page_seen": '**Seen an error?** Paste it: `python -m tpututor doctor --explain "<the error text>"` (or '
    "`--explain -` to read it from standard input) finds the matching entries and prints the cause "
    "and the fix, on any machine with tpututor installed, Colab included.",
    "page_table": "| Entry | The message starts | Proof |",
    "silent": "Nothing is printed: this is the symptom.",
    "cause_label": "**Cause.**",
    "fix_label": "**Fix.**",
    "reproduce": "**Reproduce it** ({repro}; {check} `tests/test_errors.py`):",
    "asserted": "asserted by",
    "text_asserted": "its text asserted by",
    "fixed": "**Fixed:**",
    "in_course": "**In the course:** {where}. **Seen with:** {versions}. **Id:** `{id}`.",
    "hardware_note": "> **On a {hardware} (not checked here):** {note} {cited}",
    "cited": "Source: {ref}, read {read}.",
    "cited_also": " Also: {ref}, read {read}.",
}
_SHORT = {
    "cpu": "reproduced",
    "faked": "reproduced, faked input",
    "tpu": "needs a TPU; sourced",
    "gpu": "needs a GPU; sourced",
    "install": "needs another install; sourced",
}


def _words(lang: str) -> tuple[dict, dict, dict]:
    """(the words around the entries, REPRO, the page's short REPRO) in ``lang``."""
    if validate.language(lang) == "en":
        return _TEXT, REPRO, _SHORT
    catalogue = _catalogue(lang)
    return {**_TEXT, **catalogue["text"]}, {**REPRO, **catalogue["repro"]}, {**_SHORT, **catalogue["short"]}


# ------------------------------------------------------------------------------------ matching


class BadText(ValueError):
    """What was given to :func:`explain` is not error text (empty, binary, control characters)."""


@dataclass(frozen=True)
class Match:
    entry: Entry
    score: float  # 1.0: the quoted message is in the text; below 1: how much of it (or of the text) agrees
    exact: bool
    confident: bool = True  # False: only a nearby topic, the atlas does not hold this error (no cause claimed)
    lang: str = "en"  # the language of to_dict's prose (a key of LANGS)

    def to_dict(self) -> dict:
        """The match as JSON: in another language than English, with the quoted (English) ``message`` too."""
        entry = localized(self.entry, self.lang)
        out = {"id": entry.id, "title": entry.title}
        if self.lang != "en":
            out["message"] = entry.message
        out.update(
            score=round(self.score, 3),
            exact=self.exact,
            confident=self.confident,
            url=f"{ATLAS_URLS[self.lang]}#{entry.id}",
        )
        if self.confident:
            out.update(cause=entry.cause, fix=entry.fix, taught=where_taught(self.entry, self.lang))
        return out


def pieces(message: str) -> list[str]:
    """The fixed parts of a quoted message, between its GAPs."""
    return [part.strip() for part in message.split(GAP) if part.strip()]


def _squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def quoted_in(message: str, text: str, *, loose: bool = False) -> bool:
    """Whether ``text`` contains ``message``: every fixed part, in order (runs of whitespace count as one
    space). ``loose`` also ignores case, for text a learner pasted."""
    haystack = _squash(text)
    if loose:
        haystack = haystack.lower()
    at = 0
    for part in pieces(message):
        needle = _squash(part).lower() if loose else _squash(part)
        found = haystack.find(needle, at)
        if found < 0:
            return False
        at = found + len(needle)
    return True


_WINDOW = 20_000  # characters from the end of a pasted text that fuzzy matching reads (exact matching reads all)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)?")
_CAMEL = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_STOP = frozenset(
    """a an and are as at be been but by can could did do does for from had has have how i if in
into is it its me my of on or so than that the then there these this to too use used using was we were what
when where which while who why will with without you your error errors get got getting says said see seen
please try tried happens happened keep keeps""".split()
)


def _stem(word: str) -> str:
    for suffix in ("ing", "ed", "es", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def _word_tokens(word: str) -> set[str]:
    """A word and its parts (snake_case, CamelCase, a::b), lower case, stemmed, stop words dropped."""
    out = set()
    for part in {word} | set(word.split("_")) | set(word.split("::")) | set(_CAMEL.findall(word)):
        part = part.lower().strip("_:")
        if len(part) >= 2 and part not in _STOP:
            out.add(_stem(part))
    return out


def _tokens(text: str) -> set[str]:
    return set().union(*(_word_tokens(word) for word in _WORD.findall(text)))


@dataclass(frozen=True)
class _Index:
    messages: dict[str, list[set[str]]]  # entry id -> token set of each quoted text
    bags: dict[str, set[str]]  # entry id -> every token that points to it
    idf: dict[str, float]
    vocabulary: tuple[str, ...]


@lru_cache(maxsize=1)
def _index() -> _Index:
    messages = {e.id: [_tokens(m) for m in e.texts] for e in ENTRIES}
    bags = {e.id: set().union(*messages[e.id], _tokens(e.title), *(_tokens(k) for k in e.keywords)) for e in ENTRIES}
    df: dict[str, int] = {}
    for bag in bags.values():
        for token in bag:
            df[token] = df.get(token, 0) + 1
    idf = {t: math.log(1 + len(ENTRIES) / n) for t, n in df.items()}
    return _Index(messages, bags, idf, tuple(sorted(df)))


def _check(text: object) -> str:
    if not isinstance(text, str):
        raise BadText(f"expected the error text as a string, got {type(text).__name__}")
    text = _ANSI.sub("", text)
    if not text.strip():
        raise BadText(
            'nothing to explain: give the error text, e.g. doctor --explain "ValueError: ..." '
            "(or --explain - to read it from standard input)"
        )
    odd = sum(
        1 for ch in text if (ord(ch) < 32 and ch not in "\n\r\t") or 0xD800 <= ord(ch) <= 0xDFFF or ch in "\ufffd\x7f"
    )
    if "\x00" in text or odd > max(2, len(text) // 50):
        raise BadText(
            "this does not look like error text (binary data or control characters): copy the "
            "message itself, as the framework printed it"
        )
    if sum(ch.isalpha() for ch in text) < 3:
        raise BadText("this has no words to match: copy the message itself, as the framework printed it")
    return text


def explain(text: str, *, limit: int = 3, lang: str = "en") -> list[Match]:
    """The atlas entries that match a pasted error text, best first (an empty list when none does).

    An entry matches exactly when its quoted message is in the text; otherwise by how many of its
    message's words the text has, or how many of the text's words point to it (typos forgiven), so a
    paraphrase or a half-remembered message works too. Raises :class:`BadText` for empty or binary input.
    Matching reads English (the frameworks' language); ``lang`` (one of :data:`LANGS`, else ValueError)
    is the language of the matches' prose (``Match.to_dict``, :func:`format_matches`).
    """
    validate.language(lang)
    text = _check(text)
    index = _index()
    words = []  # per word of the text, the atlas tokens it stands for (a typo is read as its closest token)
    guesses = 200  # typo guesses are slow (difflib): enough for a pasted message, not for a whole log
    for word in dict.fromkeys(_WORD.findall(text[-_WINDOW:])):  # a traceback ends with its error
        known_tokens = set()
        for token in _word_tokens(word):
            if token in index.idf:
                known_tokens.add(token)
            elif len(token) >= 5 and guesses > 0:
                guesses -= 1
                known_tokens.update(difflib.get_close_matches(token, index.vocabulary, n=1, cutoff=0.85))
        if known_tokens:
            words.append(known_tokens)
    query = set().union(*words)
    known = sum(index.idf[t] for t in query)
    scored = []
    for entry in ENTRIES:
        if any(quoted_in(m, text, loose=True) for m in entry.texts):
            scored.append(Match(entry, 1.0, True, lang=lang))
            continue
        recall = max(
            sum(index.idf.get(t, 0) for t in tokens & query) / (sum(index.idf.get(t, 0) for t in tokens) or 1)
            for tokens in index.messages[entry.id]
        )
        bag = index.bags[entry.id]
        hit = sum(index.idf[t] for t in query & bag)
        agreeing = sum(1 for tokens in words if tokens & bag)
        coverage = hit / known if known and agreeing >= 2 else 0.0  # one word is not evidence
        evidence = min(1.0, hit / 7.0)  # two or three telling words, not two common ones
        score = min(0.99, max(recall, coverage * evidence))  # 1.0 is kept for the quoted message itself
        if score >= 0.45:
            scored.append(Match(entry, score, False, _confident(score, words, text), lang))
    scored.sort(key=lambda m: (not m.exact, not m.confident, -m.score, m.entry.id))
    if scored:
        best = scored[0].score
        scored = [m for m in scored if m.exact or m.score >= best - 0.2]
        if scored[0].exact or scored[0].confident:  # a nearby topic is not listed beside a real answer
            scored = [m for m in scored if m.exact or m.confident]
    return scored[:limit]


# A fuzzy match names a cause only when it is strong, when most of the text's words are words the atlas
# uses, and when the text names no exception class the atlas does not hold. Calibrated on the entries'
# own messages, paraphrases of them, and real messages the atlas does not hold
# (tests/data/explain_held_out.txt): on those, fuzzy scores reached 0.77, with up to 73% of the words
# unknown to the atlas, or a class of its own (TracerArrayConversionError scored 0.76 against
# TracerIntegerConversionError); paraphrases of entries scored 0.82 and above with at most 25% unknown.
CONFIDENT_SCORE = 0.75
MOST_UNKNOWN = 0.3
_EXCEPTION = re.compile(r"\b[A-Z][A-Za-z]*(?:Error|Exception)\b")


@lru_cache(maxsize=1)
def _atlas_exceptions() -> tuple[str, ...]:
    return tuple(sorted({name for e in ENTRIES for m in e.texts for name in _EXCEPTION.findall(m)}))


def _confident(score: float, words: list[set[str]], text: str) -> bool:
    """Whether a fuzzy match may claim the entry's cause (see CONFIDENT_SCORE)."""
    if score < CONFIDENT_SCORE:
        return False
    every = [t for t in (_word_tokens(w) for w in dict.fromkeys(_WORD.findall(text[-_WINDOW:]))) if t]
    if every and 1 - len(words) / len(every) > MOST_UNKNOWN:
        return False
    held = _atlas_exceptions()
    for name in set(_EXCEPTION.findall(text[-_WINDOW:])) - {"Error", "Exception"}:
        if not difflib.get_close_matches(name, held, n=1, cutoff=0.85):
            return False  # an exception the atlas does not hold (a typo of one it holds is forgiven)
    return True


# ------------------------------------------------------------------------------------ output


def _lesson_names() -> dict[str, tuple[str, str]]:
    """topic -> (number, title), from the lesson table shipped with the package."""
    from .lessons import table

    return {name.split("_", 1)[1]: (name.split("_", 1)[0], meta["title"]) for name, meta in table().items()}


def where_taught(entry: Entry, lang: str = "en") -> str:
    """'lesson 03b (Recompilation, and one compiler for three frameworks), section "Recompilation"', or the nearest lesson; in ``lang``."""
    text = _words(lang)[0]
    number, title = _lesson_names().get(entry.lesson, ("", entry.lesson.replace("_", " ")))
    if lang != "en":
        title = _catalogue(lang)["lessons"].get(entry.lesson, title)
    lesson = text["lesson"].format(number=number, title=title) if number else text["nearest_lesson"].format(title=title)
    taught = localized(entry, lang).taught
    return text["section"].format(lesson=lesson, taught=taught) if taught else text["not_taught"].format(lesson=lesson)


def _width(text: str) -> int:
    """Columns a terminal gives ``text``: two for a wide (East Asian) character."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _fill(text: str, width: int, initial_indent: str = "", subsequent_indent: str = "") -> str:
    """textwrap.fill by terminal columns, for text with wide characters (Korean): breaks at spaces only."""
    lines, line = [], initial_indent
    for word in text.split():
        if line.strip() and _width(line) + 1 + _width(word) > width:
            lines.append(line)
            line = subsequent_indent + word
        else:
            line += (" " if line.strip() else "") + word
    return "\n".join([*lines, line])


def format_matches(matches: list[Match], width: int = 100, *, lang: str | None = None) -> str:
    """Text for a terminal: each match's cause, fix and where the course teaches it; or where to look.
    ``lang`` (one of :data:`LANGS`) defaults to the matches' own (English when there are none); in another
    language than English each match also shows the quoted message, which stays in English."""
    lang = validate.language(lang) if lang is not None else (matches[0].lang if matches else "en")
    text, repro, _ = _words(lang)
    url = ATLAS_URLS[lang]
    if not any(m.exact or m.confident for m in matches):
        near = ""
        if matches:
            near = text["near"].format(
                topics="; ".join(f"{localized(m.entry, lang).title} ({url}#{m.entry.id})" for m in matches)
            )
        page = "docs/" + url.rsplit("/", 1)[1]
        if lang != "en":
            return _fill(text["no_match"].format(near=near, url=url, page=page), width)
        return textwrap.fill(
            text["no_match"].format(near=near, url=url, page=page),
            width,
            break_on_hyphens=False,
            break_long_words=False,
        )

    def para(label: str, body: str) -> str:
        label = text[label]
        indent = "   " + label + " " * max(0, 8 - _width(label))
        if lang != "en":
            return _fill(body, width, indent, " " * 11)
        return textwrap.fill(
            body,
            width,
            initial_indent=indent,
            subsequent_indent=" " * 11,
            break_on_hyphens=False,
            break_long_words=False,
        )

    out = [text["one_match"] if len(matches) == 1 else text["n_matches"].format(n=len(matches))]
    for n, m in enumerate(matches, 1):
        e = localized(m.entry, lang)
        how = text["exact"] if m.exact else text["fuzzy"].format(score=f"{m.score:.0%}")
        head = f"{n}. {e.framework}: {e.title} [{e.id}; {how}]"
        out += [
            "",
            textwrap.fill(head, width, subsequent_indent="   ") if lang == "en" else _fill(head, width, "", "   "),
        ]
        if lang != "en":
            out.append(para("message", e.message))
        out += [
            para("cause", e.cause),
            para("fix", e.fix),
            para("course", where_taught(m.entry, lang)),
            para("proof", repro[e.repro] + (text["source"].format(url=e.sources[0][1]) if e.sources else "")),
            para("more", f"{url}#{e.id}"),
        ]
    return "\n".join(out)


_GROUPS = ("JAX", "TPU runtime (libtpu)", "TensorFlow", "PyTorch/XLA")


def _note(entry: Entry, lang: str = "en") -> str:
    """The sourced part of an entry, in the course's note style when it is about a TPU or a GPU."""
    if not entry.sources:
        return ""
    text = _words(lang)[0]
    refs = [f"[{title}]({url})" for title, url in entry.sources]
    cited = text["cited"].format(ref=refs[0], read=entry.read) + "".join(
        text["cited_also"].format(ref=r, read=entry.read) for r in refs[1:]
    )
    if entry.hardware:
        return text["hardware_note"].format(hardware=entry.hardware, note=entry.note, cited=cited)
    return f"{entry.note} {cited}"


def render_page(lang: str = "en") -> str:
    """The atlas as a Markdown page, generated from :data:`ENTRIES`: ``docs/errors.md``, or with ``lang="ko"``
    ``docs/errors.ko.md`` (the prose in Korean, the quoted messages and the code as in English)."""
    text, repro, short = _words(lang)
    cpu = [e for e in ENTRIES if e.repro == "cpu"]
    faked = [e for e in ENTRIES if e.repro == "faked"]
    lines = [
        text["page_comment"],
        "",
        text["page_title"],
        "",
        text["page_intro"].format(gap=GAP, cpu=len(cpu), total=len(ENTRIES), faked=len(faked)),
        "",
        text["page_seen"],
        "",
        text["page_table"],
        "|---|---|---|",
    ]
    for e in sorted((localized(e, lang) for e in ENTRIES), key=lambda e: _GROUPS.index(e.framework)):
        start = e.message if len(e.message) <= 60 else e.message[:57].rsplit(" ", 1)[0] + " " + GAP
        start = start.replace("`", "'").replace("|", "\\|")
        lines.append(f"| [{e.title.replace('|', '/')}](#{e.id}) | `{start}` | {short[e.repro]} |")
    for group in _GROUPS:
        lines += ["", f"## {group}"]
        for original in [e for e in ENTRIES if e.framework == group]:
            e = localized(original, lang)
            lines += ["", f'<a id="{e.id}"></a>', "", f"### {e.title}", "", "```text", e.message, *e.variants, "```"]
            if e.silent:
                lines += ["", text["silent"]]
            for where, quoted in e.also:
                lines += ["", f"{where}:", "", "```text", quoted, "```"]
            lines += ["", f"{text['cause_label']} {e.cause}", "", f"{text['fix_label']} {e.fix}"]
            if e.example:
                check = text["asserted"] if e.repro == "cpu" else text["text_asserted"]
                lines += [
                    "",
                    text["reproduce"].format(repro=repro[e.repro], check=check),
                    "",
                    "```python",
                    e.example.rstrip(),
                    "```",
                ]
            if e.fixed:
                lines += ["", text["fixed"], "", "```python", e.fixed.rstrip(), "```"]
            lines += [
                "",
                text["in_course"].format(where=where_taught(original, lang), versions=", ".join(e.versions), id=e.id),
            ]
            note = _note(e, lang)
            if note:
                lines += ["", note]
    return "\n".join(lines) + "\n"
