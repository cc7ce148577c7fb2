"""The error atlas: every CPU entry still prints what it quotes and its fix makes it go away;
``doctor --explain`` finds entries from their messages, from paraphrases and from whole tracebacks."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import subprocess
import sys
import tomllib
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from tpututor import errors, lessons
from tpututor.errors import ENTRIES, explain, quoted_in
from tpututor.runtime import detect_accelerator

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
COLAB_PYTHON = ROOT / ".venv-colab" / "bin" / "python"
REPRODUCED = [e for e in ENTRIES if e.reproduced]
WITH_FIX = [e for e in REPRODUCED if e.fixed]
JAX_REPRODUCED = [e for e in REPRODUCED if e.framework == "JAX"]
ENV = {  # where each kind of example runs: on the CPU, whatever this machine has
    "JAX": {"JAX_PLATFORMS": "cpu"},
    "TPU runtime (libtpu)": {"JAX_PLATFORMS": "cpu"},  # the examples compile for a TPU with tpututor.aot
    "TensorFlow": {"TF_CPP_MIN_LOG_LEVEL": "2", "CUDA_VISIBLE_DEVICES": ""},
    "PyTorch/XLA": {"PJRT_DEVICE": "CPU", "TF_CPP_MIN_LOG_LEVEL": "2"},
}
# The examples are written for a fresh interpreter; sharing one, the JAX ones must not trip over each other's
# jax_num_cpu_devices = 8 (JAX 0.7.2 refuses even the same value once its backend has started).
PRELUDE = {
    "jax": """
import jax
jax.config.update("jax_num_cpu_devices", 8)
_update = jax.config.update
jax.config.update = lambda name, value: (None if name == "jax_num_cpu_devices" and value == 8
                                         else _update(name, value))
""",
    "tensorflow": "",
    "torch_xla": "",
}

# Runs many snippets in one interpreter, each in a fresh namespace; what each printed, warned or raised
# comes back as JSON. Used for the examples that do not need a fresh process (most of them).
DRIVER = r"""
import contextlib, io, json, sys, warnings
jobs = json.loads(sys.stdin.read())
exec(jobs.pop("__prelude__"), {})
results = {}
for key, code in jobs.items():
    buf = io.StringIO()
    with warnings.catch_warnings(record=True) as caught, contextlib.redirect_stdout(buf), \
            contextlib.redirect_stderr(buf):
        warnings.simplefilter("always")
        try:
            exec(compile(code, "<" + key + ">", "exec"), {"__name__": "__main__"})
            raised = None
        except BaseException as exc:
            raised = type(exc).__name__ + ": " + str(exc)
    text = buf.getvalue() + "".join(f"{w.category.__name__}: {w.message}\n" for w in caught) + (raised or "")
    results[key] = {"output": text, "failed": raised is not None, "rc": 1 if raised else 0}
