"""Shared fixtures: fake machines and the project's paths."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import pytest

from tpututor import fakes

# The SPMD tests shard over 8 devices: simulate them before any test starts JAX's backend.
# (Only this process: subprocesses and notebook kernels start with their own settings.)
jax.config.update("jax_num_cpu_devices", 8)
from tpututor.runtime import Host

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
PYTHON = sys.executable
LESSONS = sorted(NOTEBOOKS.glob("[0-9][0-9]*_*.md"))  # every lesson, found, not listed by hand
LESSON_IDS = [p.stem for p in LESSONS]


def run_python(code: str, *argv: str, env: dict | None = None, clean_env: bool = False, timeout: int = 300) -> str:
    """Run ``code`` in a fresh interpreter from the repository root; fail with its stderr unless it
    exits 0; return its stdout. ``env`` is added to this environment, or replaces it (``clean_env``)."""
    out = subprocess.run([PYTHON, "-c", textwrap.dedent(code), *argv], capture_output=True, text=True,
                         timeout=timeout, cwd=ROOT, env=dict(env or {}) if clean_env else {**os.environ, **(env or {})})
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


@pytest.fixture
def fake(tmp_path):
    """fake("kaggle-v5e-8") -> a Host reading that fake machine; also takes a Machine."""

    def make(machine: str | fakes.Machine) -> Host:
        root = tmp_path / (machine if isinstance(machine, str) else "custom")
        root.mkdir(exist_ok=True)
        return fakes.make_host(root, machine)

    return make
