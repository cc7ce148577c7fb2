"""One-click launch: badges, the setup cell, Colab metadata and the README's lesson table.

Everything here derives from one setting, ``[tool.tpututor]`` in ``pyproject.toml``
(``repository = "owner/name"``, ``branch``), so a fork changes one line and runs
``make badges`` (``python -m tpututor.launch``), which rewrites:

* each lesson's badge block (Colab, Kaggle, Binder), right under its title;
* each lesson's setup cell, the same :data:`SETUP_CELL` in every lesson;
* each lesson's Colab metadata (the accelerator a lesson asks for);
* the lesson table in ``README.md`` between ``<!-- lessons:start -->`` and ``<!-- lessons:end -->``.

At run time :func:`setup` is what the setup cell calls: on Colab or Kaggle it
installs what the runtime lacks, at pinned versions, then prints one line about
the machine. It imports no framework.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from urllib.parse import quote

from . import __version__
from .runtime import Host, Runtime, detect

__all__ = ["Settings", "settings", "badges", "SETUP_CELL", "ADDONS", "install_plan", "setup", "stamp",
           "lesson_table", "lesson_fields", "lessons", "main"]

ROOT = Path(__file__).resolve().parent.parent

# Packages some lessons use that Colab's and Kaggle's images lack, at the versions of constraints.txt
# (tests/test_launch.py checks that they agree). Import name -> pinned requirement.
ADDONS: dict[str, str] = {
    "xprof": "xprof==2.24.2",
    "transformers": "transformers==5.24.0",
}

SETUP_CELL = """\
# Setup (the same cell in every lesson): on Colab or Kaggle, install tpututor and what the
# runtime lacks, at tested versions; on your own machine `make lab` has done it already.
import importlib.util, os, sys
if ("google.colab" in sys.modules or "KAGGLE_KERNEL_RUN_TYPE" in os.environ) and not importlib.util.find_spec("tpututor"):
    %pip install --quiet "{requirement}"
