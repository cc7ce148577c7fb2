"""Shared fixtures: fake machines and the project's paths."""

from __future__ import annotations

import sys
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


@pytest.fixture
def fake(tmp_path):
    """fake("kaggle-v5e-8") -> a Host reading that fake machine; also takes a Machine."""

    def make(machine: str | fakes.Machine) -> Host:
        root = tmp_path / (machine if isinstance(machine, str) else "custom")
        root.mkdir(exist_ok=True)
        return fakes.make_host(root, machine)

    return make
