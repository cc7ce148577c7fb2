"""A broken framework is a missing framework: bench, the lessons' loader, the doctor and the
pre-flight all treat an installed framework that fails to import like an absent one, quoting why.

Each test plants a package of the framework's name that raises on import (as a torch_xla built
for another torch, or a tensorflow-tpu whose libtpu conflicts with JAX's, does) ahead of the real
one on PYTHONPATH, in a fresh interpreter.
"""

from __future__ import annotations

import json

import pytest

from conftest import run_python
from tpututor import frameworks

BROKEN = ("jax", "tensorflow", "torch", "torch_xla")


@pytest.fixture
def broken(tmp_path):
    def plant(name: str) -> dict:
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text(f"raise ImportError('planted: {name} was built for another runtime')\n")
        return {"PYTHONPATH": str(tmp_path), "PJRT_DEVICE": "CPU"}

    return plant


@pytest.mark.parametrize("name", BROKEN)
def test_a_broken_framework_is_skipped_everywhere_with_its_import_error(name, broken):
    out = run_python(
        f"""
        import json
        from tpututor import bench, frameworks, preflight, runtime
        from tpututor import fakes
        module = frameworks.load({name!r})
        status = frameworks.status({name!r})
        try:
            bench.run("matmul", 8, "float32", {name!r}, repeats=1)
            timed = "ran"
        except bench.UnsupportedError as exc:
            timed = str(exc)
        probe = runtime.probe_frameworks([{name!r}], timeout=120)[{name!r}]
        lesson = next(s for s, e in preflight.lessons.table().items() if {name!r} in e["imports"] + e["optional"])
        checks = preflight.run(probes={{{name!r}: probe}}, lesson=lesson, disk_free_gb=lambda: 50.0)
        line = next(c for c in checks if c.name == {name!r})
        print(json.dumps({{"module": module is None, "usable": status.usable, "skipped": status.skipped("the section"),
                          "available": frameworks.available([{name!r}]), "timed": timed,
                          "probe": probe.get("error", ""), "check": [line.status, line.detail]}}))
    """,
        env=broken(name),
        timeout=300,
    )
    doc = json.loads(out.strip().splitlines()[-1])
    assert doc["module"] and not doc["usable"] and doc["available"] == []
    assert "planted" in doc["skipped"] and doc["skipped"].endswith("the section is skipped")
    assert "planted" in doc["timed"] and "skipped" in doc["timed"]
    assert "planted" in doc["probe"]
    assert doc["check"][0] in ("warn", "fail") and "does not start" in doc["check"][1]


def test_a_missing_framework_says_not_installed():
    status = frameworks.Status("tensorflow", None, "not installed")
    assert (
        status.skipped("the TensorFlow section")
        == "tensorflow is not installed here: the TensorFlow section is skipped"
    )


def test_a_module_is_found_under_a_distribution_of_another_name():
    """Lesson 11a (operations) imports google.cloud.tpu_v2, which the google-cloud-tpu distribution installs."""
    from importlib.metadata import version

    pytest.importorskip("google.cloud.tpu_v2")
    assert frameworks.status("google.cloud.tpu_v2").version == version("google-cloud-tpu")


def test_a_working_framework_loads_and_is_remembered():
    assert frameworks.load("numpy") is __import__("numpy") and frameworks.status("numpy").usable


def test_lessons_take_optional_frameworks_through_the_loader():
    """No lesson imports an optional TensorFlow, torch or torch_xla itself: it asks
    tpututor.frameworks (or runs it in a subprocess), so a broken install skips a section."""
    import ast

    import jupytext

    from conftest import CATALOG

    for lesson in CATALOG:
        optional = set(lesson.optional) & {"tensorflow", "torch", "torch_xla"}
        for cell in (c for c in jupytext.read(lesson.path).cells if c.cell_type == "code"):
            try:
                body = ast.parse(cell.source).body
            except SyntaxError:  # IPython syntax (%pip): the setup cell
                continue
            for node in (n for top in body for n in ast.walk(top)):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
                )
                bare = [n for n in names if n in optional]  # submodules, once load() worked, are fine
                assert not bare, (
                    f"{lesson.stem}: `import {bare[0]}` in a cell; an optional framework "
                    f"comes from frameworks.load({bare[0].split('.')[0]!r})"
                )
