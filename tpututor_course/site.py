"""The course as a website: ``make site`` (``python -m tpututor_course site``).

The site is built from notebooks that were *already executed* (``make run`` writes them, with
``timings.json``, into ``build/``), never by executing again: Sphinx with myst-nb
(``nb_execution_mode = "off"``) and sphinx-book-theme, the JAX documentation's stack, which builds
offline. Into ``build/site/<lang>/`` go a landing page (what the course is, for whom, the lesson
map with times and needs, how to launch), one page per lesson with its outputs and plots, a banner
saying which machine and profile produced them and when, with edit and source links, the instructor
guide, the error atlas, the author's guide, and one page per learner module of ``tpututor`` from
its docstrings. A lesson that failed shows the failure at the top of its page, and the build exits
non-zero. Warnings are errors (``sphinx-build -W``).

The build takes a language: ``--lang ko`` writes ``build/site/ko/`` from the Korean edition. A
translated lesson's code is the English code, so its page shows the English run's outputs under the
translated prose (or the outputs of an executed Korean notebook, where ``<executed>/ko/`` has one);
every page links to the other languages in its header. A guide in another language is
``docs/<name>.<lang>.md`` (``docs/errors.ko.md``, the Korean error atlas) or ``docs/<lang>/<name>.md``.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

from . import catalog, stamp

__all__ = ["LANGUAGES", "build", "guide_page", "learner_modules", "main"]

LANGUAGES = {"en": "English", "ko": "한국어"}
# The launch badges, drawn here, so that a page makes no request to another site (the links still go there).
_BADGES = {
    "https://colab.research.google.com/assets/colab-badge.svg": "colab.svg",
    "https://kaggle.com/static/images/open-in-kaggle.svg": "kaggle.svg",
    "https://mybinder.org/badge_logo.svg": "binder.svg",
}
_STATIC = Path(__file__).resolve().parent / "site_static"
_LABELS = {
    "en": {
        "lessons": "Lessons",
        "guides": "Guides",
        "api": "The tpututor package",
        "map": "The lessons",
        "produced": "Outputs on this page were produced by `make run` on {machine}, profile `{profile}`, {date}.",
        "failed": "This lesson FAILED when the site was built ({error}); the outputs below stop where it failed.",
        "edit": "Edit this page",
        "source": "Source",
        "other": "This course in",
    },
    "ko": {
        "lessons": "레슨",
        "guides": "안내서",
        "api": "tpututor 패키지",
        "map": "레슨 목록",
        "produced": "이 페이지의 출력은 {machine}에서 `make run`(프로필 `{profile}`, {date})으로 만든 것입니다.",
        "failed": "사이트를 만들 때 이 레슨이 실패했습니다({error}). 아래 출력은 실패한 곳에서 끝납니다.",
        "edit": "이 페이지 고치기",
        "source": "원본",
        "other": "다른 언어",
    },
}


def learner_modules() -> list[str]:
    """Every module a lesson imports from ``tpututor`` (the package minus its tooling)."""
    import pkgutil

    import tpututor

    return sorted(
        m.name
        for m in pkgutil.iter_modules(tpututor.__path__)
        if not m.name.startswith("_") and m.name not in ("course",)
    )


def guide_page(root: Path, name: str, lang: str) -> Path | None:
    """A guide's page in ``lang`` (``docs/<name>.md``; ``docs/<name>.<lang>.md`` or ``docs/<lang>/<name>.md``
    in another language), or None where the clone has none."""
    places = [f"{name}.md"] if lang == "en" else [f"{name}.{lang}.md", f"{lang}/{name}.md"]
    return next((root / "docs" / place for place in places if (root / "docs" / place).exists()), None)


def _landing(lessons: Sequence[catalog.Lesson], lang: str, s: stamp.Settings, guides: Sequence[str]) -> str:
    lab = _LABELS[lang]
    rows = ["| lesson | time | needs |", "|---|---|---|"]
    rows += [
        f"| [{lesson.heading}](lessons/{lesson.stem}) | {lesson.minutes} min | {lesson.note} |" for lesson in lessons
    ]
    intro = {
        "en": textwrap.dedent(f"""\
            # tpututor: programming TPUs through XLA

            A hands-on course in programming Google TPUs through XLA with JAX, TensorFlow and
            PyTorch/XLA: from where your code runs, through matmuls, fusion, sharding and profiling,
            to training and serving a model, writing kernels, and running TPUs safely and cheaply.
            It is for self-paced learners (many arriving from CUDA and PyTorch), for instructors
            running a workshop, and for anyone who clicks "Open in Colab".

            Every lesson runs honestly on what you have: a Colab or Kaggle TPU, a Cloud TPU VM, a GPU,
            or a laptop CPU. The numbers on these pages were measured on the machine named at the top
            of each lesson; run a lesson yourself to get yours.

            ## How to launch a lesson

            - **Colab**: the "Open in Colab" badge at the top of a lesson opens it on a TPU runtime
              (free tier: one TPU v5e chip). Its first cell installs what the runtime lacks.
            - **Kaggle**: the "Open in Kaggle" badge; choose TPU v5e-8 under Settings > Accelerator.
            - **Binder**: a CPU in the browser (without PyTorch/XLA).
            - **Your machine**: `git clone https://github.com/{s.repository}`, then `make lab`.
            """),
        "ko": textwrap.dedent(f"""\
            # tpututor: XLA로 TPU 프로그래밍하기

            JAX, TensorFlow, PyTorch/XLA로 Google TPU를 XLA를 통해 프로그래밍하는 실습 과정입니다.
            코드가 어디서 도는지부터 행렬 곱, 퓨전, 샤딩, 프로파일링을 거쳐 모델 학습과 서빙, 커널 작성,
            TPU를 안전하고 싸게 운영하는 법까지 다룹니다. 혼자 공부하는 분(CUDA와 PyTorch에서 오는 분이
            많습니다), 워크숍을 여는 강사, 그리고 "Open in Colab"을 누르는 모든 분을 위한 과정입니다.

            모든 레슨은 가진 장비에서 그대로 돕니다: Colab이나 Kaggle의 TPU, Cloud TPU VM, GPU, 노트북 CPU.
            이 페이지의 숫자는 각 레슨 맨 위에 적힌 머신에서 잰 값입니다. 직접 실행하면 여러분의 값이 나옵니다.

            ## 레슨을 여는 방법

            - **Colab**: 레슨 맨 위의 "Open in Colab" 배지를 누르면 TPU 런타임에서 열립니다
              (무료 등급: TPU v5e 칩 하나). 첫 셀이 런타임에 없는 패키지를 설치합니다.
            - **Kaggle**: "Open in Kaggle" 배지를 누르고 Settings > Accelerator에서 TPU v5e-8을 고릅니다.
            - **Binder**: 브라우저 안의 CPU(PyTorch/XLA 제외).
            - **내 컴퓨터**: `git clone https://github.com/{s.repository}` 후 `make lab`.
            """),
    }[lang]
    toc = ["```{toctree}", ":maxdepth: 1", f":caption: {lab['lessons']}", ""]
    toc += [f"lessons/{lesson.stem}" for lesson in lessons] + [
        "```",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        f":caption: {lab['guides']}",
        "",
        *guides,
        "```",
        "",
        "```{toctree}",
        ":maxdepth: 1",
        f":caption: {lab['api']}",
        "",
        "api/index",
        "```",
    ]
    return intro + f"\n## {lab['map']}\n\n" + "\n".join(rows) + "\n\n" + "\n".join(toc) + "\n"


def _api_pages(folder: Path, lang: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    names = learner_modules()
    title = _LABELS[lang]["api"]
    (folder / "index.md").write_text(f"# {title}\n\n```{{toctree}}\n:maxdepth: 1\n\n" + "\n".join(names) + "\n```\n")
    for name in names:
        (folder / f"{name}.md").write_text(
            f"# tpututor.{name}\n\n```{{eval-rst}}\n.. automodule:: tpututor.{name}\n"
            "   :members:\n   :undoc-members: False\n```\n"
        )


def _lesson_page(
    nb, lesson: catalog.Lesson, record: dict, timings: dict, s: stamp.Settings, lang: str, folder: str
) -> tuple[object, str | None]:
    """The executed notebook with the rehearsal cell dropped and a banner under the first cell."""

    nb.cells = [c for c in nb.cells if "tpututor-rehearsal" not in c.get("metadata", {}).get("tags", [])]
    lab = _LABELS[lang]
    blob = f"https://github.com/{s.repository}/blob/{s.branch}/{folder}/{lesson.path.name}"
    # A translation is edited in its catalogue (notebooks/<lang>/ is generated from it), English in the lesson.
    edited = f"{folder}/{lesson.path.name}" if lang == "en" else f"i18n/{lang}/{lesson.stem}.po"
    edit = f"https://github.com/{s.repository}/edit/{s.branch}/{edited}"
    lines = [
        lab["produced"].format(
            machine=timings.get("machine", "?"), profile=timings.get("profile", "?"), date=timings.get("date", "?")
        ),
        f"[{lab['edit']}]({edit}) · [{lab['source']}]({blob})",
    ]
    failure = None
    if record.get("status") != "ok":
        failure = record.get("error") or record.get("status", "not run")
        lines.insert(0, "```{error}\n" + lab["failed"].format(error=failure) + "\n```")
    first = nb.cells[0].source
    for url, local in _BADGES.items():
        first = first.replace(url, f"../_static/badges/{local}")
    badge_lines = [i for i, line in enumerate(first.splitlines()) if line.startswith("[![")]
    at = badge_lines[-1] + 1 if badge_lines else 1  # right under the badges
    parts = first.splitlines()
    nb.cells[0].source = "\n".join(parts[:at] + ["", *"\n\n".join(lines).splitlines()] + parts[at:])
    nb.metadata.pop("papermill", None)
    for cell in nb.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
    return nb, failure


def _conf(s: stamp.Settings, lang: str, languages: Sequence[str]) -> str:
    # The same banner is on every page, at every depth: lang.js points each link at the other language's
    # landing page from this page's place (Sphinx's data-content_root); the href is right for the top level.
    others = " · ".join(
        f'<a class="tpututor-lang" data-lang="{code}" href="../{code}/index.html">{LANGUAGES[code]}</a>'
        for code in languages
        if code != lang
    )
    announcement = f"{_LABELS[lang]['other']}: {others}" if others else ""
    options = {
        "repository_url": f"https://github.com/{s.repository}",
        "repository_branch": s.branch,
        "path_to_docs": "notebooks",
        "use_repository_button": True,
        "use_source_button": False,
        "use_edit_page_button": False,
        "use_download_button": True,
        "announcement": announcement,
        "launch_buttons": {
            "colab_url": "https://colab.research.google.com",
            "binderhub_url": "https://mybinder.org",
            "notebook_interface": "jupyterlab",
        },
        "show_toc_level": 2,
    }
    return textwrap.dedent(f"""\
        # Generated by tpututor_course.site: edit the lessons, not this file.
        project = "tpututor"
        author = "the tpututor team"
        copyright = "the tpututor team"
        version = release = {s.version!r}
        language = {lang!r}
        extensions = ["myst_nb", "sphinx.ext.autodoc"]
        nb_execution_mode = "off"
        nb_merge_streams = True
        myst_enable_extensions = ["dollarmath", "colon_fence"]
        myst_heading_anchors = 3
        exclude_patterns = ["_build"]
        html_theme = "sphinx_book_theme"
        html_title = "tpututor"
        html_theme_options = {options!r}
        html_last_updated_fmt = "%Y-%m-%d"
        html_static_path = ["_static"]
        html_favicon = "_static/favicon.svg"
        html_js_files = [("lang.js", {{"defer": "defer"}})]
        html_context = {{"default_mode": "light"}}
        autodoc_member_order = "bysource"
        autodoc_typehints = "none"
        suppress_warnings = ["misc.highlighting_failure", "mystnb.unknown_mime_type"]
        """)


def _with_prose_of(executed, translated):
    """The executed English notebook with the translated notebook's markdown cells and metadata
    (cells matched by id: a translation copies every English cell id)."""
    prose = {c.id: c.source for c in translated.cells if c.cell_type == "markdown"}
    for cell in executed.cells:
        if cell.cell_type == "markdown" and cell.get("id") in prose:
            cell.source = prose[cell.id]
    executed.metadata["tpututor"] = translated.metadata.get("tpututor", executed.metadata.get("tpututor"))
    return executed


def build(
    executed_dir: Path,
    out: Path,
    lang: str = "en",
    languages: Sequence[str] = ("en",),
    root: Path | None = None,
    strict: bool = True,
) -> list[str]:
    """Build ``out/<lang>/`` from the executed notebooks in ``executed_dir``; returns the lessons that
    failed (the caller exits non-zero when there are any). Raises when Sphinx fails."""
    root = root or catalog.find_root()
    if lang not in LANGUAGES:
        raise ValueError(f"unknown language {lang!r}; choose one of {', '.join(LANGUAGES)}")
    timings_file = executed_dir / "timings.json"
    if not timings_file.exists():
        raise FileNotFoundError(
            f"no {timings_file}: run `make run` (or `python -m tpututor_course run --out {executed_dir}`) "
            "first; the site is built from executed notebooks"
        )
    timings = json.loads(timings_file.read_text())
    folder = "notebooks" if lang == "en" else f"notebooks/{lang}"
    lessons = catalog.lessons(root / folder)
    s = stamp.settings(root / "pyproject.toml")
    src = out.parent / "site-src" / lang
    if src.exists():
        shutil.rmtree(src)
    (src / "lessons").mkdir(parents=True)
    import nbformat

    failed = []
    for lesson in lessons:
        executed = executed_dir / lesson.notebook.name
        record = timings.get("lessons", {}).get(lesson.stem, {"status": "not run", "error": "not run by make run"})
        if lang != "en" and (executed_dir / lang / lesson.notebook.name).exists():
            nb = nbformat.read(executed_dir / lang / lesson.notebook.name, as_version=4)
        elif executed.exists():
            nb = nbformat.read(executed, as_version=4)
            if lang != "en":  # the code is the English code, so its outputs are too: only the prose changes
                nb = _with_prose_of(nb, nbformat.read(lesson.notebook, as_version=4))
        else:  # the page still exists, without outputs, and says why
            import jupytext

            nb = jupytext.read(lesson.path)
            record = {"status": "not run", "error": f"no executed notebook in {executed_dir}"}
        nb, failure = _lesson_page(nb, lesson, record, timings, s, lang, folder)
        if failure:
            failed.append(f"{lesson.stem}: {failure}")
        nbformat.write(nb, src / "lessons" / lesson.notebook.name)
    guides = []
    for name in ("workshop", "errors", "writing_a_lesson"):
        page = guide_page(root, name, lang)
        if page is not None:  # HTML anchors (what GitHub shows) become MyST targets (what Sphinx links to)
            text = re.sub(r'^<a id="([\w-]+)"></a>$', r"(\1)=", page.read_text(), flags=re.M)
            (src / f"{name}.md").write_text(text)
            guides.append(name)
    (src / "index.md").write_text(_landing(lessons, lang, s, guides))
    _api_pages(src / "api", lang)
    (src / "conf.py").write_text(_conf(s, lang, languages))
    shutil.copytree(_STATIC, src / "_static")
    target = out / lang
    if target.exists():
        shutil.rmtree(target)
    args = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-j", "1", str(src), str(target)]
    if strict:
        args.insert(3, "-W")
    done = subprocess.run(
        args,
        capture_output=True,
        text=True,
        cwd=root,
        timeout=1800,
        env={**__import__("os").environ, "PYTHONPATH": str(root)},
    )
    if done.returncode != 0:
        raise RuntimeError(f"sphinx-build failed:\n{(done.stdout + done.stderr)[-4000:]}")
    (out / "index.html").write_text(
        f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" '
        f'content="0; url={languages[0]}/index.html"><title>tpututor</title>'
        f'<a href="{languages[0]}/index.html">tpututor</a>\n'
    )
    return failed


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tpututor_course site")
    parser.add_argument("--executed", default="build", help="the folder make run wrote (default build)")
    parser.add_argument("--out", default="build/site")
    parser.add_argument("--lang", default="en", choices=sorted(LANGUAGES))
    parser.add_argument("--languages", default="en", help="the languages the site has, comma-separated (for the links)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    languages = [code.strip() for code in args.languages.split(",") if code.strip()]
    failed = build(Path(args.executed), Path(args.out), args.lang, languages)
    print(f"site: {Path(args.out) / args.lang}/index.html")
    for line in failed:
        print(f"site: lesson failed: {line}", file=sys.stderr)
    return 1 if failed else 0