from tpututor import launch
launch.setup()"""


@dataclass(frozen=True)
class Settings:
    repository: str  # "owner/name" on GitHub
    branch: str
    version: str

    @property
    def requirement(self) -> str:
        """What the setup cell installs: this release of tpututor, from its tag."""
        return f"tpututor @ git+https://github.com/{self.repository}@v{self.version}"


def settings(pyproject: str | Path | None = None) -> Settings:
    """The ``[tool.tpututor]`` table of ``pyproject.toml``."""
    import tomllib

    path = Path(pyproject) if pyproject else ROOT / "pyproject.toml"
    if not path.exists():
        raise FileNotFoundError(f"no {path}: run this from a clone of the repository")
    doc = tomllib.loads(path.read_text())
    try:
        tool = doc["tool"]["tpututor"]
        repository = tool["repository"]
    except KeyError:
        raise KeyError(f"{path} has no [tool.tpututor] repository = \"owner/name\"") from None
    if not re.fullmatch(r"[\w.-]+/[\w.-]+", repository):
        raise ValueError(f"[tool.tpututor] repository must look like 'owner/name', got {repository!r}")
    return Settings(repository, tool.get("branch", "main"), doc["project"]["version"])


def badges(notebook: str, s: Settings | None = None) -> str:
    """The badge block for ``notebooks/<notebook>.ipynb`` (three Markdown lines)."""
    s = s or settings()
    path = f"notebooks/{notebook}.ipynb"
    blob = f"https://github.com/{s.repository}/blob/{s.branch}/{path}"
    return "\n".join([
        f"[![Open in Colab](https://colab.research.google.com/assets/colab-badge.svg)]"
        f"(https://colab.research.google.com/github/{s.repository}/blob/{s.branch}/{path})",
        f"[![Open in Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)]"
        f"(https://kaggle.com/kernels/welcome?src={blob})",
        f"[![Launch Binder](https://mybinder.org/badge_logo.svg)]"
        f"(https://mybinder.org/v2/gh/{s.repository}/{s.branch}?labpath={quote(path, safe='')})",
    ])


# --------------------------------------------------------------------------- run time


def install_plan(host: Host | None = None, installed: Sequence[str] | None = None,
                 rt: Runtime | None = None) -> list[str] | None:
    """The pip command :func:`setup` would run here, or None when there is nothing to install.

    Only on Colab and Kaggle; only the add-ons this runtime lacks; always pinned.
    ``installed`` (import names) stands in for looking them up, for tests; ``rt`` is the
    machine when the caller has detected it already.
    """
    if (rt or detect(host)).platform.name not in ("colab", "colab-enterprise", "kaggle"):
        return None
    have = set(installed) if installed is not None else {n for n in ADDONS if importlib.util.find_spec(n)}
    missing = [req for name, req in ADDONS.items() if name not in have]
    if not missing:
        return None
    return [sys.executable, "-m", "pip", "install", "--quiet", *missing]


def _hint(platform: str, kind: str) -> str:
    if kind != "cpu":
        return ""
    if platform.startswith("colab"):
        return " No accelerator: for a TPU choose Runtime > Change runtime type > TPU v5e-1, then run again."
    if platform == "kaggle":
        return " No accelerator: for a TPU open Settings > Accelerator > TPU v5e-8, then run again."
    return " No accelerator here: the lesson runs on the CPU, and says where a TPU would differ."


def setup(host: Host | None = None, run=subprocess.run) -> None:
    """Install what a Colab or Kaggle runtime lacks, then print one line about the machine.

    It returns nothing, so that a notebook cell ending in ``launch.setup()`` shows the line once.
    """
    rt = detect(host)
    plan = install_plan(host, rt=rt)
    if plan is not None:
        print("installing:", " ".join(plan[5:]), flush=True)
        run(plan, check=True)
    print(f"tpututor {__version__} on {rt.summary()}." + _hint(rt.platform.name, rt.accelerator.kind))


# --------------------------------------------------------------------------- stamping


_BADGE_BLOCK = re.compile(r"(^# .*\n\n)((?:\[!\[.*\n)+)", re.M)
_TITLE = re.compile(r"^# (.+)$", re.M)
_TIME = re.compile(r"\*\*Time:\*\* about (\d+) minutes")
_NEEDS = re.compile(r"\*\*Needs:\*\*\s+(.+?)(?:\.\s|\n\n)", re.S)


def lesson_fields(text: str) -> tuple[str, int | None, str | None]:
    """A lesson's title, its time in minutes and the first sentence after **Needs:** (on one line)."""
    minutes, needs = _TIME.search(text), _NEEDS.search(text)
    return (_TITLE.search(text).group(1), int(minutes.group(1)) if minutes else None,
            " ".join(needs.group(1).split()) if needs else None)


def lessons(notebooks: Path) -> list[Path]:
    """The lessons' Markdown files (``NN_topic.md``) in teaching order."""
    return sorted(notebooks.glob("[0-9][0-9]*_*.md"))


# Colab opens every lesson on a TPU runtime (free tier: TPU v5e-1); Jupytext keeps these two
# keys in both files of a pair (see jupytext.toml).
COLAB_ACCELERATOR, COLAB_GPU_TYPE = "TPU", "V5E1"
COLAB_METADATA = f"accelerator: {COLAB_ACCELERATOR}\ncolab:\n  gpuType: {COLAB_GPU_TYPE}\n"
# Lessons Colab should open on its default CPU runtime instead: TensorFlow is preinstalled there but
# not on the TPU runtime, and whether tensorflow-tpu initializes on a v5e-1 is unconfirmed.
CPU_RUNTIME_LESSONS = frozenset({"04_tf_tpustrategy"})


