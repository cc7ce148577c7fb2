"""Workshop kit: the student build, progress per lesson, the pre-flight, the instructor guide."""

from __future__ import annotations

import ast
import json
import subprocess

import nbformat
import pytest

from conftest import CATALOG, NOTEBOOKS, PYTHON, ROOT, least_exercises
from conftest import LESSONS as LESSON_MDS
from tpututor import check, exercises, fakes, lessons, preflight
from tpututor_course import catalog, runner, student, workshop

LESSONS = runner.discover(NOTEBOOKS)

# ----------------------------------------------------------------- student build


def test_stub_replaces_answers_and_keeps_signatures():
    source = 'import math\nx = 2 * 3\na, b = 1, 2\ndef f(n):\n    """Say n."""\n    return n + 1\nprint(x)\n'
    stub = student.stub_source(source)
    ast.parse(stub)
    assert stub.splitlines() == [
        student.STUB_HEADER,
        "import math",
        "x = ...",
        "(a, b) = ...",
        "def f(n):",
        '    """Say n."""',
        "    ...  # your code here",
    ]


def test_a_stubbed_function_returns_none_so_checks_say_not_attempted(monkeypatch):
    namespace = {}
    exec(student.stub_source("def bucket(n):\n    return 8\n"), namespace)
    monkeypatch.setattr(check, "RESULTS", [])
    assert namespace["bucket"](3) is None and not check.attempted(namespace["bucket"](3))


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_student_notebook_has_no_worked_answer_left(path):
    nb = nbformat.read(path, as_version=4)
    st = student.student_notebook(nb)
    solutions = [c for c in nb.cells if "solution" in c.metadata.get("tags", [])]
    stubs = [c for c in st.cells if "exercise" in c.metadata.get("tags", [])]
    assert len(stubs) == len(solutions) >= least_exercises(path.stem)
    hidden = path.stem in exercises.lessons()  # the lesson itself holds stubs already
    for sol, stub in zip(solutions, stubs):
        assert stub.source.startswith("# Your answer") and (hidden or stub.source != sol.source)
        assert "= ..." in stub.source or "...  # your code here" in stub.source
    text = "\n".join(c.source for c in st.cells)
    assert student.ANSWERS_NOTE not in text and (student.HIDDEN_NOTE if hidden else student.STUDENT_NOTE) in text
    assert not any(c.get("outputs") for c in st.cells if c.cell_type == "code")


def test_every_lesson_says_the_answers_note_once():
    for md in LESSON_MDS:
        note = student.HIDDEN_NOTE if md.stem in exercises.lessons() else student.ANSWERS_NOTE
        assert md.read_text().count(note) == 1, md.name


def test_build_writes_every_lesson_and_refuses_a_lesson_without_exercises(tmp_path):
    written = student.build(NOTEBOOKS, out=tmp_path / "student")
    assert [p.name for p in written] == [p.name for p in LESSONS]
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "00_x.md").write_text(
        "---\ntpututor:\n  title: X\n  minutes: 5\n  objectives: [x]\n  needs: {note: a CPU}\n---\n# 00 · X\n"
    )
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), bare / "00_x.ipynb")
    with pytest.raises(ValueError, match="no cell tagged solution"):
        student.build(bare, tmp_path / "out")


