"""An accelerator day in one command: the lessons and benchmarks on a lent GPU machine.

The machine the course is checked on (one H200; ``../shared/notes/round2.md``) runs Python 3.12 with
JAX, Flax, Optax, Orbax, torch and transformers, but no papermill, Jupyter kernel, Grain,
TensorFlow or torch-xla, and cannot download. So the run is prepared here:

* ``make device-bundle`` (:func:`bundle`): downloads, for Python 3.12 on manylinux x86-64, the
  wheels the lessons need that such an image lacks (:data:`CARRIED` and their dependencies, minus
  the large scientific stack the image has, :data:`PRESENT`) into ``build/device-bundle/``, and
  prints its size (the repository and the bundle travel together, 64 MiB at most).
* on the machine, from the repository root (:func:`check`):
  ``python3 -m tpututor_course device check --out $OUT`` installs the wheels into a scratch folder
  (no network), runs every lesson with papermill in the full profile under a per-lesson timeout and a
  total budget, then ``python -m tpututor bench matmul`` in bf16 at n=8192 for JAX and for
  torch.matmul, the training benchmark and the KV-cache benchmark, and packs the executed
  notebooks, ``summary.json`` and the benchmark outputs into one archive in ``$OUT``.
* ``make device-rehearsal`` runs the same check here on a CPU, in a fresh Python 3.12 venv holding
  the image's JAX (:data:`IMAGE`) and the carried wheels only, in the ci profile.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tpututor.launch import pins

from . import catalog

__all__ = ["CARRIED", "PRESENT", "IMAGE", "DEVICE_PYTHON", "bundle", "check", "summarize_bench", "main"]

DEVICE_PYTHON = "3.12"
# What the lessons need on the machine that its image lacks (the top level; dependencies follow).
CARRIED = ("papermill", "ipykernel", "nbclient", "nbformat", "pyyaml", "grain")
# Large packages the image has (round2.md): never carried, so that the machine's builds are used.
PRESENT = frozenset(
    {
        "numpy",
        "scipy",
        "ml-dtypes",
        "jax",
        "jaxlib",
        "opt-einsum",
        "protobuf",
        "typing-extensions",
        "pillow",
        "matplotlib",
        "contourpy",
        "fonttools",
        "kiwisolver",
        "pyparsing",
        "cycler",
        "python-dateutil",
        "six",
        "pandas",
        "pytz",
        "tzdata",
        "tqdm",
        "torch",
        "triton",
        "flax",
        "optax",
        "orbax-checkpoint",
        "transformers",
        "tokenizers",
        "safetensors",
        "huggingface-hub",
        "tensorstore",
    }
)
# The image, for the rehearsal here (versions that resolve together with JAX 0.11.2 on PyPI today):
# [device] in tpututor/data/pins.toml.
IMAGE: tuple[str, ...] = tuple(f"{name}=={version}" for name, version in pins()["device"].items())
BUNDLE_LIMIT_MB = 48  # leaves room for the repository inside the 64 MiB that travel
LESSON_TIMEOUT = {"full": 150, "ci": 240}
BUDGET_S = 540  # the whole check, under the machine's 10-minute command limit


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def _resolve(python: str, requirements: Sequence[str]) -> dict[str, tuple[str, str]]:
    """name -> (version, wheel URL) of what pip would install for ``requirements`` under ``python``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        done = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                "--dry-run",
                "--ignore-installed",
                "--only-binary=:all:",
                "--report",
                str(report),
                *requirements,
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pip could not resolve {' '.join(requirements)} for {python}:\n{done.stderr[-2000:]}")
        doc = json.loads(report.read_text())
    return {_norm(i["metadata"]["name"]): (i["metadata"]["version"], i["download_info"]["url"]) for i in doc["install"]}


def python312() -> str:
    """A Python 3.12 interpreter to resolve and download for (the machine's version)."""
    for candidate in (
        os.environ.get("TPUTUTOR_PYTHON312"),
        shutil.which("python3.12"),
        str(Path.home() / ".pyenv/versions/3.12.1/bin/python3.12"),
    ):
        if candidate and Path(candidate).exists():
            probe = subprocess.run(
                [candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12))"], capture_output=True, text=True
            )
            if probe.stdout.strip() == "True":
                return candidate
    raise FileNotFoundError("no Python 3.12 here: install python3.12, or set TPUTUTOR_PYTHON312=/path/to/python3.12")


