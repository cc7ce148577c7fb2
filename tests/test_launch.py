"""One-click launch: headings, badges, cards and setup cells stamped from one setting and the
front matter; install plans per lesson; releases (the pins: tests/test_pins.py)."""

from __future__ import annotations

import json
import os
import re
import shutil

import pytest

from conftest import CATALOG, LESSONS, ROOT, run_python
from conftest import LESSON_IDS as IDS
from tpututor import fakes, launch, lessons
from tpututor_course import catalog, release, stamp

SETTINGS = stamp.settings(ROOT / "pyproject.toml")
EVERYONE = catalog.by_topic(CATALOG)


@pytest.mark.parametrize("lesson", CATALOG, ids=IDS)
def test_every_lesson_is_stamped_from_its_front_matter_and_the_repository_setting(lesson):
    text = lesson.path.read_text()
    assert stamp.stamp_text(text, lesson, EVERYONE, SETTINGS) == text, "run make badges"
    assert stamp.card(lesson, EVERYONE) in text and f"# {lesson.heading}\n" in text


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_badges_point_at_this_lesson_in_the_configured_repository(md):
    s = SETTINGS
    block = stamp.badges(md.stem, s)
    assert block in md.read_text()
    for url in re.findall(r"\]\((https://[^)]+)\)", block):
        if "badge" not in url and not url.endswith(".svg"):
            assert s.repository in url and md.stem in url and s.branch in url


@pytest.mark.parametrize("lesson", CATALOG, ids=IDS)
def test_every_lesson_has_the_same_setup_cell_and_the_colab_runtime_its_front_matter_names(lesson):
    nb = json.loads(lesson.notebook.read_text())
    setup = [c for c in nb["cells"] if "setup" in c.get("metadata", {}).get("tags", [])]
    assert len(setup) == 1
    assert "".join(setup[0]["source"]) == launch.SETUP_CELL.format(requirement=SETTINGS.requirement, lesson=lesson.stem)
    if lesson.colab == "cpu":
        assert "accelerator" not in nb["metadata"] and "colab" not in nb["metadata"]
    else:
        assert nb["metadata"]["accelerator"] == "TPU" and nb["metadata"]["colab"]["gpuType"] == "V5E1"


def test_the_setup_cell_installs_a_pinned_release_never_a_bare_upgrade():
    cell = launch.SETUP_CELL.format(requirement=SETTINGS.requirement, lesson="00a_where_am_i")
    assert "@v" + SETTINGS.version in cell and " -U" not in cell and "--upgrade" not in cell


