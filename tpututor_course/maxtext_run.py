"""The tiny Llama of lesson 13a (bring your own model) through MaxText on a CPU, recorded for its stack table.

MaxText needs Python 3.12 and a newer JAX than the course pins, so it lives in its own venv
(``.venv-maxtext``, pinned by ``binder/maxtext-requirements.txt``). ``make maxtext-run`` builds that
venv and runs ``python -m tpututor_course.maxtext_run --out docs/artifacts`` from the main venv, which:

1. writes a tiny random Llama with transformers' ``save_pretrained`` (main venv; the shape of
   ``tests/test_models.py``, norms perturbed so that a conversion that dropped them would show);
2. converts it offline with ``maxtext.checkpoint_conversion.to_maxtext`` (MaxText venv);
3. trains it a few steps on the CPU with ``maxtext.trainers.pre_train.train``, starting from the
   converted checkpoint, on MaxText's synthetic data (one fixed batch of random tokens, so the loss
   falls as the model memorises it);
4. reads the converted checkpoint back and compares every tensor with the Hugging Face one it came
   from (MaxText venv);
5. writes ``maxtext-cpu-run.json`` (commands, versions, date, machine, seconds, losses, the
   checkpoint's tensors) and ``maxtext-cpu-run.log`` (the outputs' tails) into ``--out``.

Each command runs under a timeout, with the Hugging Face libraries told to stay offline and, where
``unshare --net`` works (root on Linux), with no network at all. Commit the two files: they are
provenance, written only from what the commands printed.

Subcommands, run by the steps above in the right venv: ``checkpoint DIR``, ``inspect HF_DIR MT_ITEMS``,
``versions``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["SHAPE", "MAXTEXT_MODEL", "maxtext_overrides", "parse_losses", "run", "main"]

# The tiny Llama of tests/test_models.py and lesson 13a (bring your own model), default RoPE (theta 500000).
SHAPE = dict(
    vocab_size=256,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    max_position_embeddings=512,
)
ROPE_THETA = 500000.0
RMS_EPS = 1e-6
# A Llama name MaxText's converter knows; override_model_config=true replaces its dimensions with ours.
MAXTEXT_MODEL = "llama3.1-8b"
STEPS = 20
ARTIFACT = "maxtext-cpu-run"
OFFLINE_ENV = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "JAX_PLATFORMS": "cpu",
    "PYTHONUNBUFFERED": "1",
}
LOG_LINES = 90  # per command, in the .log
NOISE = re.compile(r"Config param |Created BasePyTreeCheckpointHandler|^\s*$")


def maxtext_overrides() -> list[str]:
    """MaxText's ``key=value`` settings for :data:`SHAPE` (the same ones for conversion and training)."""
    return [
        "model_name=" + MAXTEXT_MODEL,
        "override_model_config=true",
        f"base_emb_dim={SHAPE['hidden_size']}",
        f"base_num_query_heads={SHAPE['num_attention_heads']}",
        f"base_num_kv_heads={SHAPE['num_key_value_heads']}",
        f"base_mlp_dim={SHAPE['intermediate_size']}",
        f"head_dim={SHAPE['hidden_size'] // SHAPE['num_attention_heads']}",
        f"base_num_decoder_layers={SHAPE['num_hidden_layers']}",
        f"vocab_size={SHAPE['vocab_size']}",
        f"normalization_layer_epsilon={RMS_EPS}",
        f"rope_max_timescale={int(ROPE_THETA)}",
        "scan_layers=false",
        "hardware=cpu",
        "skip_jax_distributed_system=true",
    ]


_STEP = re.compile(r"completed step: (\d+), seconds: ([0-9.]+),.*?\bloss: ([-+0-9.eE]+|nan|inf)")


def parse_losses(text: str) -> list[dict[str, float]]:
    """``[{step, loss, seconds}]`` from MaxText's ``completed step: ...`` lines, first report per step."""
    seen: dict[int, dict[str, float]] = {}
    for m in _STEP.finditer(text):
        seen.setdefault(
            int(m.group(1)), {"step": int(m.group(1)), "loss": float(m.group(3)), "seconds": float(m.group(2))}
        )
    return [seen[k] for k in sorted(seen)]


