"""Workshop kit: the student build, progress per lesson, the pre-flight, the instructor guide."""

from __future__ import annotations

import ast
import json
import subprocess

import nbformat
import pytest

from conftest import LESSONS as LESSON_MDS, NOTEBOOKS, PYTHON, ROOT
from tpututor import check, fakes, preflight, runner, student, workshop

LESSONS = runner.discover()

# ----------------------------------------------------------------- student build


def test_stub_replaces_answers_and_keeps_signatures():
    source = 'import math\nx = 2 * 3\na, b = 1, 2\ndef f(n):\n    """Say n."""\n    return n + 1\nprint(x)\n'
    stub = student.stub_source(source)
    ast.parse(stub)
    assert stub.splitlines() == [student.STUB_HEADER, "import math", "x = ...", "(a, b) = ...",
                                 "def f(n):", '    """Say n."""', "    ...  # your code here"]


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
    assert len(stubs) == len(solutions) >= 2
    for sol, stub in zip(solutions, stubs):
        assert stub.source.startswith(student.STUB_HEADER) and stub.source != sol.source
        assert "= ..." in stub.source or "...  # your code here" in stub.source
    text = "\n".join(c.source for c in st.cells)
    assert student.ANSWERS_NOTE not in text and student.STUDENT_NOTE in text
    assert not any(c.get("outputs") for c in st.cells if c.cell_type == "code")


def test_every_lesson_says_the_answers_note_once():
    for md in LESSON_MDS:
        assert md.read_text().count(student.ANSWERS_NOTE) == 1, md.name


def test_build_writes_every_lesson_and_refuses_a_lesson_without_exercises(tmp_path):
    written = student.build(out=tmp_path / "student")
    assert [p.name for p in written] == [p.name for p in LESSONS]
    bare = tmp_path / "bare"
    bare.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")]), bare / "01_x.ipynb")
    with pytest.raises(ValueError, match="no cell tagged solution"):
        student.build(bare, tmp_path / "out")


@pytest.mark.slow
@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.stem)
def test_student_notebook_runs_top_to_bottom_with_exercises_not_attempted(path, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    nbformat.write(student.student_notebook(nbformat.read(path, as_version=4)), src / path.name)
    result = runner.execute(src / path.name, tmp_path / "out", profile="ci")
    assert result.status == "ok", result.error
    outputs = [o.get("text", "") for c in nbformat.read(result.output, as_version=4).cells for o in c.get("outputs", [])]
    lines = [line for text in outputs for line in text.splitlines()]
    assert any(line.startswith("NOT ATTEMPTED ") for line in lines)
    assert not any(line.startswith(("PASSED ", "FAILED ")) for line in lines)


# ----------------------------------------------------------------- progress


def test_progress_groups_the_latest_result_per_exercise_by_lesson(monkeypatch, capsys):
    monkeypatch.delenv(check.STRICT_ENV, raising=False)
    monkeypatch.setattr(check, "RESULTS", [])
    check.equal("00.1 a", 1, 1, hint="h")
    check.equal("00.2 b", ..., 1, hint="h")
    check.equal("01.1 c", 2, 1, hint="h")
    check.equal("01.1 c", 1, 1, hint="h")
    assert check.progress() == {"00": {"passed": 1, "failed": 0, "not attempted": 1},
                                "01": {"passed": 1, "failed": 0, "not attempted": 0}}
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
    out = subprocess.run([PYTHON, "-m", "tpututor", "doctor", "--preflight"], capture_output=True, text=True,
                         timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("READY for the workshop")


def test_preflight_fails_on_a_broken_machine_with_a_fix_per_failure(fake, tmp_path):
    broken = fakes.Machine("a broken laptop", packages={"jax": "0.10.2", "torch-xla": "2.9.0"},
                           files={"/proc/meminfo": "MemTotal: 2000000 kB\nMemAvailable: 1048576 kB\n"})
    probes = {"jax": {"error": "ImportError: libstdc++.so.6: version `GLIBCXX_3.4.30' not found"},
              "torch_xla": {"error": "undefined symbol: _ZN5torch8autograd"}}
    checks = preflight.run(fake(broken), probes=probes, disk_free_gb=lambda: 0.5, notebooks=tmp_path / "none")
    by_name = {c.name: c for c in checks}
    assert by_name["jax"].status == "fail" and "reinstall" in by_name["jax"].fix
    assert by_name["disk"].status == "fail" and "2 GiB" in by_name["disk"].fix
    assert by_name["memory"].status == "fail" and "1.0 GiB" in by_name["memory"].detail
    assert by_name["notebooks"].status == "fail" and "git clone" in by_name["notebooks"].fix
    assert by_name["tensorflow"].status == "warn" and by_name["torch_xla"].status == "warn"
    text = preflight.format_checks(checks)
    assert "NOT READY: 4 check(s) block the workshop" in text
    assert all(f"fix: {c.fix}" in text for c in checks if c.status == "fail")


def test_preflight_catches_tpu_chips_that_jax_cannot_see(fake):
    probes = {"jax": {"devices": ["cpu:0"], "platform": "cpu"}}
    checks = preflight.run(fake("tpu-no-libtpu"), probes=probes, disk_free_gb=lambda: 50.0, notebooks=NOTEBOOKS)
    devices = next(c for c in checks if c.name == "devices")
    assert devices.status == "fail" and devices.fix == "pip install 'jax[tpu]'"


def test_preflight_without_jax_fails_naming_the_install(fake):
    checks = preflight.run(fake(fakes.Machine("empty", packages={})), probes={}, disk_free_gb=lambda: 50.0,
                           notebooks=NOTEBOOKS)
    jax_check = next(c for c in checks if c.name == "jax")
    assert jax_check.status == "fail" and "tpututor[jax]" in jax_check.fix
    assert next(c for c in checks if c.name == "memory").status == "warn"  # no /proc/meminfo on this fake


# ----------------------------------------------------------------- instructor guide


def test_every_lesson_declares_what_the_guide_needs():
    lessons = workshop.read_lessons()
    assert [lesson.stem for lesson in lessons] == [p.stem for p in LESSONS]
    for lesson in lessons:
        assert lesson.objectives and lesson.minutes and lesson.needs != "?", lesson.stem
        assert lesson.runtime.startswith(("CPU is enough", "TPU slice needed"))


def test_guide_timings_come_from_real_runs_of_every_lesson_in_both_profiles():
    timings = json.loads((ROOT / "docs" / "timings.json").read_text())
    for profile in ("ci", "full"):
        run = timings[profile]
        assert run["profile"] == profile and run["machine"] and run["date"]
        assert set(run["lessons"]) == {p.stem for p in LESSONS}, f"run make workshop ({profile})"
        assert all(v["status"] == "ok" and v["seconds"] > 0 for v in run["lessons"].values())


def test_guide_is_in_sync_with_the_lessons_and_the_timings():
    timings = json.loads((ROOT / "docs" / "timings.json").read_text())
    expected = workshop.guide(workshop.read_lessons(), timings)
    assert (ROOT / "docs" / "workshop.md").read_text() == expected, "run python -m tpututor.workshop"


def test_agendas_fit_their_day():
    text = (ROOT / "docs" / "workshop.md").read_text()
    half = text.split("### Half day")[1].split("###")[0]
    last = [line for line in half.splitlines() if line.startswith("| 1")][-1]
    assert last.split("|")[1].strip() <= "12:30" and "wrap-up" in last
    assert "### Full day" in text and "## Common failures and their fixes" in text