def stamp_text(text: str, stem: str, s: Settings) -> str:
    """One lesson's MyST text with its Colab metadata, badge block and setup cell brought up to date."""
    if not text.startswith("---\n"):
        raise ValueError(f"{stem}: no YAML header (--- ... ---) at the top")
    header, body = text[4:].split("\n---\n", 1)
    header = re.sub(r"^accelerator:.*\n|^colab:\n(?:  .*\n)*", "", header + "\n", flags=re.M).rstrip("\n")
    metadata = "" if stem in CPU_RUNTIME_LESSONS else COLAB_METADATA
    text = "---\n" + metadata + header + "\n---\n" + body
    block = badges(stem, s) + "\n"
    if _BADGE_BLOCK.search(text):
        text = _BADGE_BLOCK.sub(lambda m: m.group(1) + block, text, count=1)
    else:
        text = re.sub(r"(^# .*\n)", lambda m: m.group(1) + "\n" + block, text, count=1, flags=re.M)
    cell = SETUP_CELL.format(requirement=s.requirement)
    text, n = re.subn(r"```\{code-cell\} ipython3\n:tags: \[setup\]\n\n.*?\n```",
                      lambda m: f"```{{code-cell}} ipython3\n:tags: [setup]\n\n{cell}\n```", text, count=1,
                      flags=re.S)
    if n != 1:
        raise ValueError(f"{stem}: no code cell tagged setup to stamp")
    return text


def _stamp_ipynb_metadata(path: Path) -> bool:
    """Set the Colab keys in the paired .ipynb too: Jupytext keeps notebook metadata from it."""
    if not path.exists():
        return False
    import nbformat

    nb = nbformat.read(path, as_version=4)
    before = (nb.metadata.get("accelerator"), nb.metadata.get("colab"))
    nb.metadata.pop("accelerator", None)
    nb.metadata.pop("colab", None)
    if path.stem not in CPU_RUNTIME_LESSONS:
        nb.metadata["accelerator"] = COLAB_ACCELERATOR
        nb.metadata["colab"] = {"gpuType": COLAB_GPU_TYPE}
    if before == (nb.metadata.get("accelerator"), nb.metadata.get("colab")):
        return False
    nbformat.write(nb, path)
    return True


def lesson_table(notebooks: Path, s: Settings) -> str:
    """The README's lesson table, built from each lesson's title, time and needs."""
    rows = ["| Lesson | Open | Time | Needs |", "|---|---|---|---|"]
    for md in lessons(notebooks):
        title, minutes, needs = lesson_fields(md.read_text())
        links = " ".join(badges(md.stem, s).splitlines())
        rows.append(f"| [{title}](notebooks/{md.name}) | {links} | "
                    f"{f'{minutes} min' if minutes else '?'} | {needs or '?'} |")
    return "\n".join(rows)


def stamp(root: str | Path = ROOT) -> list[str]:
    """Rewrite badges and setup cells in every lesson, and the README's lesson table. Returns what changed."""
    root = Path(root)
    s = settings(root / "pyproject.toml")
    changed = []
    for md in lessons(root / "notebooks"):
        text = md.read_text()
        new = stamp_text(text, md.stem, s)
        if new != text:
            md.write_text(new)
            changed.append(str(md.relative_to(root)))
        if _stamp_ipynb_metadata(md.with_suffix(".ipynb")):
            changed.append(str(md.with_suffix(".ipynb").relative_to(root)))
    readme = root / "README.md"
    text = readme.read_text()
    table = lesson_table(root / "notebooks", s)
    new = re.sub(r"(<!-- lessons:start -->\n)(?:.*?\n)?(<!-- lessons:end -->)",
                 lambda m: m.group(1) + table + "\n" + m.group(2), text, flags=re.S)
    if "<!-- lessons:start -->" not in text:
        raise ValueError("README.md has no <!-- lessons:start --> ... <!-- lessons:end --> block")
    if new != text:
        readme.write_text(new)
        changed.append("README.md")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    changed = stamp()
    print("stamped:", ", ".join(changed) if changed else "nothing to change")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