def _cmd(argv: Sequence[str], env: dict[str, str], cwd: Path, timeout: float) -> dict[str, Any]:
    """Run ``argv`` (its process group killed on timeout): the record, and its output under ``"output"``."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        code = None
    shell = " ".join(f"{k}={v}" for k, v in env.items()) + " " + shlex.join(argv)
    return {
        "argv": list(argv),
        "shell": shell.strip(),
        "timeout_s": timeout,
        "returncode": code,
        "timed_out": code is None,
        "wall_s": round(time.perf_counter() - t0, 1),
        "output": out,
    }


def _no_network_prefix() -> list[str]:
    """``["unshare", "--net", "--"]`` where that works here (it cuts the command off every network)."""
    if shutil.which("unshare"):
        probe = subprocess.run(["unshare", "--net", "--", "true"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return ["unshare", "--net", "--"]
    return []


def _machine() -> dict[str, Any]:
    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = None
    try:
        memory = round(int(Path("/proc/meminfo").read_text().split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "memory_gib": memory, "os": platform.platform()}


def _versions(names: Sequence[str]) -> dict[str, str | None]:
    from importlib import metadata

    found: dict[str, str | None] = {}
    for name in names:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def _last_json(text: str) -> Any:
    line = [ln for ln in text.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[-1][len("RESULT ") :]) if line else None


def _size_gib(path: Path) -> float:
    return round(sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink()) / 2**30, 2)


def _tail(name: str, record: dict[str, Any]) -> list[str]:
    lines = [ln for ln in record["output"].splitlines() if not NOISE.search(ln)]
    head = (
        f"==== {name}: exit {record['returncode']}, {record['wall_s']} s; last {min(len(lines), LOG_LINES)} "
        f"of {len(lines)} lines (pyconfig's 'Config param' lines and blank lines left out) ===="
    )
    return [head, "$ " + record["shell"], *lines[-LOG_LINES:], ""]


def run(
    out: Path, maxtext_python: str, work: Path, steps: int = STEPS, timeout: float = 900, keep: bool = False
) -> dict[str, Any]:
    """Run the steps (each recorded, even a failed one), write ``out/maxtext-cpu-run.json`` and ``.log``."""
    root = Path.cwd()
    started = dt.datetime.now(dt.UTC)
    work = work.resolve()  # Orbax writes to absolute paths only
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    hf_dir, mt_dir, train_dir = work / "hf", work / "maxtext", work / "train"
    net = _no_network_prefix()
    env = dict(OFFLINE_ENV)
    records: dict[str, dict[str, Any]] = {}

    def step(name: str, argv: list[str], limit: float) -> dict[str, Any]:
        print(f"maxtext-run: {name}: {shlex.join(argv)}", flush=True)
        records[name] = _cmd(argv, env, root, limit)
        print(f"maxtext-run: {name}: exit {records[name]['returncode']} in {records[name]['wall_s']} s", flush=True)
        return records[name]

    probe = step("versions", [*net, maxtext_python, "-m", "tpututor_course.maxtext_run", "versions"], 300)
    maxtext_env = _last_json(probe["output"]) or {}
    base_yml = maxtext_env.get("base_yml", "")
    if base_yml.startswith(str(root) + os.sep):
        base_yml = os.path.relpath(base_yml, root)
    ok = probe["returncode"] == 0 and bool(base_yml)
    here = os.path.relpath(sys.executable, root) if sys.executable.startswith(str(root) + os.sep) else sys.executable
    if ok:
        ok = (
            step("checkpoint", [*net, here, "-m", "tpututor_course.maxtext_run", "checkpoint", str(hf_dir)], 300)[
                "returncode"
            ]
            == 0
        )
    if ok:
        ok = (
            step(
                "convert",
                [
                    *net,
                    maxtext_python,
                    "-m",
                    "maxtext.checkpoint_conversion.to_maxtext",
                    base_yml,
                    *maxtext_overrides(),
                    f"base_output_directory={mt_dir}",
                    "run_name=convert",
                    f"--hf_model_path={hf_dir}",
                    "--save_dtype=float32",
                ],
                timeout,
            )["returncode"]
            == 0
        )
    losses: list[dict[str, float]] = []
    if ok:
        trained = step(
            "train",
            [
                *net,
                maxtext_python,
                "-m",
                "maxtext.trainers.pre_train.train",
                base_yml,
                *maxtext_overrides(),
                f"load_parameters_path={mt_dir}/0/items",
                "run_name=train",
                f"base_output_directory={train_dir}",
                "dataset_type=synthetic",
                f"steps={steps}",
                "learning_rate=3e-3",
                "max_target_length=64",
                "per_device_batch_size=2",
                "enable_checkpointing=false",
                "attention=dot_product",
                "dtype=float32",
                "weight_dtype=float32",
            ],
            timeout,
        )
        losses = parse_losses(trained["output"])
        ok = trained["returncode"] == 0 and len(losses) == steps and all(math.isfinite(s["loss"]) for s in losses)
    tensors = None
    if ok:
        inspected = step(
            "inspect",
            [*net, maxtext_python, "-m", "tpututor_course.maxtext_run", "inspect", str(hf_dir), f"{mt_dir}/0/items"],
            300,
        )
        tensors = _last_json(inspected["output"])
        ok = inspected["returncode"] == 0 and tensors is not None

    finished = dt.datetime.now(dt.UTC)
    venv = Path(maxtext_python).parent.parent
    requirements = root / "binder" / "maxtext-requirements.txt"
    record: dict[str, Any] = {
        "what": "the tiny Llama of lesson 13 (bring your own model), written with save_pretrained, converted to a "
        "MaxText checkpoint and trained on a CPU",
        "made_by": "make maxtext-run (python -m tpututor_course.maxtext_run --out docs/artifacts)",
        "date_utc": started.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "finished_utc": finished.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "ok": ok,
        "machine": _machine(),
        "network": "none: each command ran under `unshare --net`"
        if net
        else "not cut off (no unshare here): Hugging Face offline variables only",
        "versions": {
            "maxtext_venv": {
                k: maxtext_env.get("versions", {}).get(k)
                for k in (
                    "python",
                    "maxtext",
                    "jax",
                    "jaxlib",
                    "libtpu",
                    "transformers",
                    "flax",
                    "optax",
                    "orbax-checkpoint",
                    "safetensors",
                )
            },
            "main_venv": {"python": platform.python_version(), **_versions(("transformers", "torch", "safetensors"))},
        },
        "install": {
            "requirements": requirements.relative_to(root).as_posix() if requirements.exists() else None,
            "venv": str(venv),
            "venv_gib": _size_gib(venv) if venv.is_dir() else None,
            "pip_freeze": maxtext_env.get("freeze", []),
        },
        "model": {**SHAPE, "rope_theta": ROPE_THETA, "rms_norm_eps": RMS_EPS, "maxtext_model_name": MAXTEXT_MODEL},
        "commands": [{"name": n, **{k: v for k, v in r.items() if k != "output"}} for n, r in records.items()],
        "training": {
            "steps": len(losses),
            "data": "dataset_type=synthetic: one fixed batch of random tokens",
            "first_loss": losses[0]["loss"] if losses else None,
            "last_loss": losses[-1]["loss"] if losses else None,
            "ln_vocab": round(math.log(SHAPE["vocab_size"]), 3),
            "losses": losses,
        },
        "checkpoint": tensors,
        "findings": _findings(tensors),
        "log": f"{ARTIFACT}.log",
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{ARTIFACT}.json").write_text(json.dumps(record, indent=1) + "\n")
    log = [f"# {record['what']}: {record['date_utc']}, {record['made_by']}", ""]
    for name, r in records.items():
        log += _tail(name, r)
    (out / f"{ARTIFACT}.log").write_text("\n".join(log) + "\n")
    if not keep:
        shutil.rmtree(work, ignore_errors=True)
    print(f"maxtext-run: {'ok' if ok else 'FAILED'}; wrote {out / (ARTIFACT + '.json')} and .log", flush=True)
    return record


def _findings(tensors: dict[str, Any] | None) -> list[str]:
    """What the tensor comparison showed, in words, from its numbers only."""
    if not tensors:
        return []
    rows = {r["name"]: r for r in tensors["tensors"]}
    said = [
        f"{sum('hf' in r for r in rows.values())} tensors compared with the Hugging Face ones: layout "
        + (
            "matches (transposes, per-head split, RoPE halves interleaved)"
            if tensors["layout_matches"]
            else "does NOT match"
        )
    ]
    for name in tensors["scale_mismatches"]:
        r = rows[name]
        said.append(
            f"{name} carries {r['scale']} x the Hugging Face weight where 1/sqrt(head_dim) = "
            f"{r['scale_expected']} was expected: it folds in 1/sqrt({1 / r['scale'] ** 2:.0f}), not the "
            f"checkpoint's 1/sqrt({1 / r['scale_expected'] ** 2:.0f})"
        )
    return said


def write_checkpoint(directory: Path) -> None:
    """The tiny random Llama, norms perturbed, written with ``save_pretrained`` (main venv)."""
    import torch
    import transformers

    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(
        transformers.LlamaConfig(**SHAPE, rope_theta=ROPE_THETA, rms_norm_eps=RMS_EPS)
    )
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(directory)
    print("RESULT " + json.dumps({"directory": str(directory), "files": sorted(p.name for p in directory.iterdir())}))


def inspect(hf_dir: Path, items: Path) -> None:
    """Every converted tensor against the Hugging Face tensor it came from (MaxText venv).

    The expected MaxText layout: kernels transposed to (in, out), attention kernels split per head,
    query and key heads' halves interleaved (MaxText's RoPE layout), and the query kernel carrying
    1/sqrt(head_dim) (MaxText does not scale attention logits at run time). ``scale`` is the factor
    that best maps the expected tensor onto the converted one; ``max_abs_diff`` what is left after it.
    """
    import jax
    import numpy as np
    import orbax.checkpoint as ocp
    from safetensors.numpy import load_file

    checkpointer = ocp.PyTreeCheckpointer()
    meta = checkpointer.metadata(str(items))
    tree = getattr(getattr(meta, "item_metadata", meta), "tree", getattr(meta, "item_metadata", meta))
    args = jax.tree.map(lambda _: ocp.RestoreArgs(restore_type=np.ndarray), tree)
    restored = checkpointer.restore(str(items), args=ocp.args.PyTreeRestore(restore_args=args))
    hf = load_file(str(hf_dir / "model.safetensors"))
    d, h, k = SHAPE["hidden_size"], SHAPE["num_attention_heads"], SHAPE["num_key_value_heads"]
    hd = d // h

    def interleave(w: Any) -> Any:  # Hugging Face's rotate-half layout -> MaxText's adjacent pairs
        return np.stack([w[..., : hd // 2], w[..., hd // 2 :]], axis=-1).reshape(w.shape)

    expected: dict[str, tuple[str, Any, float]] = {
        "token_embedder/embedding": ("model.embed_tokens.weight", hf["model.embed_tokens.weight"], 1.0),
        "decoder/logits_dense/kernel": ("lm_head.weight", hf["lm_head.weight"].T, 1.0),
        "decoder/decoder_norm/scale": ("model.norm.weight", hf["model.norm.weight"], 1.0),
    }
    for i in range(SHAPE["num_hidden_layers"]):
        p, m = f"model.layers.{i}.", f"decoder/layers_{i}/"
        expected.update(
            {
                m + "self_attention/query/kernel": (
                    p + "self_attn.q_proj.weight",
                    interleave(hf[p + "self_attn.q_proj.weight"].T.reshape(d, h, hd)),
                    1 / math.sqrt(hd),
                ),
                m + "self_attention/key/kernel": (
                    p + "self_attn.k_proj.weight",
                    interleave(hf[p + "self_attn.k_proj.weight"].T.reshape(d, k, hd)),
                    1.0,
                ),
                m + "self_attention/value/kernel": (
                    p + "self_attn.v_proj.weight",
                    hf[p + "self_attn.v_proj.weight"].T.reshape(d, k, hd),
                    1.0,
                ),
                m + "self_attention/out/kernel": (
                    p + "self_attn.o_proj.weight",
                    hf[p + "self_attn.o_proj.weight"].T.reshape(h, hd, d),
                    1.0,
                ),
                m + "mlp/wi_0/kernel": (p + "mlp.gate_proj.weight", hf[p + "mlp.gate_proj.weight"].T, 1.0),
                m + "mlp/wi_1/kernel": (p + "mlp.up_proj.weight", hf[p + "mlp.up_proj.weight"].T, 1.0),
                m + "mlp/wo/kernel": (p + "mlp.down_proj.weight", hf[p + "mlp.down_proj.weight"].T, 1.0),
                m + "pre_self_attention_layer_norm/scale": (
                    p + "input_layernorm.weight",
                    hf[p + "input_layernorm.weight"],
                    1.0,
                ),
                m + "post_self_attention_layer_norm/scale": (
                    p + "post_attention_layernorm.weight",
                    hf[p + "post_attention_layernorm.weight"],
                    1.0,
                ),
            }
        )
    params = restored["params"]["params"]
    rows, found = [], set()
    for path, value in jax.tree_util.tree_flatten_with_path(params)[0]:
        name = "/".join(str(getattr(key, "key", key)) for key in path)
        found.add(name)
        row: dict[str, Any] = {"name": name, "shape": list(value.shape), "dtype": str(value.dtype)}
        if name in expected:
            source, want, scale_expected = expected[name]
            want = np.asarray(want, np.float64)
            got = np.asarray(value, np.float64)
            if want.shape == got.shape:
                scale = float((got * want).sum() / (want * want).sum())
                row.update(
                    hf=source,
                    scale=round(scale, 6),
                    scale_expected=round(scale_expected, 6),
                    max_abs_diff=float(f"{np.abs(got - scale * want).max():.3g}"),
                )
            else:
                row.update(hf=source, error=f"shape {list(got.shape)}, expected {list(want.shape)}")
        rows.append(row)
    print(
        "RESULT "
        + json.dumps(
            {
                "format": "Orbax (OCDBT, zarr3) PyTree: params/params/...",
                "tensors": rows,
                "n_parameters": int(sum(math.prod(r["shape"]) for r in rows)),
                "missing": sorted(set(expected) - found),
                "unexpected": sorted(found - set(expected)),
                "layout_matches": all(r.get("max_abs_diff", 1.0) < 1e-6 for r in rows if "hf" in r),
                "scale_mismatches": [
                    r["name"]
                    for r in rows
                    if "scale" in r and not math.isclose(r["scale"], r["scale_expected"], rel_tol=1e-4)
                ],
            }
        )
    )


def versions() -> None:
    """The MaxText venv's versions, every installed distribution, and MaxText's ``configs/base.yml``."""
    from importlib import metadata
    from importlib.util import find_spec

    spec = find_spec("maxtext")
    base = str(Path(spec.origin).parent / "configs" / "base.yml") if spec and spec.origin else ""
    found = {
        "python": platform.python_version(),
        **_versions(
            ("maxtext", "jax", "jaxlib", "libtpu", "transformers", "flax", "optax", "orbax-checkpoint", "safetensors")
        ),
    }
    freeze = sorted(f"{d.metadata['Name']}=={d.version}" for d in metadata.distributions())
    print("RESULT " + json.dumps({"versions": found, "freeze": freeze, "base_yml": base}))


def main(argv: Sequence[str] | None = None) -> int:
    """``--out DIR`` runs everything; ``checkpoint``, ``inspect`` and ``versions`` are its steps."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["checkpoint"] and len(args) == 2:
        write_checkpoint(Path(args[1]))
        return 0
    if args[:1] == ["inspect"] and len(args) == 3:
        inspect(Path(args[1]), Path(args[2]))
        return 0
    if args == ["versions"]:
        versions()
        return 0
    parser = argparse.ArgumentParser(prog="python -m tpututor_course.maxtext_run", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="where maxtext-cpu-run.json and .log go")
    parser.add_argument(
        "--maxtext-python",
        default=".venv-maxtext/bin/python",
        help="the MaxText venv's python (make maxtext-run builds .venv-maxtext)",
    )
    parser.add_argument("--work", type=Path, default=Path("build/maxtext-run"), help="scratch (deleted after)")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--timeout", type=float, default=900, help="seconds per MaxText command")
    parser.add_argument("--keep", action="store_true", help="keep the scratch checkpoints")
    ns = parser.parse_args(args)
    if not Path(ns.maxtext_python).exists():
        print(f"maxtext-run: {ns.maxtext_python} does not exist: run make maxtext-run", file=sys.stderr)
        return 2
    record = run(ns.out, ns.maxtext_python, ns.work, ns.steps, ns.timeout, ns.keep)
    return 0 if record["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
