"""The package itself: imports no framework, profiles, exercise checks."""

from __future__ import annotations

import subprocess

import pytest

from conftest import PYTHON
from tpututor import check, choose
from tpututor import run_profile as profile

HEAVY = ("jax", "jaxlib", "tensorflow", "torch", "torch_xla", "numpy", "matplotlib", "papermill")
# Modules that exist to use a framework and import it at their top, like any reader expects.
FRAMEWORK_MODULES = (
    "tpututor.aot",
    "tpututor.models.llama",
    "tpututor.models.checkpoint",
    "tpututor.models.dit",
    "tpututor.serving.prefix",
    "tpututor.serving.speculative",
    "tpututor.serving.kvquant",
    "tpututor.serving.decode",
    "tpututor.serving.batching",
    "tpututor.serving.int8",
    "tpututor.serving.paged",
    "tpututor.serving.sharding",
    "tpututor.lm",
)


def test_import_tpututor_imports_no_framework():
    code = (
        "import importlib, pkgutil, sys, tpututor\n"
        "for m in pkgutil.walk_packages(tpututor.__path__, 'tpututor.'):\n"
        f"    if not m.name.rsplit('.', 1)[-1].startswith('_') and m.name not in {FRAMEWORK_MODULES!r}:\n"
        "        importlib.import_module(m.name)\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_framework_module_imports_its_framework_at_the_top():
    import ast
    from importlib.util import find_spec

    for name in FRAMEWORK_MODULES:
        tree = ast.parse(open(find_spec(name).origin).read())
        top = {a.name.split(".")[0] for node in tree.body if isinstance(node, ast.Import) for a in node.names}
        assert top & set(HEAVY), f"{name} is listed as a framework module but imports none at its top"


def test_the_package_holds_learner_modules_only_each_listed_in_its_docstring():
    import pkgutil

    import tpututor

    names = sorted(m.name for m in pkgutil.iter_modules(tpututor.__path__) if not m.name.startswith("_"))
    assert not {"course", "runner", "student", "workshop", "stamp", "site", "translate"} & set(names)
    for name in names:
        assert f"``{name}``" in tpututor.__doc__, f"tpututor's docstring does not list {name}"


def test_the_install_ships_tpututor_and_its_subpackages_and_leaves_the_course_tooling_in_the_clone():
    import tomllib

    from conftest import ROOT

    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    shipped = setuptools["packages"]
    assert all(p == "tpututor" or p.startswith("tpututor.") for p in shipped), shipped
    on_disk = {str(p.parent.relative_to(ROOT)).replace("/", ".") for p in (ROOT / "tpututor").rglob("__init__.py")}
    assert set(shipped) == on_disk, "every tpututor subpackage ships (and nothing else)"
    assert (ROOT / "tpututor_course" / "__init__.py").is_file()
    assert not any("course" in g for g in setuptools["package-data"]["tpututor"])


def test_no_module_reaches_into_another_modules_private_names():
    import ast
    from pathlib import Path

    import tpututor

    for path in Path(tpututor.__file__).parent.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module is not None:
                private = [a.name for a in node.names if a.name.startswith("_") and a.name != "__version__"]
                assert not private, f"{path.name} imports {private} from {node.module}"
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and node.value.id in {"hlo", "runtime", "hardware", "mesh", "bench", "check", "cost", "launch"}
            ):
                raise AssertionError(f"{path.name} uses {node.value.id}.{node.attr}")