print("@@RESULTS@@" + json.dumps(results))
"""


def _env(framework: str) -> dict[str, str]:
    return {**os.environ, **ENV.get(framework, {})}


def _shared(python: str, runner: str) -> dict[str, dict]:
    """Every example and fix of one runner, run in one interpreter: {"id:example": result, ...}."""
    entries = [e for e in REPRODUCED if e.runner == runner]
    jobs = {"__prelude__": PRELUDE[runner]}
    for e in entries:
        jobs[f"{e.id}:example"] = e.example
        if e.fixed:
            jobs[f"{e.id}:fixed"] = e.fixed
    out = subprocess.run(
        [python, "-c", DRIVER],
        input=json.dumps(jobs),
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=_env(entries[0].framework),
    )
    assert "@@RESULTS@@" in out.stdout, out.stderr[-3000:]
    return json.loads(out.stdout.split("@@RESULTS@@", 1)[1])


def _fresh(python: str, entry: errors.Entry, which: str) -> dict:
    """One example (or fix) in a fresh interpreter of its own."""
    out = subprocess.run(
        [python, "-c", getattr(entry, which)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=_env(entry.framework),
    )
    return {"output": out.stdout + out.stderr, "failed": out.returncode != 0, "rc": out.returncode}


# Every interpreter a python needs is started at its first use, two at a time: they mostly wait on imports,
# so the file takes about half its CPU time (the TensorFlow and torch_xla ones first: they are the slowest).
_POOL = ThreadPoolExecutor(max_workers=2)
_STARTED: dict[tuple[str, str], Future] = {}


def _start(python: str) -> None:
    if any(key[0] == python for key in _STARTED):
        return
    frameworks = ("PyTorch/XLA", "TensorFlow", "JAX", "TPU runtime (libtpu)") if python == str(PYTHON) else ("JAX",)
    for framework in frameworks:
        for runner in dict.fromkeys(e.runner for e in REPRODUCED if e.framework == framework):
            if runner != "process":
                _STARTED[(python, runner)] = _POOL.submit(_shared, python, runner)
        for e in REPRODUCED:
            if e.framework == framework and e.runner == "process":
                for which in ("example", "fixed") if e.fixed else ("example",):
                    _STARTED[(python, f"{e.id}:{which}")] = _POOL.submit(_fresh, python, e, which)


def run(entry: errors.Entry, which: str, python: Path | str = PYTHON) -> dict:
    """What ``entry.example`` (or ``.fixed``) printed: {"output", "failed", "rc"}."""
    python = str(python)
    _start(python)
    if entry.runner != "process":
        return _STARTED[(python, entry.runner)].result()[f"{entry.id}:{which}"]
    return _STARTED[(python, f"{entry.id}:{which}")].result()


def _needs_this_machine(entry: errors.Entry) -> None:
    if entry.id == "jax-no-tpu-backend" and detect_accelerator().kind == "tpu":
        pytest.skip("this machine has a TPU, so asking for one does not fail here")
    if "from tpututor import aot" in entry.example and importlib.util.find_spec("libtpu") is None:
        pytest.skip("the TPU compiler (libtpu) is not installed here: the example compiles for a TPU with it")


# ------------------------------------------------------------------ the entries themselves


def test_the_atlas_has_at_least_15_entries_with_unique_ids_and_the_must_haves():
    ids = [e.id for e in ENTRIES]
    assert len(ids) >= 15 and len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)+", i) for i in ids)
    must = {
        "tf-tpu-name",
        "tf-tpus-not-found",
        "jax-tracer-bool",
        "jax-sharding-type-matmul",
        "jax-resource-exhausted",
        "tpu-in-use",
        "libtpu-version-mismatch",
        "xla-cpu-fallback",
        "xla-recompiles",
        "xla-tf-before-torch-xla",
    }
    assert must <= set(ids)


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_each_entry_says_cause_fix_versions_and_the_lesson_that_teaches_it(entry):
    assert entry.framework in ("JAX", "TPU runtime (libtpu)", "TensorFlow", "PyTorch/XLA")
    assert entry.repro in errors.REPRO and entry.versions and entry.cause and entry.fix
    topics = {name.split("_", 1)[1] for name in lessons.names()}
    assert entry.lesson in topics, f"{entry.id}: no lesson with topic {entry.lesson!r}"
    assert errors.where_taught(entry).startswith(("lesson ", "not taught"))
    assert bool(entry.example) == entry.reproduced and (entry.runner != "") == entry.reproduced
    assert entry.runner in ("", "jax", "tensorflow", "torch_xla", "process")


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.taught], ids=lambda e: e.id)
def test_the_section_an_entry_names_is_a_heading_of_that_lesson(entry):
    [md] = (ROOT / "notebooks").glob(f"*_{entry.lesson}.md")
    headings = {
        re.sub(r"^\d+\.\s+", "", h).replace("`", "").strip() for h in re.findall(r"^## (.+)$", md.read_text(), re.M)
    }
    assert entry.taught in headings, f"{entry.id}: {md.name} has no section {entry.taught!r}: {sorted(headings)}"


@pytest.mark.parametrize("entry", [e for e in ENTRIES if e.repro != "cpu" or e.sources], ids=lambda e: e.id)
def test_what_is_not_reproduced_on_a_cpu_cites_a_dated_source(entry):
    assert entry.sources and entry.note, entry.id
    assert all(url.startswith("https://") for _, url in entry.sources)
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", entry.read)
    assert entry.hardware in ("", "TPU", "GPU") and (entry.repro != "tpu" or entry.hardware == "TPU")


# ------------------------------------------------------------------ the atlas as data

DATA = ROOT / "tpututor" / "data" / "errors"


def test_each_example_file_is_the_code_of_an_entry_and_each_fix_has_its_example():
    files = {p.name for p in (DATA / "examples").glob("*.py")}
    expected = {f"{e.id}.py" for e in ENTRIES if e.example} | {f"{e.id}.fixed.py" for e in ENTRIES if e.fixed}
    assert files == expected, f"no entry for {sorted(files - expected)}; missing {sorted(expected - files)}"
    for e in ENTRIES:
        assert e.example or not e.fixed, f"{e.id}: a fix without the example it fixes"
        for which, suffix in (("example", ""), ("fixed", ".fixed")):
            if getattr(e, which):  # read byte for byte: what the page shows is what the tests run
                assert getattr(e, which).encode() == (DATA / "examples" / f"{e.id}{suffix}.py").read_bytes()


def test_the_atlas_files_hold_one_framework_each_in_the_order_of_the_page():
    frameworks = [tomllib.loads(p.read_text(encoding="utf-8"))["framework"] for p in sorted(DATA.glob("*.toml"))]
    assert sorted(frameworks) == sorted(errors._GROUPS), "one atlas file per framework"
    order = [e.framework for e in ENTRIES]
    assert order == sorted(order, key=errors._GROUPS.index), "ENTRIES are grouped by framework, as on the page"


def test_an_unknown_field_in_an_atlas_file_is_an_error_naming_the_file_and_the_entry():
    with pytest.raises(ValueError, match=r"jax\.toml: entry 'jax-x' has unknown fields \['mesage'\]"):
        errors._entry({"id": "jax-x", "mesage": "typo"}, "JAX", "tpututor/data/errors/jax.toml")


def test_reading_the_atlas_and_every_example_imports_no_framework():
    code = (
        "import sys\nfrom tpututor import errors\n"
        "assert all(e.example or not e.reproduced for e in errors.ENTRIES) and errors.render_page('ko')\n"
        "print(sorted(m for m in ('jax', 'torch', 'torch_xla', 'tensorflow', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


# ------------------------------------------------------------ reproduced on this CPU


@pytest.mark.parametrize("entry", REPRODUCED, ids=lambda e: e.id)
def test_the_example_still_prints_the_message_the_atlas_quotes(entry):
    _needs_this_machine(entry)
    result = run(entry, "example")
    if entry.silent:  # nothing is printed: the example asserts the symptom itself
        assert not result["failed"], f"{entry.id}: the symptom is gone:\n{result['output'][-2000:]}"
    else:
        for text in (entry.message, *entry.variants):
            assert quoted_in(text, result["output"]), (
                f"{entry.id}: the message changed; update the entry.\nquoted:  {text}\nprinted: "
                f"{result['output'][-2000:]}"
            )


@pytest.mark.parametrize("entry", WITH_FIX, ids=lambda e: e.id)
def test_the_fix_makes_the_message_go_away(entry):
    _needs_this_machine(entry)
    result = run(entry, "fixed")
    assert not result["failed"], f"{entry.id}: the fix fails:\n{result['output'][-2000:]}"
    assert entry.silent or not any(quoted_in(text, result["output"]) for text in (entry.message, *entry.variants))


def test_tensorflow_before_torch_xla_aborts_the_process_with_status_134():
    result = run(errors.get("xla-tf-before-torch-xla"), "example")
    assert result["rc"] in (-6, 134), result  # SIGABRT: 134 in a shell, -6 from subprocess


@pytest.mark.parametrize("entry", [e for e in REPRODUCED if not e.silent], ids=lambda e: e.id)
def test_explain_finds_the_entry_from_the_whole_output_of_its_example(entry):
    _needs_this_machine(entry)
    output = run(entry, "example")["output"]
    found = explain(output)
    assert found and found[0].entry is entry, ([(m.entry.id, m.score, m.exact) for m in found], output[-3000:])


@pytest.mark.skipif(
    not COLAB_PYTHON.exists(), reason="no .venv-colab here (make colab builds it; make test does first)"
)
@pytest.mark.parametrize("entry", JAX_REPRODUCED, ids=lambda e: e.id)
def test_jax_entries_say_truly_whether_colabs_jax_prints_the_same(entry):
    seen = "jax 0.7.2" in entry.versions
    result = run(entry, "example", COLAB_PYTHON)
    if entry.silent:
        assert (not result["failed"]) == seen, result["output"][-1500:]
    else:
        assert quoted_in(entry.message, result["output"]) == seen, (
            f"{entry.id}: jax 0.7.2 {'no longer prints' if seen else 'prints'} the quoted message: fix "
            f"versions.\n{result['output'][-1500:]}"
        )
    for where, text in entry.also:
        if where.startswith("jax 0.7.2"):
            assert quoted_in(text, result["output"]), f"{entry.id}: jax 0.7.2 words it otherwise:\n{result['output']}"
    if entry.fixed and (seen or "0.7.2 too" in entry.fix):  # the fix must work where the atlas says it does
        fixed = run(entry, "fixed", COLAB_PYTHON)
        assert not fixed["failed"], f"{entry.id}: the fix fails under jax 0.7.2:\n{fixed['output'][-1500:]}"


# ------------------------------------------------------------------------ explain()


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_explain_finds_each_entry_from_its_own_message(entry):
    for text in entry.texts:
        found = explain(text.replace(errors.GAP, "42"))
        assert entry in [m.entry for m in found], (text, [m.entry.id for m in found])
    found = explain(entry.message)
    assert found[0].entry is entry and found[0].exact


PARAPHRASES = {
    "jax-tracer-bool": "jax jit fails when I use a python if statement on an array: boolean conversion of a tracer",
    "xla-recompiles": "pytorch xla keeps recompiling every step and training is slow",
    "tpu-in-use": "the TPU is already used by another process so JAX cannot get it",
    "xla-tf-before-torch-xla": "kernel died with LLVM error about CommandLine options after importing tensorflow",
    "jax-resource-exhausted": "out of memory on the TPU: my model does not fit in HBM",
    "tf-tpu-name": "TPUClusterResolver wants a TPU name",
    "jax-mesh-too-big": "make_mesh says number of devices must be at least the product of the mesh shape",
    "xla-cpu-fallback": "aten ops fall back to the CPU in torch_xla, op not lowered",
    "jax-concretisation-typo": "ConcretisationTypeError abstract tracer concrete value",
}


# Paraphrases too far from their entry to claim its cause: explain offers the entry as a nearby topic.
NEARBY_ONLY = {"xla-cpu-fallback"}


@pytest.mark.parametrize("expected,text", PARAPHRASES.items(), ids=list(PARAPHRASES))
def test_explain_finds_the_entry_from_a_paraphrase(expected, text):
    confident = expected not in NEARBY_ONLY
    expected = {"jax-concretisation-typo": "jax-concretization"}.get(expected, expected)
    found = explain(text)
    assert found and found[0].entry.id == expected, [(m.entry.id, round(m.score, 2)) for m in found]
    assert found[0].confident is confident


HELD_OUT = [
    line.split("\t#")[0]
    for line in (ROOT / "tests" / "data" / "explain_held_out.txt").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


def test_the_held_out_set_has_at_least_twenty_real_messages_the_atlas_does_not_hold():
    assert len(HELD_OUT) >= 20
    assert not [
        m for m in HELD_OUT if any(e.id for e in errors.ENTRIES if any(quoted_in(t, m, loose=True) for t in e.texts))
    ]


@pytest.mark.parametrize("text", HELD_OUT, ids=[m[:40] for m in HELD_OUT])
def test_explain_claims_no_cause_for_a_message_the_atlas_does_not_hold(text):
    found = explain(text)
    assert not [m.entry.id for m in found if m.exact or m.confident], [(m.entry.id, round(m.score, 2)) for m in found]
    assert all("cause" not in m.to_dict() for m in found)


def test_doctor_explain_answers_an_unknown_message_with_no_entry_and_nearby_topics_but_no_cause():
    out = _cli("--explain", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB")
    assert out.returncode == 1
    flat = " ".join(out.stdout.split())
    assert "No entry in the error atlas matches" in flat and "closest topics" in flat and "Cause:" not in flat


def test_explain_finds_the_error_at_the_end_of_a_long_noisy_log():
    noise = "\n".join(
        f"step {i}: loss 0.{i:04d} lr 3e-4 tokens_per_second {1000 + i} checkpoint_saved_to_bucket" for i in range(3000)
    )
    found = explain(
        noise + "\nTraceback (most recent call last):\nValueError: Please provide a TPU Name to connect to."
    )
    assert found and found[0].entry.id == "tf-tpu-name" and found[0].exact


@pytest.mark.parametrize(
    "text",
    [
        "hello world, the cat sat on the mat",
        "jax",
        "my code does not work",
        "Segmentation fault (core dumped) in my C++ game engine",
    ],
)
def test_explain_says_nothing_matches_for_unrelated_text(text):
    assert explain(text) == []


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   \n\t",
        "\x00\x01\x02\x03binary",
        "\udc80\udcff" * 20,
        "".join(chr(c) for c in range(1, 31)) * 4,
        "12345 !!! ...",
    ],
)
def test_explain_rejects_empty_or_binary_text_with_a_clear_message(text):
    with pytest.raises(errors.BadText, match="nothing to explain|does not look like error text|no words"):
        explain(text)


def test_quoted_in_needs_every_fixed_part_in_order():
    message = "Number of devices … must be >= the product of mesh_shape …"
    assert quoted_in(message, "ValueError: Number of devices 8 must be >= the product of mesh_shape (4, 4)")
    assert not quoted_in(message, "the product of mesh_shape (4, 4) ... Number of devices 8 must be >=")
    assert quoted_in(message, "NUMBER OF DEVICES 1 MUST BE >= THE PRODUCT\n OF MESH_SHAPE (2,)", loose=True)


# ------------------------------------------------------------------------ the command line


def _cli(*args: str | bytes, stdin: str | bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "tpututor", "doctor", *args],
        input=stdin,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
        text=not isinstance(stdin, bytes) and not any(isinstance(a, bytes) for a in args),
    )


def test_doctor_explain_prints_cause_fix_and_lesson_for_a_pasted_message():
    entry = errors.get("jax-sharding-type-matmul")
    out = _cli("--explain", "jax._src.core.ShardingTypeError: " + entry.message + " Got lhs_contracting_spec=")
    assert out.returncode == 0, out.stderr
    assert entry.id in out.stdout and "Cause:" in out.stdout and "Fix:" in out.stdout
    flat = " ".join(out.stdout.split())  # the text is wrapped for a terminal
    assert "out_sharding" in flat and errors.where_taught(entry) in flat and errors.ATLAS_URL in flat


def test_doctor_explain_with_no_match_says_so_points_to_the_atlas_and_exits_1():
    out = _cli("--explain", "hello world, the cat sat on the mat")
    assert out.returncode == 1 and "No entry in the error atlas matches" in out.stdout
    assert errors.ATLAS_URL in out.stdout


@pytest.mark.parametrize("bad", ["", "   ", pytest.param(b"\xff\xfe\x01\x02" * 30, id="binary")], ids=str)
def test_doctor_explain_with_empty_or_binary_text_exits_2_with_a_clear_message(bad):
    out = _cli("--explain", bad)
    err = out.stderr if isinstance(out.stderr, str) else out.stderr.decode()
    assert out.returncode == 2 and "error:" in err and ("nothing to explain" in err or "error text" in err)


def test_doctor_explain_reads_standard_input_and_prints_json():
    text = "Traceback (most recent call last):\n  ...\nValueError: Please provide a TPU Name to connect to.\n"
    out = _cli("--explain", "-", "--json", stdin=text)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout)
    assert found[0]["id"] == "tf-tpu-name" and found[0]["exact"] and "tpu='local'" in found[0]["fix"]


def test_doctor_explain_refuses_binary_standard_input():
    out = _cli("--explain", "-", stdin=b"\x00\x01\x02\xff\xfe" * 50)
    assert out.returncode == 2 and b"error text" in out.stderr


def test_doctor_explain_does_not_mix_with_preflight():
    out = _cli("--explain", "x", "--preflight")
    assert out.returncode == 2 and "--explain" in out.stderr


# ------------------------------------------------------------------------ the page


def test_docs_errors_md_is_generated_from_the_entries():
    page = ROOT / "docs" / "errors.md"
    assert page.read_text() == errors.render_page(), "docs/errors.md is stale: python -m tpututor_course errors_page"


def test_the_page_lists_every_entry_with_its_message_and_notes_in_the_course_style():
    page = errors.render_page()
    note = re.compile(
        r"^> \*\*On an? (TPU|GPU) \(not checked here\):\*\* .*Source: \[[^\]]+\]\(https://[^)]+\), "
        r"read \d{4}-\d{2}-\d{2}\.",
        re.M,
    )
    for e in ENTRIES:
        assert f'<a id="{e.id}"></a>' in page and e.message in page
    assert len(note.findall(page)) == sum(1 for e in ENTRIES if e.hardware)
    assert "Seen an error?" in page and "doctor --explain" in page


def test_the_atlas_url_follows_the_repository_setting():
    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["tpututor"]
    assert errors.ATLAS_URL == f"https://github.com/{settings['repository']}/blob/{settings['branch']}/docs/errors.md"


def test_the_course_command_writes_the_page_and_check_reports_a_stale_one(tmp_path):
    from tpututor_course import errors_page

    target = tmp_path / "errors.md"
    assert errors_page.main(["--out", str(target)]) == 0 and target.read_text() == errors.render_page()
    target.write_text("old\n")
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        assert errors_page.main(["--check", "--out", str(target)]) == 1
    assert sys.modules["tpututor.errors"] is errors


def test_every_entry_is_linked_from_the_lesson_that_teaches_it():
    from tpututor_course import catalog

    lessons = {lesson.topic: lesson.path.read_text() for lesson in catalog.lessons(ROOT / "notebooks")}
    unlinked = [e.id for e in errors.ENTRIES if f"{errors.ATLAS_URL}#{e.id})" not in lessons[e.lesson]]
    assert unlinked == [], "add them to the lesson's Further reading (see docs/writing_a_lesson.md)"


# ------------------------------------------------------------------------ the atlas in Korean

KO = tomllib.loads((ROOT / "tpututor" / "data" / "errors_ko.toml").read_text(encoding="utf-8"))
CODE_SPAN = re.compile(r"`[^`\n]+`")
NUMBER = re.compile(r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)*(?![A-Za-z0-9_]|\.\d)")  # "8개" is 8; "v5e", "0.7.2" as such
MONTHS = {
    name: str(n)
    for n, name in enumerate(
        (
            "January",
            "February",
            "March",
            "April",
            "May",
            "June",
            "July",
            "August",
            "September",
            "October",
            "November",
            "December",
        ),
        1,
    )
}
PROSE = ("title", "cause", "fix", "note")
HANGUL = re.compile("[가-힣]")


def _numbers(text: str) -> set[str]:
    return set(NUMBER.findall(CODE_SPAN.sub(" ", text)))


def _placeholders(template: str) -> list[str]:
    return sorted(re.findall(r"\{(\w+)", template))


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_every_entry_has_korean_title_cause_and_fix_and_the_korean_names_no_other_entry():
    assert set(KO["entries"]) == {e.id for e in ENTRIES}, "add or remove [entries.ID] in tpututor/data/errors_ko.toml"
    for e in ENTRIES:
        words = KO["entries"][e.id]
        assert set(words) <= {*PROSE, "taught", "also", "versions"}, f"{e.id}: unknown fields {set(words)}"
        for field in PROSE:
            english, korean = getattr(e, field), words.get(field, "")
            assert bool(korean) == bool(english), f"{e.id}: {field} is missing in Korean, or is Korean only"
            assert not korean or HANGUL.search(korean), f"{e.id}: the Korean {field} has no Korean in it"
        assert bool(words.get("taught")) == bool(e.taught), f"{e.id}: taught"
        assert len(words.get("also", [])) == len(e.also), f"{e.id}: one Korean label per `also` text"
        assert len(words.get("versions", e.versions)) == len(e.versions), f"{e.id}: one Korean item per version"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_the_korean_keeps_every_code_span_and_number_of_the_english(entry):
    korean = errors.localized(entry, "ko")
    pairs = (
        [(getattr(entry, f), getattr(korean, f)) for f in PROSE]
        + [(where, label) for (where, _), (label, _) in zip(entry.also, korean.also)]
        + list(zip(entry.versions, korean.versions))
    )
    for english, translated in pairs:
        assert Counter(CODE_SPAN.findall(translated)) == Counter(CODE_SPAN.findall(english)), (english, translated)
        months = {n for name, n in MONTHS.items() if re.search(rf"\b{name}\b", english)}  # "March 2025": 2025년 3월
        assert _numbers(translated) == _numbers(english) | months, (english, translated)
    assert korean.message == entry.message and korean.variants == entry.variants and korean.example == entry.example
    assert [text for _, text in korean.also] == [text for _, text in entry.also], "quoted texts stay in English"


def test_the_korean_atlas_writes_glossary_terms_as_fixed():
    from tpututor_course.translate import Glossary

    glossary = Glossary.load(ROOT, "ko")
    wrong = {
        f"{e.id}.{f}": glossary.violations(getattr(e, f), getattr(errors.localized(e, "ko"), f))
        for e in ENTRIES
        for f in PROSE
    }
    assert {k: v for k, v in wrong.items() if v} == {}, "see i18n/ko/glossary.tsv"


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_the_korean_lesson_title_and_section_are_those_of_the_korean_lesson(entry):
    [md] = (ROOT / "notebooks" / "ko").glob(f"*_{entry.lesson}.md")
    text = md.read_text(encoding="utf-8")
    title = re.search(r"^# \d+[a-z]? · (.+)$", text, re.M).group(1)
    assert KO["lessons"][entry.lesson] == title, f"[lessons] {entry.lesson} differs from {md.name}"
    taught = errors.localized(entry, "ko").taught
    if taught:
        headings = {re.sub(r"^\d+\.\s+", "", h).replace("`", "").strip() for h in re.findall(r"^## (.+)$", text, re.M)}
        assert taught in headings, f"{entry.id}: {md.name} has no section {taught!r}: {sorted(headings)}"
        assert errors.where_taught(entry, "ko") == f'레슨 {md.stem.split("_")[0]}({title}), "{taught}" 절'


def test_the_korean_words_around_the_entries_fill_the_same_places_as_the_english():
    english = errors._words("en")
    korean = errors._words("ko")
    for en_table, ko_table, name in zip(english, korean, ("text", "repro", "short")):
        assert set(KO[name]) == set(en_table), f"[{name}] in errors_ko.toml: keys differ from the English"
        for key, value in en_table.items():
            assert _placeholders(KO[name][key]) == _placeholders(value), f"[{name}] {key}: placeholders differ"
            assert HANGUL.search(ko_table[key]), f"[{name}] {key} is not in Korean"


def test_the_korean_atlas_url_is_the_korean_page_next_to_the_english_one():
    assert errors.ATLAS_URLS == {"en": errors.ATLAS_URL, "ko": errors.ATLAS_URL[: -len(".md")] + ".ko.md"}


@pytest.mark.parametrize("entry", ENTRIES, ids=lambda e: e.id)
def test_doctor_explain_lang_ko_answers_in_korean_with_the_english_message(entry):
    korean = errors.localized(entry, "ko")
    out = _cli("--explain", entry.message, "--lang", "ko")
    assert out.returncode == 0, out.stderr
    flat = _flat(out.stdout)
    assert flat.startswith("오류 아틀라스에서 일치하는 항목") and f"[{entry.id}; 메시지가 일치함]" in flat
    for text in (korean.title, korean.cause, korean.fix, errors.where_taught(entry, "ko"), entry.message):
        assert _flat(text) in flat, text
    assert f"{errors.ATLAS_URLS['ko']}#{entry.id}" in flat and "Cause:" not in flat
    found = json.loads(_cli("--explain", entry.message, "--lang", "ko", "--json").stdout)
    assert found[0] == {
        "id": entry.id,
        "title": korean.title,
        "message": entry.message,
        "score": 1.0,
        "exact": True,
        "confident": True,
        "url": f"{errors.ATLAS_URLS['ko']}#{entry.id}",
        "cause": korean.cause,
        "fix": korean.fix,
        "taught": errors.where_taught(entry, "ko"),
    }


def test_doctor_explain_lang_ko_with_no_match_says_so_in_korean_and_points_to_the_korean_atlas():
    out = _cli("--explain", "hello world, the cat sat on the mat", "--lang", "ko")
    assert out.returncode == 1 and "일치하는 항목이 없습니다" in out.stdout and errors.ATLAS_URLS["ko"] in out.stdout


@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_doctor_explain_in_english_is_what_it_was_with_or_without_lang_en(as_json):
    text = "jax._src.core.ShardingTypeError: " + errors.get("jax-sharding-type-matmul").message
    flags = ["--json"] if as_json else []
    default, english = _cli("--explain", text, *flags), _cli("--explain", text, *flags, "--lang", "en")
    assert default.returncode == english.returncode == 0 and default.stdout == english.stdout
    matches = explain(text)
    expected = json.dumps([m.to_dict() for m in matches], indent=2) if as_json else errors.format_matches(matches)
    assert default.stdout == expected + "\n" and not HANGUL.search(default.stdout)


def test_doctor_explain_refuses_an_unknown_language_naming_the_choices():
    out = _cli("--explain", "x", "--lang", "fr")
    assert out.returncode == 2 and re.search(r"invalid choice: 'fr' \(choose from '?en'?, '?ko'?\)", out.stderr)
    out = _cli("--lang", "ko")
    assert out.returncode == 2 and "--lang goes with --explain" in out.stderr


@pytest.mark.parametrize(
    "call",
    [
        lambda: explain("RuntimeError: x", lang="fr"),
        lambda: errors.format_matches([], lang="fr"),
        lambda: errors.render_page("fr"),
        lambda: errors.where_taught(ENTRIES[0], "fr"),
        lambda: errors.localized(ENTRIES[0], "fr"),
    ],
    ids=["explain", "format_matches", "render_page", "where_taught", "localized"],
)
def test_the_api_refuses_an_unknown_language_naming_the_choices(call):
    with pytest.raises(ValueError, match="unknown language 'fr'; choose one of en, ko"):
        call()


def test_docs_errors_ko_md_is_generated_from_the_entries_and_their_korean():
    page = ROOT / "docs" / "errors.ko.md"
    assert page.read_text(encoding="utf-8") == errors.render_page("ko"), (
        "docs/errors.ko.md is stale: python -m tpututor_course errors_page"
    )


def test_the_korean_page_lists_every_entry_with_its_english_message_and_korean_notes():
    page = errors.render_page("ko")
    note = re.compile(
        r"^> \*\*(TPU|GPU)에서는 \(여기서 확인하지 않음\):\*\* .*출처: \[[^\]]+\]\(https://[^)]+\), "
        r"\d{4}-\d{2}-\d{2}에 읽음\.",
        re.M,
    )
    for e in ENTRIES:
        korean = errors.localized(e, "ko")
        assert f'<a id="{e.id}"></a>' in page and e.message in page and f"### {korean.title}\n" in page
        assert f"**원인.** {korean.cause}" in page and f"**해결.** {korean.fix}" in page
    assert len(note.findall(page)) == sum(1 for e in ENTRIES if e.hardware)
    assert page.startswith("<!--") and "\n# 오류 아틀라스\n" in page and "--lang ko" in page


def test_the_course_command_writes_and_checks_both_pages(tmp_path):
    from tpututor_course import errors_page

    target = tmp_path / "errors.ko.md"
    assert errors_page.main(["--lang", "ko", "--out", str(target)]) == 0
    assert target.read_text(encoding="utf-8") == errors.render_page("ko")
    with contextlib.redirect_stdout(open(os.devnull, "w")):
        assert errors_page.main(["--check"]) == 0  # docs/errors.md and docs/errors.ko.md of this clone
    target.write_text("old\n")
    with contextlib.redirect_stderr(open(os.devnull, "w")):
        assert errors_page.main(["--check", "--lang", "ko", "--out", str(target)]) == 1
    assert errors_page.page_path(ROOT, "ko") == ROOT / "docs" / "errors.ko.md"
