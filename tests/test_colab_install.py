"""The Colab path end to end: the setup cell's own install command, against this repository served
as a git URL with its release tag, in a fresh virtualenv with Colab's markers; then lesson 00a (where am I running?) runs
there and the pre-flight says READY.

Nothing reaches GitHub: git's ``url.<base>.insteadOf`` points https://github.com/<repository> at a
local bare repository made from the working tree and tagged v<version>, so the setup cell runs
unchanged. The fresh venv holds nothing of tpututor; it borrows the frameworks (JAX, Jupyter,
papermill) from the course environment through a path entry, as Colab's image provides its own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat
import pytest

from conftest import ROOT
from tpututor_course import stamp

pytestmark = [pytest.mark.slow, pytest.mark.lessons]


def sh(*args, cwd=None, env=None, timeout=600) -> subprocess.CompletedProcess:
    out = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, f"{' '.join(map(str, args))}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
    return out


def release_repository(tmp: Path, tag: str) -> Path:
    """A bare git repository holding the working tree (tracked and new files), tagged ``tag``."""
    files = sh("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", cwd=ROOT).stdout.split("\0")
    work = tmp / "work"
    for name in filter(None, files):
        if (ROOT / name).is_file():
            target = work / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes((ROOT / name).read_bytes())
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@127.0.0.1"]
    sh(*git, "init", "-q", "-b", "main", cwd=work)
    sh(*git, "add", "-A", cwd=work)
    sh(*git, "commit", "-q", "-m", "release candidate", cwd=work)
    sh(*git, "tag", tag, cwd=work)
    sh("git", "clone", "-q", "--bare", work, tmp / "tpututor.git")
    return tmp / "tpututor.git"


def test_setup_cell_installs_the_release_from_its_tag_and_lesson_00_runs_on_colab(tmp_path):
    s = stamp.settings(ROOT / "pyproject.toml")
    bare = release_repository(tmp_path, s.tag)
    gitconfig = tmp_path / "gitconfig"
    gitconfig.write_text(f'[url "file://{bare}"]\n\tinsteadOf = https://github.com/{s.repository}\n')

    venv = tmp_path / "colab-venv"
    sh(sys.executable, "-m", "venv", venv)
    python = venv / "bin" / "python"
    site = Path(sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip())
    (site / "course-frameworks.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run([python, "-c", "import tpututor"], capture_output=True, text=True, cwd=tmp_path)
    assert probe.returncode != 0, "the fresh venv must not see tpututor before the setup cell installs it"

    fake = tmp_path / "fake-colab"
    (fake / "google" / "colab").mkdir(parents=True)
    (fake / "google" / "colab" / "__init__.py").write_text('"""A stand-in for Colab\'s module."""\n')
    (fake / "google" / "colab" / "output.py").write_text('"""JAX\'s debugger imports it on Colab."""\n')
    ipython = tmp_path / "ipython"
    (ipython / "profile_default" / "startup").mkdir(parents=True)
    (ipython / "profile_default" / "startup" / "00-colab.py").write_text("import google.colab\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPUTUTOR_", "VIRTUAL_ENV", "PYTHONPATH"))}
    env.update(
        GIT_CONFIG_GLOBAL=str(gitconfig),
        GIT_CONFIG_NOSYSTEM="1",
        PYTHONPATH=str(fake),
        IPYTHONDIR=str(ipython),
        COLAB_RELEASE_TAG="release-colab-test",
        COLAB_GPU="",
        PATH=f"{venv / 'bin'}:{env['PATH']}",
        TPUTUTOR_PROFILE="ci",
    )

    lesson = ROOT / "notebooks" / "00a_where_am_i.ipynb"
    out = tmp_path / "executed.ipynb"
    sh(
        python,
        "-m",
        "papermill",
        lesson,
        out,
        "-k",
        "python3",
        "--cwd",
        tmp_path,
        "--execution-timeout",
        "300",
        env=env,
        timeout=900,
    )
    executed = nbformat.read(out, as_version=4)
    setup_outputs = "".join(
        o.get("text", "")
        for o in executed.cells[
            next(i for i, c in enumerate(executed.cells) if "setup" in c.metadata.get("tags", []))
        ].outputs
    )
    assert "tpututor 0.1.0 on colab" in setup_outputs, setup_outputs
    assert not [o for c in executed.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]

    asked = sh(
        python, "-c", "from tpututor import check; check.hint('00.1'); check.solution('00.1')", env=env, cwd=tmp_path
    )  # not the clone: the installed package
    assert "Hint for 00.1" in asked.stdout and "def jax_devices" in asked.stdout, "the answers ship with the package"

    installed = json.loads(sh(python, "-m", "pip", "inspect", env=env).stdout)["installed"]
    ours = next(d for d in installed if d["metadata"]["name"] == "tpututor")
    assert ours["direct_url"]["vcs_info"]["requested_revision"] == s.tag, "installed from the release tag"
    assert "dir_info" not in ours["direct_url"], "a real install, not an editable one"
    tooling = sh(
        python,
        "-c",
        "import importlib.util, pathlib, tpututor; print(importlib.util.find_spec('tpututor_course'), "
        "sorted(p.name for p in pathlib.Path(tpututor.__file__).parent.iterdir() if p.is_dir()))",
        env=env,
        cwd=tmp_path,
    ).stdout
    assert tooling.startswith("None ") and "'course'" not in tooling, (
        f"the install carries no course tooling: {tooling}"
    )

    preflight = subprocess.run(
        [python, "-m", "tpututor", "doctor", "--preflight"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "TPUTUTOR_LESSON": "00a_where_am_i"},
    )
    assert preflight.returncode == 0, preflight.stdout + preflight.stderr
    assert "Traceback" not in preflight.stdout + preflight.stderr
    assert preflight.stdout.strip().splitlines()[-1].startswith("READY for the workshop")
    assert "00a_where_am_i: Where am I running?" in preflight.stdout
