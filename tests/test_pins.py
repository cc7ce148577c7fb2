"""One pins file, tpututor/data/pins.toml: what reads it, what is generated from it, and the one check
that keeps constraints.txt, pyproject.toml and the generated requirement files in step with it."""

from __future__ import annotations

import shutil

import pytest

from conftest import ROOT
from tpututor import fakes, launch
from tpututor_course import device, pins

PINS = pins.read(ROOT)


def test_every_pin_agrees_with_the_lock_the_extras_and_the_generated_files():
    assert pins.problems(ROOT) == [], "edit tpututor/data/pins.toml, then run make pins"


def test_the_check_command_passes_on_this_clone():
    assert pins.main(["--check", "--root", str(ROOT)]) == 0


def test_the_setup_cell_pins_colabs_jax_stack_at_colabs_versions_and_the_rest_at_the_lock():
    colab, lock = PINS["colab"], PINS["lock"]
    for module, name in PINS["addons"].items():
        expected = colab["packages"][name] if name in colab["jax-stack"] else lock[name]
        assert launch.ADDONS[module] == f"{name}=={expected}"
    assert launch.ADDONS["flax"] == f"flax=={colab['packages']['flax']}" != f"flax=={lock['flax']}"


def test_the_colab_stand_in_and_the_gpu_image_are_read_from_the_pins_file():
    assert fakes.COLAB_TPU_PACKAGES == PINS["colab"]["packages"]
    assert fakes.colab_requirements()[0] == f"jax=={PINS['colab']['packages']['jax']}"
    assert "torch==2.9.0" in fakes.colab_requirements()  # PyPI's torch: Colab's +cpu wheel is not there
    assert device.IMAGE == tuple(f"{n}=={v}" for n, v in PINS["device"].items())


def test_binder_installs_no_torch_and_postbuild_adds_tpututor_without_dependencies():
    assert "torch" not in PINS["binder"]["packages"]
    assert "pip install --no-cache-dir --no-deps -e ." in (ROOT / "binder" / "postBuild").read_text()


@pytest.fixture
def clone(tmp_path):
    """The files the pins check reads, copied into ``tmp_path``."""
    for name in ("pyproject.toml", "constraints.txt", "binder", f"tpututor/{launch.PINS}"):
        source, target = ROOT / name, tmp_path / name
        target.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    assert pins.problems(tmp_path) == []
    return tmp_path


def _edit(path, old, new):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "change, file, old, new, said",
    [
        ("the lock moved", "constraints.txt", "\nxprof==2.24.2\n", "\nxprof==2.25.0\n", "xprof: 2.24.2"),
        ("a new extra", "pyproject.toml", '"polib>=1.2",', '"polib>=1.2", "rich>=13",', "requires rich"),
        ("a pin in pyproject", "pyproject.toml", '"torch==2.9.0",', '"torch==2.9.1",', "torch: 2.9.1"),
        ("an unpinned add-on", f"tpututor/{launch.PINS}", 'grain = "grain"', 'rich = "rich"', "installs rich"),
        ("binder edited by hand", pins.BINDER, "\nkeras==3.15.1\n", "\nkeras==3.16.0\n", "requirements.txt is stale"),
        ("a maxtext pin changed", f"tpututor/{launch.PINS}", 'qwix = "0.1.8"', 'qwix = "0.1.9"', "maxtext-req"),
    ],
)
def test_the_check_names_each_disagreement_and_exits_1(clone, capsys, change, file, old, new, said):
    _edit(clone / file, old, new)
    assert any(said in problem for problem in pins.problems(clone)), change
    assert pins.main(["--check", "--root", str(clone)]) == 1
    assert said in capsys.readouterr().err


def test_the_command_rewrites_a_stale_generated_file_from_the_pins_file(clone):
    _edit(clone / f"tpututor/{launch.PINS}", 'qwix = "0.1.8"', 'qwix = "0.1.9"')
    (clone / pins.BINDER).write_text("jax==0.0.1\n")
    assert pins.main(["--root", str(clone)]) == 0
    assert "\nqwix==0.1.9\n" in (clone / pins.MAXTEXT).read_text()
    assert (clone / pins.BINDER).read_text() == (ROOT / pins.BINDER).read_text()