def test_a_fork_changes_one_line(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    text = (
        (tmp_path / "pyproject.toml")
        .read_text()
        .replace('repository = "tpututor/tpututor"', 'repository = "someone/tpu-fork"')
    )
    (tmp_path / "pyproject.toml").write_text(text)
    s = stamp.settings(tmp_path / "pyproject.toml")
    block = stamp.badges("00a_where_am_i", s)
    assert block.count("someone/tpu-fork") == 3 and "tpututor/tpututor" not in block
    assert s.requirement == f"tpututor @ git+https://github.com/someone/tpu-fork@v{s.version}"


@pytest.mark.parametrize("value", ["not a repo", "a/b/c", ""])
def test_a_malformed_repository_setting_is_a_clear_error(tmp_path, value):
    (tmp_path / "pyproject.toml").write_text(f'[project]\nversion = "1"\n[tool.tpututor]\nrepository = "{value}"\n')
    with pytest.raises(ValueError, match="owner/name"):
        stamp.settings(tmp_path / "pyproject.toml")


def test_a_missing_setting_names_the_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nversion = "1"\n')
    with pytest.raises(KeyError, match=r"\[tool.tpututor\] repository"):
        stamp.settings(tmp_path / "pyproject.toml")


def test_readme_lesson_table_is_generated_from_the_lessons():
    table = stamp.lesson_table(CATALOG, SETTINGS)
    assert table in (ROOT / "README.md").read_text(), "run make badges"
    assert all(stem in table for stem in IDS) and " ? |" not in table


PROFILING = next(stem for stem, entry in launch.lessons.table().items() if "xprof" in entry["optional"])


@pytest.mark.parametrize(
    "machine, lesson, installed, expected",
    [
        ("colab-v5e-1", PROFILING, [], ["xprof==2.24.2"]),  # only what this lesson imports
        ("colab-v5e-1", PROFILING, ["xprof"], None),
        ("kaggle-v5e-8", PROFILING, [], ["xprof==2.24.2"]),
        ("colab-cpu", "00a_where_am_i", [], None),  # lesson 00a (where am I running?) imports no add-on
        ("laptop-cpu", PROFILING, [], None),  # never on your own machine: make lab installed everything
        ("tpu-vm-v6e-8", PROFILING, [], None),
    ],
)
def test_install_plan_on_faked_runtimes(fake, machine, lesson, installed, expected):
    plan = launch.install_plan(lesson, fake(machine), installed=installed)
    if expected is None:
        assert plan is None
    else:
        assert plan[1:5] == ["-m", "pip", "install", "--quiet"]
        jax = fakes.MACHINES[machine].packages.get("jax")
        assert plan[5:] == expected + ([f"jax=={jax}", f"jaxlib=={jax}"] if jax else [])  # the runtime's JAX stays
        assert not any(arg in ("-U", "--upgrade") for arg in plan)


def test_setup_installs_the_plan_records_the_lesson_then_reports_the_machine(fake, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None)  # nothing installed
    monkeypatch.setattr(launch, "lacking", lambda lesson: {})  # ... until the plan installed it
    monkeypatch.delenv(launch.LESSON_ENV, raising=False)
    assert launch.setup(PROFILING, fake("colab-cpu"), run=lambda cmd, check: calls.append(cmd)) is None  # shown once
    assert calls and "xprof==2.24.2" in calls[0]
    assert __import__("os").environ[launch.LESSON_ENV] == PROFILING
    installing, line, *needs = capsys.readouterr().out.splitlines()
    assert installing == "installing: xprof==2.24.2"
    assert line.startswith("tpututor ") and "colab" in line and "Runtime > Change runtime type > TPU" in line
    assert not needs  # the lesson's frameworks import here


def _plant_broken(root, name: str) -> None:
    """A package called ``name`` that raises on import, as a mismatched install does."""
    parts = name.split(".")
    for level in range(len(parts)):
        root.joinpath(*parts[: level + 1]).mkdir(exist_ok=True)
        root.joinpath(*parts[: level + 1], "__init__.py").write_text("")
    root.joinpath(*parts, "__init__.py").write_text("raise ImportError('planted: built for another version')\n")


@pytest.mark.slow
@pytest.mark.parametrize(
    "lesson, name", [(lesson, name) for lesson in lessons.names() for name in lessons.imports(lesson)]
)
def test_a_framework_that_fails_to_import_counts_as_missing_for_every_lesson_that_needs_it(tmp_path, lesson, name):
    _plant_broken(tmp_path, name)
    out = run_python(
        f"from tpututor import launch; print(launch.lacking({lesson!r}))",
        env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{ROOT}"},
    )
    lacking = eval(out)  # a dict of names and reasons
    assert name in lacking and "planted: built for another version" in lacking[name]  # (and what builds on it)


@pytest.mark.slow
def test_a_broken_torch_xla_stops_lesson_04_at_setup_with_a_message_not_a_traceback(tmp_path, monkeypatch):
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    _plant_broken(tmp_path, "torch_xla")
    cells = [
        nbformat.v4.new_code_cell('from tpututor import launch\nlaunch.setup("04a_pytorch_xla")'),
        nbformat.v4.new_code_cell("import torch_xla\nprint('a later cell ran')"),
    ]
    notebook = nbformat.v4.new_notebook(
        cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3"}}
    )
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{ROOT}")  # the kernel inherits it
    with pytest.raises(CellExecutionError):
        NotebookClient(notebook, timeout=300, kernel_name="python3").execute(cwd=str(ROOT))
    error = [o for o in notebook.cells[0].outputs if o.output_type == "error"][0]
    shown = "\n".join(error.traceback)
    assert shown.startswith("This lesson needs torch_xla") and "planted: built for another version" in shown
    assert "Traceback" not in shown and "File " not in shown and "launch.py" not in shown
    assert not notebook.cells[1].outputs  # nothing after the setup cell ran


def test_setup_does_nothing_on_a_local_machine_but_report(fake, capsys):
    calls = []
    launch.setup("00a_where_am_i", fake("tpu-vm-v4-8"), run=lambda cmd, check: calls.append(cmd))
    line = capsys.readouterr().out
    assert calls == [] and "TPU v4 x4" in line and "Change runtime" not in line


def test_setup_names_the_known_lessons_when_given_an_unknown_one(fake):
    with pytest.raises(KeyError, match="00a_where_am_i"):
        launch.setup("99_nothing", fake("laptop-cpu"))


def test_release_is_ready_when_everything_that_names_it_agrees():
    assert release.problems(ROOT) == []


def test_release_lists_each_disagreement_with_its_fix(tmp_path):
    import shutil

    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "notebooks", tmp_path / "notebooks")
    (tmp_path / "tpututor" / "data").mkdir(parents=True)
    text = (tmp_path / "pyproject.toml").read_text().replace('version = "', 'version = "9.', 1)
    (tmp_path / "pyproject.toml").write_text(text)
    found = release.problems(tmp_path)
    assert any("tpututor.__version__" in p for p in found)
    assert any("setup cell" in p or "not stamped" in p for p in found)
    assert any("lessons.json" in p for p in found)
