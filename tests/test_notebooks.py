"""Every lesson in notebooks/: paired, clean, well-formed, and it runs top to bottom.

Lessons are discovered, never listed: a new notebooks/NN_topic.md is tested as soon as it exists.
"""

from __future__ import annotations

import os
import re
import subprocess
import tomllib

import jupytext
import nbformat
import pytest

from conftest import LESSON_IDS as IDS, LESSONS, PYTHON, ROOT
from notebook_tools import REFERENCE, STABLE_TAG, cell_sources, has_stable_cells, tags
from tpututor import runner

REPO = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["tpututor"]


def read_pair(md):
    return jupytext.read(md), nbformat.read(md.with_suffix(".ipynb"), as_version=4)


def test_lessons_are_discovered():
    assert LESSONS, "no lessons found in notebooks/"
    assert [p.with_suffix(".ipynb") for p in LESSONS] == runner.discover()


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_every_md_has_its_ipynb_and_they_are_in_sync(md):
    assert md.with_suffix(".ipynb").exists(), f"{md.name} has no .ipynb: run make sync"
    text_nb, ipynb = read_pair(md)
    assert cell_sources(text_nb) == cell_sources(ipynb), f"{md.name} and its .ipynb differ: run make sync"
    assert ipynb.metadata["jupytext"]["formats"] == "ipynb,md:myst"


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_committed_ipynb_carries_no_outputs(md):
    _, ipynb = read_pair(md)
    dirty = [i for i, c in enumerate(ipynb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    assert not dirty, f"{md.with_suffix('.ipynb').name}: cells {dirty} carry outputs: run make sync"


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_lesson_follows_the_course_anatomy(md):
    nb, _ = read_pair(md)
    cells = nb.cells
    text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
    assert cells[0].cell_type == "markdown" and cells[0].source.startswith(f"# {md.stem[:2]} ·")
    for badge in ("colab.research.google.com/github", "kaggle.com/kernels/welcome", "mybinder.org/v2/gh"):
        links = [u for u in re.findall(r"\((https://[^)]+)\)", cells[0].source) if badge in u]
        assert links, f"missing {badge} badge"
        assert REPO["repository"] in links[0] and md.stem in links[0], links[0]
    assert "**You will learn to**" in text and "**Time:**" in text
    code_tags = [tags(c) for c in cells if c.cell_type == "code"]
    assert sum("setup" in t for t in code_tags) == 1, "one setup cell, tagged setup"
    assert sum("parameters" in t for t in code_tags) == 1, "one parameters cell, tagged parameters"
    assert "## Exercises" in text and "## Summary" in text and "## Further reading" in text


@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_lesson_has_at_least_two_self_checking_exercises_with_tagged_solutions(md):
    nb, _ = read_pair(md)
    code = [c for c in nb.cells if c.cell_type == "code"]
    checks = [c for c in code if re.search(r"\bcheck\.(equal|close|that)\(", c.source)]
    solutions = [c for c in code if "solution" in tags(c)]
    assert len(checks) >= 2, "at least two check cells"
    assert len(solutions) >= 2, "solution cells carry the 'solution' tag"
    for s in solutions:
        following = code[code.index(s) + 1]
        assert "check." in following.source, "every solution cell is followed by its check cell"


@pytest.mark.slow
@pytest.mark.parametrize("md", LESSONS, ids=IDS)
def test_lesson_runs_top_to_bottom_with_papermill(md, tmp_path):
    result = runner.execute(md.with_suffix(".ipynb"), tmp_path, profile="ci")
    assert result.status == "ok", f"{md.name} failed after {result.seconds} s: {result.error}"
    executed = nbformat.read(result.output, as_version=4)
    passed = [o for c in executed.cells for o in c.get("outputs", []) if "PASSED" in str(o.get("text", ""))]
    assert passed, "the solutions' checks ran and passed"


@pytest.mark.parametrize("md", [p for p in LESSONS if has_stable_cells(jupytext.read(p))],
                         ids=lambda p: p.stem)
def test_reference_for_stable_cells_matches_the_lesson(md):
    ref = REFERENCE / md.with_suffix(".ipynb").name
    assert ref.exists(), f"no {ref.relative_to(ROOT)}: run make reference"
    assert cell_sources(nbformat.read(ref, as_version=4)) == cell_sources(jupytext.read(md)), (
        f"{ref.name} is older than the lesson: run make reference")
    stable = [c for c in nbformat.read(ref, as_version=4).cells if STABLE_TAG in tags(c)]
    assert all(c.outputs for c in stable), "every stable cell has a reference output"


@pytest.mark.slow
def test_stable_outputs_match_the_reference_under_nbval():
    refs = sorted(REFERENCE.glob("*.ipynb"))
    assert refs, "no reference notebooks"
    env = {**os.environ, "TPUTUTOR_PROFILE": "ci", "TPUTUTOR_STRICT_CHECKS": "1"}
    out = subprocess.run(
        [PYTHON, "-m", "pytest", "--nbval-lax", "--nbval-cell-timeout=300", "-q", "-p", "no:cacheprovider",
         "--rootdir", str(REFERENCE), *map(str, refs)],
        capture_output=True, text=True, env=env, timeout=1200, cwd=REFERENCE,
    )
    assert out.returncode == 0, out.stdout[-4000:]
