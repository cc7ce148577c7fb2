"""The test suite itself: a full run cannot pass by skipping."""

from __future__ import annotations

import os
import subprocess

from conftest import EXPECTED_SKIPS, PYTHON, ROOT


def _pytest(tmp_path, strict: bool) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text(  # the suite's own hooks, loaded under another module name
        "import importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('suite_conftest', {str(ROOT / 'tests' / 'conftest.py')!r})\n"
        "suite = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(suite)\n"
        "pytest_runtest_logreport, pytest_sessionfinish = suite.pytest_runtest_logreport, suite.pytest_sessionfinish\n"
    )
    (tmp_path / "test_planted.py").write_text(
        "import pytest\n\ndef test_needs_a_thing():\n    pytest.skip('the thing is not installed')\n"
    )
    env = {**os.environ, "TPUTUTOR_STRICT_SKIPS": "1" if strict else "0"}
    return subprocess.run(
        [PYTHON, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )


def test_a_full_run_fails_when_a_test_skips_that_is_not_expected_to(tmp_path):
    out = _pytest(tmp_path, strict=True)
    assert out.returncode == 1, out.stdout
    assert (
        "expected to run here" in out.stdout and "test_needs_a_thing: Skipped: the thing is not installed" in out.stdout
    )


def test_outside_make_test_a_skip_is_only_a_skip(tmp_path):
    assert _pytest(tmp_path, strict=False).returncode == 0


def test_every_expected_skip_says_why():
    assert all(reason.strip() for reason in EXPECTED_SKIPS.values())