def test_rehearsal_forgets_the_answer_runs_the_stub_and_records_the_verdict(monkeypatch, capsys):
    class Shell:  # what rehearse() uses of IPython's shell
        user_ns = {"check": check, "answer": 42, "helper": len}

        @staticmethod
        def transform_cell(source):
            return source

    monkeypatch.setattr(check, "RESULTS", [])
    monkeypatch.setenv(check.STRICT_ENV, "1")
    pairs = [
        {"solution": "answer = 6 * 7", "check": "check.equal('e1', answer, 42, hint='h')"},
        {"solution": "def helper(x):\n    return x", "check": "check.that('e2', lambda: helper(1) == 1, hint='h')"},
        {"solution": "for k in range(3):\n    pass", "check": "check.equal('e3', k, 2, hint='h')"},
        {
            "solution": "def helper(x):\n    return x",
            "check": "check.that('e4', lambda: helper(1) == 1, hint='h', answer=helper)",
        },
    ]
    verdicts = student.rehearse(Shell, __import__("json").dumps(pairs))
    assert verdicts[0]["statuses"] == ["not attempted"] and verdicts[0]["error"] is None
    assert verdicts[1]["statuses"] == ["failed"]  # the stub returns None: without answer= it says FAILED
    assert verdicts[2]["error"].startswith("NameError")  # k is gone in the student build
    assert verdicts[3]["statuses"] == ["not attempted"]  # answer= names the stub: NOT ATTEMPTED
    assert __import__("os").environ[check.STRICT_ENV] == "1"  # restored
    assert capsys.readouterr().out.startswith(student.REHEARSAL_MARK)


def test_bound_names_are_what_a_cell_assigns_defines_and_loops_over():
    assert student.bound_names(
        "a, (b, *c) = f()\nd: int = 1\ne += 1\ndef g(): pass\nclass H: pass\n"
        "for i, j in x: pass\nwith open(p) as fh: pass\nimport os\nprint(z)\n"
    ) == ["a", "b", "c", "d", "e", "g", "H", "i", "j", "fh"]


# ----------------------------------------------------------------- progress


def test_progress_groups_the_latest_result_per_exercise_by_lesson(monkeypatch, capsys):
    monkeypatch.delenv(check.STRICT_ENV, raising=False)
    monkeypatch.setattr(check, "RESULTS", [])
    check.equal("00.1 a", 1, 1, hint="h")
    check.equal("00.2 b", ..., 1, hint="h")
    check.equal("01.1 c", 2, 1, hint="h")
    check.equal("01.1 c", 1, 1, hint="h")
    assert check.progress() == {
        "00": {"passed": 1, "failed": 0, "not attempted": 1},
        "01": {"passed": 1, "failed": 0, "not attempted": 0},
    }
    capsys.readouterr()
    assert check.report() is None  # printed, not returned: a notebook cell shows it once
    text = capsys.readouterr().out.strip()
    assert text.splitlines()[1].split() == ["00", "1", "0", "1"] and text == check.report_text()


def test_report_with_nothing_checked_says_so(monkeypatch):
    monkeypatch.setattr(check, "RESULTS", [])
    assert "no exercise checked yet" in check.report_text()


# ----------------------------------------------------------------- pre-flight