def test_every_data_file_in_the_package_is_named_by_package_data_so_a_real_install_carries_it():
    import fnmatch
    import tomllib
    from pathlib import Path

    import tpututor

    package = Path(tpututor.__file__).parent
    patterns = tomllib.loads((package.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"][
        "tpututor"
    ]
    data = [
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert data, "the package has data files (the lesson table, the site's static files)"
    # setuptools' "*" does not cross a "/"; fnmatch's does, so compare part counts too
    missing = [
        f for f in data if not any(fnmatch.fnmatch(f, pat) and f.count("/") == pat.count("/") for pat in patterns)
    ]
    assert not missing, f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"


def test_importtime_shows_no_framework():
    out = subprocess.run(
        [PYTHON, "-X", "importtime", "-c", "import tpututor"], capture_output=True, text=True, timeout=60
    )
    modules = {line.split("|")[-1].strip().split(".")[0] for line in out.stderr.splitlines() if "|" in line}
    assert not modules & set(HEAVY)


def test_profile_defaults_to_full_and_reads_the_environment():
    assert profile(env={}) == "full"
    assert profile(env={"TPUTUTOR_PROFILE": "ci"}) == "ci"
    assert profile("full", env={"TPUTUTOR_PROFILE": "ci"}) == "full"  # a parameter wins
    assert profile(" CI ", env={}) == "ci"


def test_bad_profile_names_the_fix():
    with pytest.raises(ValueError, match="use 'full' or 'ci'.*TPUTUTOR_PROFILE=ci"):
        profile(env={"TPUTUTOR_PROFILE": "fast"})


def test_choose_picks_by_profile():
    assert choose("ci", full=4096, ci=512) == 512 and choose("full", full=4096, ci=512) == 4096
    with pytest.raises(ValueError):
        choose("medium", full=1, ci=2)


@pytest.fixture
def results(monkeypatch):
    monkeypatch.delenv(check.STRICT_ENV, raising=False)
    monkeypatch.setattr(check, "RESULTS", [])
    return check.RESULTS


def test_check_reports_passed_failed_and_not_attempted(results, capsys):
    check.equal("e1", 3, 3, hint="h")
    check.equal("e2", 4, 3, hint="think again")
    check.equal("e3", ..., 3, hint="h")
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "PASSED        e1"
    assert lines[1] == "FAILED        e2: got 4. Hint: think again"
    assert lines[2].startswith("NOT ATTEMPTED e3")
    assert check.summary() == {"passed": 1, "failed": 1, "not attempted": 1}


def test_a_failed_check_does_not_raise_for_a_learner(results):
    assert check.close("e", 1.5, 1.0, hint="h").status == "failed"


def test_strict_checks_raise_so_ci_catches_a_wrong_solution(results, monkeypatch):
    monkeypatch.setenv(check.STRICT_ENV, "1")
    with pytest.raises(check.ExerciseFailed, match="e: got 2"):
        check.equal("e", 2, 3, hint="h")
    assert check.equal("e", ..., 3, hint="h").status == "not attempted"  # never raises


def test_check_that_reports_the_learners_exception_as_a_failure(results):
    def broken():
        return 1 / 0

    r = check.that("e", broken, hint="h")
    assert r.status == "failed" and "ZeroDivisionError" in r.message


def test_check_that_counts_not_implemented_as_not_attempted(results):
    def stub():
        raise NotImplementedError

    assert check.that("e", stub, hint="h").status == "not attempted"


def test_a_stub_wrapped_by_jit_or_functools_counts_as_not_attempted():
    import functools

    import jax

    @jax.jit
    def jitted_stub(x): ...

    def stub(x): ...

    @functools.wraps(stub)
    def wrapper(*args):
        return stub(*args)

    def answer(x):
        return x + 1

    assert not check.attempted(jitted_stub) and not check.attempted(wrapper)
    assert check.attempted(jax.jit(answer))


def test_check_close_rejects_non_numbers_with_a_hint(results):
    r = check.close("e", "fast", 1.0, hint="a number of ms")
    assert r.status == "failed" and "expected a number" in r.message


def test_summary_counts_the_latest_attempt_per_exercise(results):
    check.equal("e", 1, 2, hint="h")
    check.equal("e", 2, 2, hint="h")
    assert check.summary() == {"passed": 1, "failed": 0, "not attempted": 0}


@pytest.mark.parametrize("returned", ["False", [False], 1, None.__class__])
def test_check_that_takes_only_a_real_boolean_and_calls_anything_else_the_checks_bug(results, returned):
    r = check.that("e", lambda: returned, hint="h", answer=lambda x: x)
    assert r.status == "failed" and "bug in the lesson's check" in r.message and "Hint" not in r.message


def test_check_that_accepts_numpy_booleans(results):
    import numpy as np

    assert check.that("e", lambda: np.bool_(True), hint="h").status == "passed"
    assert check.that("e", lambda: np.array(1.0) > 2, hint="h").status == "failed"


def test_an_error_in_the_checks_own_code_is_the_checks_not_the_learners(results, monkeypatch):
    def answer(x):
        return x * 2

    def test():
        assert answer(2) == 4
        return {}["missing"]  # the check's bug

    r = check.that("e", test, hint="h", answer=answer)
    assert "the check itself raised KeyError" in r.message and "Hint" not in r.message
    monkeypatch.setenv(check.STRICT_ENV, "1")
    with pytest.raises(check.CheckBroken):
        check.that("e", test, hint="h", answer=answer)


def test_an_error_in_the_learners_function_is_the_learners_with_the_hint_and_the_seed(results):
    def answer(x):
        return x / 0

    r = check.that("e", lambda: answer(1) == 1, hint="divide by the count", answer=answer, seed=1234)
    assert r.status == "failed" and "ZeroDivisionError" in r.message and "divide by the count" in r.message
    assert "seed 1234" in r.message


def test_hints_come_one_at_a_time_then_point_to_the_solution(capsys, monkeypatch):
    monkeypatch.setattr(check, "_HINTS_SHOWN", {})
    from tpututor import exercises

    entry = exercises.get("00.1")
    for n in range(len(entry.hints) + 1):
        check.hint("00.1")
        out = capsys.readouterr().out
        assert entry.hints[min(n, len(entry.hints) - 1)] in out
    assert "check.solution('00.1')" in out
    check.solution("00.1")
    assert entry.solution in capsys.readouterr().out
    with pytest.raises(KeyError, match="00a_where_am_i, 00b_getting_a_tpu\\); it has 00.1, 00.2, 00.3, 00.4"):
        check.hint("00.9")
