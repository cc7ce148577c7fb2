"""Shared fixtures: fake machines, the project's paths, and each lesson executed once per session."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import pytest

from tpututor.runtime import Host, detect

HERE = detect()  # this machine: tests that expect a CPU-only box skip elsewhere, saying why
if HERE.accelerator.kind == "cpu":  # as a lesson's setup cell does (launch.quiet_jax): with libtpu installed
    os.environ.setdefault("JAX_PLATFORMS", "cpu")  # JAX would try a TPU runtime first; kernels inherit this

import jax  # noqa: E402
import numpy  # noqa: E402

# The SPMD tests shard over 8 devices: simulate them before any test starts JAX's backend.
# (Only this process: subprocesses and notebook kernels start with their own settings.)
jax.config.update("jax_num_cpu_devices", 8)
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the course tooling sits beside tpututor in the clone (it is not installed)
    sys.path.insert(0, str(ROOT))

from tpututor import fakes  # noqa: E402
from tpututor_course import catalog, runner  # noqa: E402

NOTEBOOKS = ROOT / "notebooks"
PYTHON = sys.executable
CATALOG = catalog.lessons(NOTEBOOKS)  # every lesson, found from the front matter, not listed by hand
LESSONS = [lesson.path for lesson in CATALOG]
LESSON_IDS = [p.stem for p in LESSONS]


def least_exercises(stem: str) -> int:
    """Exercises a lesson must end with: two, or one in a part of a split lesson (``NNa_topic``), whose
    lesson as a whole has more (docs/writing_a_lesson.md)."""
    return 1 if stem.split("_")[0][-1].isalpha() else 2


# Where the one run of each lesson goes: $TPUTUTOR_TEST_RUN (make test: build/test-run), else a temp dir.
TEST_RUN = Path(os.environ.get("TPUTUTOR_TEST_RUN") or tempfile.mkdtemp(prefix="tpututor-test-run-"))
EXECUTIONS: dict[str, int] = {}
CPU_ONLY = pytest.mark.skipif(
    HERE.accelerator.kind != "cpu", reason=f"expects a CPU-only machine; this one has {HERE.accelerator.name}"
)


def run_python(code: str, *argv: str, env: dict | None = None, clean_env: bool = False, timeout: int = 300) -> str:
    """Run ``code`` in a fresh interpreter from the repository root; fail with its stderr unless it
    exits 0; return its stdout. ``env`` is added to this environment, or replaces it (``clean_env``)."""
    out = subprocess.run(
        [PYTHON, "-c", textwrap.dedent(code), *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env=dict(env or {}) if clean_env else {**os.environ, **(env or {})},
    )
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


_RESULTS: dict[str, runner.LessonResult] = {}
# make test sets TPUTUTOR_TEST_JOBS=2: the lessons the session will ask for start as soon as the tests
# are collected, that many at a time in worker processes, while the unit tests run here. On 2 cores
# every lesson then runs with the other core busy, so its timing asserts are tested under load too.
_AHEAD: dict[str, Future] = {}
_POOL: ProcessPoolExecutor | None = None


def _lessons_wanted(items) -> list[str]:
    wanted: set[str] = set()
    for item in items:
        if "executed" in getattr(item, "fixturenames", ()):
            named = [stem for stem in LESSON_IDS if f"[{stem}]" in item.nodeid]
            wanted.update(named or LESSON_IDS)
    return [stem for stem in LESSON_IDS if stem in wanted]


def pytest_collection_finish(session):
    global _POOL
    jobs = int(os.environ.get("TPUTUTOR_TEST_JOBS") or 0)
    wanted = _lessons_wanted(session.items)
    if jobs < 1 or not wanted:
        return
    _POOL, futures = runner.start(
        [NOTEBOOKS / f"{stem}.ipynb" for stem in wanted], TEST_RUN, jobs, profile="ci", rehearse=True
    )
    _AHEAD.update({path.stem: future for path, future in futures.items()})


@pytest.fixture(scope="session")
def jax_trace(tmp_path_factory):
    """A JAX profiler trace (tests of tpututor.traces and xprof_server): three annotated steps, host
    work (NumPy) then a jitted matmul chain, read back with float()."""
    logdir = tmp_path_factory.mktemp("jax-profile")
    f = jax.jit(lambda a: jax.numpy.tanh(a @ a) @ a)
    x = jax.numpy.ones((256, 256))
    f(x).block_until_ready()
    with jax.profiler.trace(str(logdir)):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                with jax.profiler.TraceAnnotation("host work"):
                    numpy.linalg.svd(numpy.random.default_rng(i).standard_normal((200, 200)))
                float(f(x)[0, 0])
    return logdir


@pytest.fixture(scope="session")
def executed():
    """executed("00a_where_am_i") -> that lesson's LessonResult, run once per session (ci profile,
    strict checks, with the student rehearsal at the end); every later call reads the same run."""

    def get(stem: str) -> runner.LessonResult:
        if stem not in _RESULTS:
            EXECUTIONS[stem] = EXECUTIONS.get(stem, 0) + 1
            if stem in _AHEAD:
                _RESULTS[stem] = _AHEAD[stem].result()
            else:
                _RESULTS[stem] = runner.execute(NOTEBOOKS / f"{stem}.ipynb", TEST_RUN, profile="ci", rehearse=True)
        return _RESULTS[stem]

    return get


# ---------------------------------------------------------------------------------- skips
# make test sets TPUTUTOR_STRICT_SKIPS=1: a run of the whole suite then fails when any test skips
# that is not listed here with its reason, so a missing environment (Colab's venv, Chromium, libtpu)
# cannot turn into a green run. Patterns are fnmatch patterns over test ids.
EXPECTED_SKIPS: dict[str, str] = {
    "tests/test_errors.py::*jax-no-tpu-backend*": "asking for a TPU does not fail on a machine that has one",
}
_SKIPPED: list[tuple[str, str]] = []


def pytest_runtest_logreport(report):
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        _SKIPPED.append((report.nodeid, reason))


def pytest_sessionfinish(session, exitstatus):
    import fnmatch

    if _POOL is not None:  # lessons nobody asked for (a test that failed before asking) are not run
        _POOL.shutdown(wait=True, cancel_futures=True)

    if (
        os.environ.get("TPUTUTOR_STRICT_SKIPS") != "1"
        or session.config.option.keyword
        or session.config.option.markexpr
    ):
        return
    unexpected = [
        (nodeid, reason)
        for nodeid, reason in _SKIPPED
        if not any(fnmatch.fnmatch(nodeid, pattern) for pattern in EXPECTED_SKIPS)
    ]
    if unexpected:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = [f"  {nodeid}: {reason}" for nodeid, reason in unexpected]
        message = "\n".join(
            ["tests skipped that are expected to run here (tests/conftest.py, EXPECTED_SKIPS):", *lines]
        )
        if reporter:
            reporter.write_line(message, red=True)
        session.exitstatus = 1