def bundle(out: Path, python: str | None = None) -> Path:
    """Download the carried wheels (and their dependencies, minus :data:`PRESENT`) into ``out``."""
    python = python or python312()
    carried = _resolve(python, CARRIED)
    together = _resolve(python, (*IMAGE, *CARRIED))  # versions that also fit the image
    wanted = {name: together.get(name, carried[name]) for name in carried if name not in PRESENT}
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    done = subprocess.run(
        [
            python,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            "--dest",
            str(out),
            *[f"{n}=={v}" for n, (v, _) in sorted(wanted.items())],
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"pip download failed:\n{done.stderr[-2000:]}")
    (out / "carried.txt").write_text("\n".join(f"{n}=={v}" for n, (v, _) in sorted(wanted.items())) + "\n")
    size = sum(f.stat().st_size for f in out.iterdir()) / 2**20
    if size > BUNDLE_LIMIT_MB:
        raise RuntimeError(f"the bundle is {size:.1f} MiB, over {BUNDLE_LIMIT_MB} MiB: carry fewer packages")
    print(f"device bundle: {len(wanted)} wheels, {size:.1f} MiB in {out}")
    return out


def _install(bundle_dir: Path, site: Path) -> float:
    """Install every carried wheel into ``site`` without the network; the seconds it took."""
    t0 = time.perf_counter()
    wheels = sorted(str(p) for p in bundle_dir.glob("*.whl"))
    if not wheels:
        raise FileNotFoundError(f"no wheels in {bundle_dir}: run make device-bundle first")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps", "--target", str(site), *wheels],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise RuntimeError(f"installing the bundle failed:\n{done.stderr[-2000:]}")
    return time.perf_counter() - t0


def _run(argv: Sequence[str], env: dict, timeout: float, cwd: Path) -> tuple[int | None, str, float]:
    """(exit status or None on timeout, stdout + stderr, seconds); a hung command's group is killed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=max(timeout, 1))
        return proc.returncode, out, time.perf_counter() - t0
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        return None, out, time.perf_counter() - t0


_EXECUTE = """
import json, sys
from tpututor_course import runner
r = runner.execute(sys.argv[1], sys.argv[2], profile=sys.argv[3], device=sys.argv[4])
print("RESULT " + json.dumps({"status": r.status, "seconds": r.seconds, "error": r.error}))
"""


def summarize_bench(records: list[dict], other: list[dict]) -> dict:
    """The matmul verdict: JAX's bf16 figure against torch.matmul's and against the datasheet peak."""
    jax_r, torch_r = (records or [None])[0], (other or [None])[0]
    out: dict = {}
    if jax_r:
        out.update(
            jax_tflops=jax_r["flops_per_s"] / 1e12,
            jax_percent_of_peak=jax_r["percent_of_peak"],
            device=jax_r["device"],
            peak_basis=jax_r["peak_basis"],
        )
    if torch_r:
        out["torch_tflops"] = torch_r["flops_per_s"] / 1e12
    if jax_r and torch_r:
        out["jax_over_torch"] = jax_r["flops_per_s"] / torch_r["flops_per_s"]
        out["targets_met"] = bool(out["jax_over_torch"] >= 0.95 and (jax_r["percent_of_peak"] or 0) >= 75)
    return out


def check(
    bundle_dir: Path, out: Path, profile: str = "full", budget: float = BUDGET_S, lessons: Sequence[str] | None = None
) -> dict:
    """Run the lessons and the benchmarks with the carried wheels; write the archive; return the summary."""
    start = time.perf_counter()
    root = catalog.find_root()
    out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="tpututor-device-"))
    site = work / "site"
    install_s = _install(bundle_dir, site)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), str(root)]),
        "MPLBACKEND": "Agg",
        "TPUTUTOR_PROFILE": profile,
        "PYTHONUNBUFFERED": "1",
    }
    _, probe, _ = _run(
        [
            sys.executable,
            "-c",
            "import json, jax, platform; d = jax.devices()[0]; print(json.dumps("
            "{'jax': jax.__version__, 'platform': d.platform, 'device_kind': d.device_kind, "
            "'count': jax.device_count(), 'python': platform.python_version()}))",
        ],
        env,
        300,
        root,
    )
    machine = json.loads([ln for ln in probe.splitlines() if ln.startswith("{")][-1]) if "{" in probe else {}
    executed = work / "executed"
    results = []
    found = [lesson for lesson in catalog.lessons(root / "notebooks") if not lessons or lesson.stem in lessons]
    for lesson in found:
        left = budget - (time.perf_counter() - start) - 90  # keep time for the benchmarks
        if left < 20:
            results.append({"lesson": lesson.stem, "status": "not run", "seconds": 0, "error": "out of time budget"})
            continue
        code, text, seconds = _run(
            [
                sys.executable,
                "-c",
                _EXECUTE,
                str(lesson.notebook),
                str(executed),
                profile,
                machine.get("device_kind", "?"),
            ],
            env,
            min(LESSON_TIMEOUT[profile], left),
            root,
        )
        line = next((ln for ln in text.splitlines() if ln.startswith("RESULT ")), None)
        if code is None:
            results.append(
                {
                    "lesson": lesson.stem,
                    "status": "timeout",
                    "seconds": round(seconds, 1),
                    "error": f"no result within {min(LESSON_TIMEOUT[profile], left):.0f} s",
                }
            )
        elif line is None:
            results.append(
                {"lesson": lesson.stem, "status": "failed", "seconds": round(seconds, 1), "error": text.strip()[-500:]}
            )
        else:
            results.append({"lesson": lesson.stem, **json.loads(line[len("RESULT ") :])})
        print(f"  {lesson.stem}: {results[-1]['status']} in {results[-1]['seconds']:.1f} s", flush=True)

    bench_dir = work / "benchmarks"
    bench_dir.mkdir()
    size = 8192 if profile == "full" else 512
    matmuls = {}
    for framework in ("jax", "torch"):
        code, text, _ = _run(
            [
                sys.executable,
                "-m",
                "tpututor",
                "bench",
                "matmul",
                "--sizes",
                str(size),
                "--dtype",
                "bfloat16",
                "--framework",
                framework,
                "--repeats",
                "10",
                "--json",
            ],
            env,
            180,
            root,
        )
        (bench_dir / f"matmul_{framework}.txt").write_text(text)
        try:
            matmuls[framework] = json.loads(text[text.index("[") :]) if code == 0 else []
        except ValueError:
            matmuls[framework] = []
    scripts = {}
    for script in ("train_throughput.py", "kv_cache.py"):
        path = root / "benchmarks" / script
        if not path.exists():
            scripts[script] = "missing"
            continue
        left = budget - (time.perf_counter() - start)
        args = [] if profile == "full" else ["--quick"]
        code, text, seconds = _run([sys.executable, str(path), *args], env, max(min(240, left), 30), root)
        (bench_dir / script.replace(".py", ".txt")).write_text(text)
        last = [ln for ln in text.strip().splitlines() if ln.strip()]
        scripts[script] = (last[-1] if last else "") if code is not None else f"timeout after {seconds:.0f} s"

    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "profile": profile,
        "machine": machine,
        "install_seconds": round(install_s, 1),
        "seconds": round(time.perf_counter() - start, 1),
        "lessons": results,
        "matmul_bf16": {"size": size, **summarize_bench(matmuls["jax"], matmuls["torch"])},
        "benchmarks": scripts,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    archive = out / "device-check.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(out / "summary.json", arcname="summary.json")
        if executed.exists():
            tar.add(executed, arcname="executed")
        tar.add(bench_dir, arcname="benchmarks")
    shutil.rmtree(work, ignore_errors=True)
    print(
        f"device check: {sum(r['status'] == 'ok' for r in results)}/{len(results)} lessons ok in "
        f"{summary['seconds']:.0f} s; {archive}"
    )
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m tpututor_course device")
    sub = parser.add_subparsers(dest="what", required=True)
    b = sub.add_parser("bundle", help="download the carried wheels for Python 3.12 (here, with network)")
    b.add_argument("--out", default="build/device-bundle")
    c = sub.add_parser("check", help="run lessons and benchmarks with the bundle (on the machine)")
    c.add_argument("--bundle", default="build/device-bundle")
    c.add_argument("--out", default=os.environ.get("OUT", "build/device-check"))
    c.add_argument("--profile", choices=["full", "ci"], default="full")
    c.add_argument("--budget", type=float, default=BUDGET_S, help="seconds for the whole check")
    c.add_argument("lessons", nargs="*", help="only these lessons (NN_topic)")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.what == "bundle":
        bundle(Path(args.out))
        return 0
    summary = check(Path(args.bundle), Path(args.out), args.profile, args.budget, args.lessons or None)
    bad = [r for r in summary["lessons"] if r["status"] not in ("ok", "skipped")]
    return 1 if bad else 0
