"""`python -m tpututor_course run`: the course tooling executes lessons headless, as make run and CI call it."""

from __future__ import annotations

import subprocess

import pytest

from conftest import PYTHON, ROOT


def course_run(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "tpututor_course", "run", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )


def test_run_with_a_missing_notebook_exits_2_naming_it(tmp_path):
    out = course_run("--out", str(tmp_path), "notebooks/99_missing.ipynb")
    assert out.returncode == 2 and "99_missing" in out.stderr


def test_run_with_a_bad_profile_exits_2():
    assert course_run("--profile", "huge").returncode == 2


@pytest.mark.slow
def test_run_executes_writes_html_and_exits_1_when_a_lesson_fails(tmp_path):
    import nbformat

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    for name, source in (("01_ok", "print('fine')"), ("02_broken", "raise ValueError('planted failure')")):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, lessons / f"{name}.ipynb")
    out = course_run(
        "--profile",
        "ci",
        "--out",
        str(tmp_path / "build"),
        str(lessons / "01_ok.ipynb"),
        str(lessons / "02_broken.ipynb"),
    )
    assert out.returncode == 1
    table = out.stdout.split("lesson", 1)[1]
    assert "01_ok" in table and "02_broken  failed" in table and "ValueError: planted failure" in table
    assert (tmp_path / "build" / "01_ok.html").exists() and (tmp_path / "build" / "02_broken.ipynb").exists()


@pytest.mark.slow
def test_run_with_jobs_runs_lessons_side_by_side_and_reports_them_in_teaching_order(tmp_path):
    import nbformat

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    for name, source in (
        ("01_slow", "import time; time.sleep(3); print('slow')"),
        ("02_quick", "print('quick')"),
        ("03_broken", "raise ValueError('planted failure')"),
    ):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        nbformat.write(nb, lessons / f"{name}.ipynb")
    out = course_run(
        "--profile",
        "ci",
        "--no-html",
        "--jobs",
        "2",
        "--out",
        str(tmp_path / "build"),
        *(str(p) for p in sorted(lessons.glob("*.ipynb"))),
    )
    assert out.returncode == 1 and "2 at a time" in out.stdout
    table = out.stdout.split("lesson ", 1)[1].splitlines()
    assert [row.split()[0] for row in table[2:5]] == ["01_slow", "02_quick", "03_broken"]
    assert "03_broken  failed" in out.stdout
    assert sorted(p.name for p in (tmp_path / "build").glob("*.ipynb")) == [
        p.name for p in sorted(lessons.glob("*.ipynb"))
    ]
    assert course_run("--jobs", "0").returncode == 2


@pytest.mark.slow
def test_run_with_allow_skip_fails_when_a_lesson_it_did_not_name_is_skipped(tmp_path):
    import nbformat

    lessons = tmp_path / "lessons"
    lessons.mkdir()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('fine')")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lessons / "01_needs_more.ipynb")
    (lessons / "01_needs_more.md").write_text(
        "---\ntpututor:\n  title: Needs more\n  minutes: 1\n  needs:\n    imports: [no_such_framework_here]\n    note: a framework nobody has\n"
        "  objectives: [none]\n  prerequisites: []\n---\n\n# 01 · Needs more\n"
    )
    args = ("--profile", "ci", "--no-html", "--out", str(tmp_path / "build"), str(lessons / "01_needs_more.ipynb"))
    assert course_run(*args).returncode == 0  # a skip is not a failure by default
    out = course_run(*args, "--allow-skip", "05_tf_tpustrategy")
    assert out.returncode == 1 and "expected to run here: 01_needs_more" in out.stderr
    assert course_run(*args, "--allow-skip", "01_needs_more").returncode == 0