@pytest.mark.slow
def test_preflight_passes_here():
    out = subprocess.run(
        [PYTHON, "-m", "tpututor", "doctor", "--preflight"], capture_output=True, text=True, timeout=600, cwd=ROOT
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("READY for the workshop")
    assert "FAIL" not in out.stdout and "WARN" not in out.stdout  # the course environment has everything


def no_clone():
    return None


def test_preflight_fails_on_a_broken_machine_with_a_fix_per_failure(fake):
    broken = fakes.Machine(
        "a broken laptop",
        packages={"jax": "0.10.2", "torch-xla": "2.9.0"},
        files={"/proc/meminfo": "MemTotal: 2000000 kB\nMemAvailable: 1048576 kB\n"},
    )
    probes = {
        "jax": {"error": "ImportError: libstdc++.so.6: version `GLIBCXX_3.4.30' not found"},
        "torch_xla": {"error": "undefined symbol: _ZN5torch8autograd"},
    }
    checks = preflight.run(fake(broken), probes=probes, disk_free_gb=lambda: 0.5, clone=no_clone)
    by_name = {c.name: c for c in checks}
    assert by_name["jax"].status == "fail" and "reinstall" in by_name["jax"].fix
    assert by_name["devices"].status == "fail" and "did not start" in by_name["devices"].detail
    assert by_name["disk"].status == "fail" and "2 GiB" in by_name["disk"].fix
    assert by_name["memory"].status == "fail" and "1.0 GiB" in by_name["memory"].detail
    assert by_name["lessons"].status == "warn" and "git clone" in by_name["lessons"].fix
    assert by_name["tensorflow"].status == "warn" and by_name["torch_xla"].status == "warn"
    text = preflight.format_checks(checks)
    assert "NOT READY: 4 check(s) block the workshop" in text
    assert all(f"fix: {c.fix}" in text for c in checks if c.status == "fail")


def test_preflight_never_says_ok_about_devices_when_jax_did_not_start(fake):
    probes = {"jax": {"error": "RuntimeError: Unable to initialize backend 'tpu'"}}
    checks = preflight.run(fake("tpu-vm-v6e-8"), probes=probes, disk_free_gb=lambda: 50.0, clone=no_clone)
    devices = next(c for c in checks if c.name == "devices")
    assert devices.status == "fail" and "JAX did not start" in devices.detail
    assert not any(c.status == "ok" and "sees" in c.detail and c.name in ("jax", "devices") for c in checks)


def test_preflight_catches_tpu_chips_that_jax_cannot_see(fake):
    probes = {"jax": {"devices": ["cpu:0"], "platform": "cpu"}}
    checks = preflight.run(fake("tpu-no-libtpu"), probes=probes, disk_free_gb=lambda: 50.0, clone=no_clone)
    devices = next(c for c in checks if c.name == "devices")
    assert devices.status == "fail" and devices.fix == "pip install 'jax[tpu]'"


def test_preflight_without_jax_fails_naming_the_install(fake):
    checks = preflight.run(
        fake(fakes.Machine("empty", packages={})), probes={}, disk_free_gb=lambda: 50.0, clone=no_clone
    )
    jax_check = next(c for c in checks if c.name == "jax")
    assert jax_check.status == "fail" and "tpututor[jax]" in jax_check.fix
    assert next(c for c in checks if c.name == "memory").status == "warn"  # no /proc/meminfo on this fake


def test_preflight_on_colab_checks_the_open_lesson_not_a_clone(fake):
    machine = fakes.Machine(
        "Colab after a lesson's setup cell",
        env={**fakes.MACHINES["colab-v5e-1"].env, "TPUTUTOR_LESSON": "00a_where_am_i"},
        modules=["google.colab"],
        pci=fakes.MACHINES["colab-v5e-1"].pci,
        dev=fakes.MACHINES["colab-v5e-1"].dev,
        packages=fakes.COLAB_TPU_PACKAGES,
        files={"/proc/meminfo": "MemAvailable: 40000000 kB\n"},
    )
    probes = {
        "jax": {"devices": ["tpu:0"], "platform": "tpu", "device_kind": "TPU v5 lite"},
        "torch": {"devices": ["cpu"], "platform": "cpu"},
        "torch_xla": {"devices": ["TPU:0"], "platform": "tpu"},
    }
    checks = preflight.run(fake(machine), probes=probes, disk_free_gb=lambda: 50.0, clone=no_clone)
    by_name = {c.name: c for c in checks}
    assert by_name["lesson"].status == "ok" and "Where am I running?" in by_name["lesson"].detail
    assert by_name["jax"].status == "ok" and by_name["devices"].status == "ok"
    assert by_name["tensorflow"].status == "warn"  # Colab's TPU runtime has none: a section skips
    assert "READY for the workshop" in preflight.format_checks(checks).splitlines()[-1]


def test_preflight_for_a_lesson_requires_its_imports(fake):
    probes = {"jax": {"devices": ["cpu:0"], "platform": "cpu"}}
    lesson = next(stem for stem, e in lessons.table().items() if "torch_xla" in e["imports"])
    checks = preflight.run(fake("laptop-cpu"), probes=probes, disk_free_gb=lambda: 50.0, lesson=lesson, clone=no_clone)
    assert next(c for c in checks if c.name == "torch_xla").status == "fail"
    unknown = preflight.run(fake("laptop-cpu"), probes=probes, lesson="99_nothing", clone=no_clone)
    assert unknown[-1].status == "fail" and "choose one of" in unknown[-1].fix


# ----------------------------------------------------------------- instructor guide


def test_every_lesson_declares_what_the_guide_needs():
    assert [lesson.stem for lesson in CATALOG] == [p.stem for p in LESSONS]
    for lesson in CATALOG:
        assert lesson.objectives and lesson.minutes and lesson.note, lesson.stem
        assert lesson.runtime.startswith(("CPU is enough", "TPU"))


def test_the_estimating_rule_counts_prose_cells_code_and_exercises(tmp_path):
    lesson = tmp_path / "00_x.md"
    words = " ".join(["word"] * 300)
    lesson.write_text(
        "---\ntpututor:\n  title: X\n  minutes: 5\n---\n\n# 00 · X\n\n"
        + words
        + " [a link](https://example.com/a/long/address)\n\n```{code-cell} ipython3\n"
        + "# Setup (the same cell in every lesson): ...\nimport tpututor\n```\n\n```{code-cell} ipython3\n"
        + "\n".join(f"x{i} = {i}" for i in range(58))
        + '\ncheck.that("00.1 x", ok)\n```\n\n```python\nnot = "counted"\n```\n'
    )
    found = catalog.estimate(lesson)
    assert (found.words, found.code_cells, found.code_lines, found.exercises) == (305, 2, 59, 1)
    # 300 words, 3 in the heading, 2 in the link's text (not its address); 305/150 + 2 x 0.5 + 59/30 + 8 = 13.0 minutes, rounded to 15
    assert found.minutes == 15


def test_each_lessons_minutes_follow_the_estimating_rule():
    off = {lesson.stem: (lesson.minutes, catalog.estimate(lesson.path).minutes) for lesson in CATALOG}
    off = {stem: pair for stem, pair in off.items() if abs(pair[0] - pair[1]) > 0.15 * pair[1]}
    assert not off, (
        "(stated, estimated) minutes that disagree by over 15% (docs/writing_a_lesson.md: set "
        f"minutes to the estimate, then make badges): {off}"
    )


SITTING_MINUTES = 60


def test_each_lesson_fits_one_sitting():
    """docs/writing_a_lesson.md: at most 60 minutes, stated and by the estimating rule; a longer
    subject is split into parts (issue 31)."""
    minutes = {lesson.stem: (lesson.minutes, catalog.estimate(lesson.path).minutes) for lesson in CATALOG}
    long = {stem: pair for stem, pair in minutes.items() if max(pair) > SITTING_MINUTES}
    assert not long, f"(stated, estimated) minutes over a sitting: split into parts (docs/writing_a_lesson.md): {long}"


def test_the_shipped_lesson_table_matches_the_front_matter():
    from tpututor_course import stamp

    assert (ROOT / "tpututor" / "data" / "lessons.json").read_text() == stamp.lessons_json(CATALOG), "make badges"
    assert lessons.names() == [lesson.stem for lesson in CATALOG]


def test_guide_timings_come_from_real_runs_of_every_lesson_in_both_profiles():
    timings = json.loads((ROOT / "docs" / "timings.json").read_text())
    for profile in ("ci", "full"):
        run = timings[profile]
        assert run["profile"] == profile and run["machine"] and run["date"]
        assert set(run["lessons"]) == {p.stem for p in LESSONS}, f"run make workshop ({profile})"
        assert all(v["status"] == "ok" and v["seconds"] > 0 for v in run["lessons"].values())


def test_guide_is_in_sync_with_the_lessons_and_the_timings():
    timings = json.loads((ROOT / "docs" / "timings.json").read_text())
    expected = workshop.guide(CATALOG, timings)
    assert (ROOT / "docs" / "workshop.md").read_text() == expected, "run python -m tpututor_course workshop"


def test_the_korean_guide_is_in_sync_with_the_korean_lessons_and_the_timings():
    timings = json.loads((ROOT / "docs" / "timings.json").read_text())
    korean = catalog.lessons(NOTEBOOKS / "ko")
    assert [lesson.stem for lesson in korean] == [lesson.stem for lesson in CATALOG], "run make translations"
    expected = workshop.guide(korean, timings, "ko")
    assert (ROOT / "docs" / "workshop.ko.md").read_text() == expected, (
        "run python -m tpututor_course workshop (after make translations)"
    )
    for lesson in korean:  # the Korean titles and objectives, from the Korean front matter
        assert f"### {lesson.heading}" in expected and all(f"  - {goal}" in expected for goal in lesson.objectives)


def test_every_translated_guide_says_every_situation_and_runtime_in_its_language():
    situations = {m.description for m in fakes.MACHINES.values()} | {
        "a Cloud TPU VM where JAX starts on the CPU",
        "torch_xla beside a torch it was not built for",
        "a TPU type in the environment but no chip visible",
    }
    for lang, text in workshop.TEXT.items():
        assert text.keys() == workshop.TEXT["en"].keys(), lang
        assert text["runtime"].keys() == catalog.DEVICES.keys(), lang
        assert len(text["more_failures"]) == len(workshop.TEXT["en"]["more_failures"]), lang
        if lang != "en":
            assert not situations - text["situations"].keys(), (
                f"workshop.TEXT[{lang!r}]['situations'] lacks a translation of {situations - text['situations'].keys()}"
            )


def test_agendas_fit_their_day_and_the_whole_course_covers_every_lesson():
    text = (ROOT / "docs" / "workshop.md").read_text()
    half = text.split("### Half day")[1].split("###")[0]
    last = [line for line in half.splitlines() if line.startswith("| 1")][-1]
    assert last.split("|")[1].strip() <= "12:30" and "wrap-up" in last
    full = text.split("### Full day")[1].split("###")[0]
    assert "lunch" in full and "break" in full
    whole = text.split("### The whole course")[1].split("## Lessons")[0]
    assert all(lesson.heading in whole for lesson in CATALOG) and "Left for another day" not in whole
    for day in whole.split("**Day ")[1:]:
        times = [line.split("|")[1].strip() for line in day.splitlines() if line.startswith("| ")][2:]
        assert times[-1] <= "17:00", day
        assert "break" in day or len(times) <= 3, f"a long day without a break: {day}"
    assert "## Common failures and their fixes" in text


def test_an_update_replaces_only_the_lessons_it_timed_dates_them_and_refuses_another_machine():
    record = {
        "profile": "ci",
        "machine": "m",
        "date": "2026-12-01",
        "lessons": {
            "00_a": {"status": "ok", "seconds": 1.0},
            "01_gone": {"status": "ok", "seconds": 2.0},
            "02_b": {"status": "ok", "seconds": 3.0},
        },
    }
    run = {
        "profile": "ci",
        "machine": "m",
        "date": "2026-12-05",
        "lessons": {"02_b": {"status": "ok", "seconds": 4.0}, "01a_c": {"status": "ok", "seconds": 5.0}},
    }
    out = workshop.merged(record, run, {"00_a", "01a_c", "02_b"})
    assert out["date"] == "2026-12-01" and list(out["lessons"]) == ["00_a", "01a_c", "02_b"]
    assert out["lessons"]["00_a"] == {"status": "ok", "seconds": 1.0}
    assert out["lessons"]["02_b"] == {"status": "ok", "seconds": 4.0, "date": "2026-12-05"}
    with pytest.raises(ValueError, match="make workshop"):
        workshop.merged(record, {**run, "machine": "other"}, {"00_a"})
