"""One-click launch: badges and setup cells from one setting, install plans, Binder pins."""

from __future__ import annotations

import json
import re
import shutil

import pytest

from conftest import LESSON_IDS as IDS, LESSONS, NOTEBOOKS, ROOT
from tpututor import launch



def pins(path):
    out = {}
    for line in path.read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==([^\s#]+)", line)
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_every_lesson_is_stamped_from_the_repository_setting(md):
    text = md.read_text()
    assert launch.stamp_text(text, md.stem, launch.settings()) == text, "run make badges"


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_badges_point_at_this_lesson_in_the_configured_repository(md):
    s = launch.settings()
    block = launch.badges(md.stem, s)
    assert block in md.read_text()
    for url in re.findall(r"\]\((https://[^)]+)\)", block):
        if "badge" not in url and not url.endswith(".svg"):
            assert s.repository in url and md.stem in url and s.branch in url


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_every_lesson_has_the_same_setup_cell_and_colab_tpu_metadata(md):
    nb = json.loads(md.with_suffix(".ipynb").read_text())
    setup = [c for c in nb["cells"] if "setup" in c.get("metadata", {}).get("tags", [])]
    assert len(setup) == 1
    assert "".join(setup[0]["source"]) == launch.SETUP_CELL.format(requirement=launch.settings().requirement)
    if md.stem in launch.CPU_RUNTIME_LESSONS:
        assert "accelerator" not in nb["metadata"] and "colab" not in nb["metadata"]
    else:
        assert nb["metadata"]["accelerator"] == "TPU" and nb["metadata"]["colab"]["gpuType"] == "V5E1"


def test_the_setup_cell_installs_a_pinned_release_never_a_bare_upgrade():
    cell = launch.SETUP_CELL.format(requirement=launch.settings().requirement)
    assert "@v" + launch.settings().version in cell and " -U" not in cell and "--upgrade" not in cell


def test_a_fork_changes_one_line(tmp_path):
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    text = (tmp_path / "pyproject.toml").read_text().replace('repository = "tpututor/tpututor"',
                                                             'repository = "someone/tpu-fork"')
    (tmp_path / "pyproject.toml").write_text(text)
    s = launch.settings(tmp_path / "pyproject.toml")
    block = launch.badges("00_where_am_i", s)
    assert block.count("someone/tpu-fork") == 3 and "tpututor/tpututor" not in block
    assert s.requirement == f"tpututor @ git+https://github.com/someone/tpu-fork@v{s.version}"


@pytest.mark.parametrize("value", ["not a repo", "a/b/c", ""])
def test_a_malformed_repository_setting_is_a_clear_error(tmp_path, value):
    (tmp_path / "pyproject.toml").write_text(f'[project]\nversion = "1"\n[tool.tpututor]\nrepository = "{value}"\n')
    with pytest.raises(ValueError, match="owner/name"):
        launch.settings(tmp_path / "pyproject.toml")


def test_a_missing_setting_names_the_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nversion = "1"\n')
    with pytest.raises(KeyError, match=r"\[tool.tpututor\] repository"):
        launch.settings(tmp_path / "pyproject.toml")


def test_readme_lesson_table_is_generated_from_the_lessons():
    table = launch.lesson_table(NOTEBOOKS, launch.settings())
    assert table in (ROOT / "README.md").read_text(), "run make badges"
    assert all(stem in table for stem in IDS) and " ? |" not in table


@pytest.mark.parametrize("machine, installed, expected", [
    ("colab-v5e-1", ["transformers"], ["xprof==2.24.2"]),
    ("colab-t4", [], ["xprof==2.24.2", "transformers==5.24.0"]),
    ("kaggle-v5e-8", ["transformers"], ["xprof==2.24.2"]),
    ("colab-cpu", ["transformers", "xprof"], None),
    ("laptop-cpu", [], None),
    ("tpu-vm-v6e-8", [], None),
])
def test_install_plan_on_faked_runtimes(fake, machine, installed, expected):
    plan = launch.install_plan(fake(machine), installed=installed)
    if expected is None:
        assert plan is None
    else:
        assert plan[1:5] == ["-m", "pip", "install", "--quiet"] and plan[5:] == expected
        assert not any(arg in ("-U", "--upgrade") for arg in plan)


def test_setup_installs_the_plan_then_reports_the_machine_with_a_hint(fake, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None)  # nothing installed
    assert launch.setup(fake("colab-cpu"), run=lambda cmd, check: calls.append(cmd)) is None  # shown once
    assert calls and calls[0][5:] == list(launch.ADDONS.values())
    installing, line = capsys.readouterr().out.splitlines()
    assert installing.startswith("installing: xprof==2.24.2")
    assert line.startswith("tpututor ") and "colab" in line and "Runtime > Change runtime type > TPU" in line


def test_setup_does_nothing_on_a_local_machine_but_report(fake, capsys):
    calls = []
    launch.setup(fake("tpu-vm-v4-8"), run=lambda cmd, check: calls.append(cmd))
    line = capsys.readouterr().out
    assert calls == [] and "TPU v4 x4" in line and "Change runtime" not in line


def test_addon_pins_agree_with_the_lock():
    lock = pins(ROOT / "constraints.txt")
    for requirement in launch.ADDONS.values():
        name, version = requirement.split("==")
        assert lock[name] == version, f"{name}: {version} in tpututor.launch, {lock[name]} in constraints.txt"


def test_binder_pins_agree_with_the_lock():
    lock, binder = pins(ROOT / "constraints.txt"), pins(ROOT / "binder" / "requirements.txt")
    assert binder, "binder/requirements.txt pins nothing"
    for name, version in binder.items():
        assert lock.get(name) == version, f"{name}: {version} in binder, {lock.get(name)} in constraints.txt"
    assert "torch" not in binder and "pip install --no-cache-dir --no-deps -e ." in (ROOT / "binder" / "postBuild").read_text()
