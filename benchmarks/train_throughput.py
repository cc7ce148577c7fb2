"""Training throughput of the model of lesson 08a (training), full profile: JAX against eager PyTorch, one CPU.

The model is tpututor.lm's Transformer at the full profile (lm.PROFILES["full"]), trained the way
the lesson trains it: float32 master weights, bfloat16 matmuls, AdamW. The model is the Llama
family's (tpututor.models.llama); the PyTorch version is Hugging Face's LlamaForCausalLM built from the
same config.json, in eager PyTorch with the same batch (torch.autocast for the bfloat16 matmuls,
torch.optim.AdamW). Each framework is timed at one thread and at every core (on a busy
machine a thread pool can do worse with more threads; each framework's faster setting is the one
compared). XLA fixes its CPU threads when its backend starts, so JAX at one thread runs in a child
process (XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"); the rest
run in this process. All take turns in interleaved rounds, so that a burst of background load hits
each alike; each figure is the median of the rounds, with the spread (min-max) beside it.

MFU is model FLOPs per step (tpututor.mfu: 6·N per token plus causal attention) over the step
time and the *measured matmul ceiling*: the fastest bfloat16 matmul tpututor.bench measures here
in JAX or PyTorch (on a CPU; JAX alone elsewhere), re-measured every round and the best kept (a
CPU has no datasheet peak).

On a GPU (JAX's default device not a CPU), PyTorch runs on the GPU too when its CUDA build sees
one, so both frameworks use the same device; the chip table's datasheet peak is printed beside the
measured ceiling. Every line names the device that produced it.

Last line: both figures and the targets: MFU at least 30% of the ceiling, and JAX tokens/s at
least PyTorch eager's. Exit status 0 either way (a missed target is reported, not an error).
Run: .venv/bin/python benchmarks/train_throughput.py [--batch 16] [--rounds 5] [--steps 3]
     [--compute-dtype float32] (both frameworks in float32: what the CPU does without bfloat16)
     [--quick] (the ci-profile model, batch 8, 2 rounds of 2 steps: a smoke test in seconds)
     [--json PATH] (also write the figures, with the device, to PATH)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

from tpututor import bench, frameworks, hardware, lm, mfu


def jax_trainer(cfg: lm.Config, batch: int, corpus):
    """The lesson's compiled train step on one device: returns run(n) -> seconds per step."""
    import jax

    tx = lm.optimizer(3e-4, 1000)
    grid = lm.make_mesh(devices=jax.devices()[:1])
    state = lm.init_state(cfg, tx, 0, grid)
    b = lm.to_device(corpus[0], lm.batch_sharding(grid))
    step = lm.make_train_step(cfg, tx, grid).lower(state, b).compile()
    holder = {"state": state}

    def run(n: int) -> float:
        s = holder["state"]
        t0 = time.perf_counter()
        for _ in range(n):
            s, loss = step(s, b)
        loss.block_until_ready()
        holder["state"] = s
        return (time.perf_counter() - t0) / n

    return run


def torch_trainer(cfg: lm.Config, batch: int, corpus, torch, device: str = "cpu"):
    """The same model, batch and optimizer in eager PyTorch on ``device``: returns run(n) -> seconds per step."""
    from transformers import LlamaConfig, LlamaForCausalLM

    F = torch.nn.functional
    torch.manual_seed(0)
    # Hugging Face's LlamaForCausalLM is the PyTorch twin of lm.LM (tpututor.models.llama.Llama): the same
    # config.json describes both (lesson 13a (bring your own model) compares their logits).
    hf = LlamaConfig(**lm.llama_config(cfg).to_hf())
    hf._attn_implementation = "sdpa"  # F.scaled_dot_product_attention, PyTorch's fused attention
    model = LlamaForCausalLM(hf).float()
    model = model.to(device)
    matrices = [p for p in model.parameters() if p.ndim > 1]  # as lm.optimizer: no decay on the norms' scales
    others = [p for p in model.parameters() if p.ndim <= 1]
    opt = torch.optim.AdamW(
        [{"params": matrices, "weight_decay": 0.1}, {"params": others, "weight_decay": 0.0}], lr=3e-4, betas=(0.9, 0.95)
    )
    inputs = torch.as_tensor(corpus[0]["inputs"], dtype=torch.long, device=device)
    targets = torch.as_tensor(corpus[0]["targets"], dtype=torch.long, device=device)

    autocast = cfg.compute_dtype == "bfloat16"

    def step():
        with torch.autocast(device, dtype=torch.bfloat16, enabled=autocast):  # bf16 matmuls, float32 weights
            logits = model(inputs).logits.float()
        loss = F.cross_entropy(logits.view(-1, cfg.vocab), targets.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as lm.optimizer's optax.clip_by_global_norm(1.0)
        opt.step()
        return loss

    def run(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            loss = step()
        loss.detach().item()  # waits for the device (on a CPU, eager work is done when each call returns)
        return (time.perf_counter() - t0) / n

    return run


ONE_THREAD_XLA = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"


class JaxWorker:
    """The JAX trainer in a child process whose XLA CPU runtime runs on one thread.

    XLA reads its thread settings once, when its backend starts, so a second setting needs a second
    process. The child builds the same trainer and answers ``run N`` (seconds per step) and
    ``ceiling SIZE`` (matmul FLOP/s) on its stdin, one at a time, so the rounds stay interleaved.
    """

    def __init__(self, argv: list[str]):
        env = {
            **os.environ,
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {ONE_THREAD_XLA}".strip(),
        }
        self.proc = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--worker", *argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self._ask(None)  # waits until the child has compiled its step

    def _ask(self, command: str | None) -> float:
        if command is not None:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith("@"):
                return float(line[1:])
        raise RuntimeError(f"the one-thread JAX process stopped (exit status {self.proc.wait()}); its error is above")

    def __call__(self, n: int) -> float:
        return self._ask(f"run {n}")

    def ceiling(self, dtype: str, size: int) -> float:
        return self._ask(f"ceiling {size} {dtype}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def worker(cfg: lm.Config, batch: int, corpus) -> int:
    """The child's side of :class:`JaxWorker`: '@' lines on stdout answer the parent's commands."""
    run = jax_trainer(cfg, batch, corpus)
    run(1)  # warm-up
    print("@0", flush=True)
    for line in sys.stdin:
        command, *rest = line.split()
        if command == "run":
            print(f"@{run(int(rest[0]))!r}", flush=True)
        elif command == "ceiling":
            print(f"@{ceiling(rest[1], (int(rest[0]),))[0]!r}", flush=True)
    return 0


def _with_threads(torch, threads: int, run):
    """``run`` with PyTorch's intra-op thread pool set to ``threads`` while it runs."""

    def timed(n: int) -> float:
        torch.set_num_threads(threads)
        return run(n)

    return timed


def ceiling(dtype: str, sizes=(512, 1024, 2048), frameworks_=("jax",)) -> tuple[float, int]:
    """The best matmul FLOP/s tpututor.bench measures here: (FLOP/s of the fastest call, its size).

    ``frameworks_`` lists whose matmuls count (on a CPU, JAX's and PyTorch's: a ceiling is the best
    this machine does, whichever library does it).
    """
    records = [bench.matmul(n, dtype, fw, repeats=5) for n in sizes for fw in frameworks_]
    best = max(records, key=lambda r: r.flops / r.min_seconds)
    return best.flops / best.min_seconds, best.shapes[0][0]


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):,.0f} (range {min(values):,.0f}-{max(values):,.0f})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=16, help="sequences per step (as in the lesson)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per round and framework")
    parser.add_argument(
        "--compute-dtype",
        default="bfloat16",
        choices=("bfloat16", "float32"),
        help="the matmuls' dtype in both frameworks (the lesson: bfloat16)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="the ci-profile model, batch 8, 2 rounds of 2 steps: a smoke test in seconds",
    )
    parser.add_argument("--json", metavar="PATH", help="also write the measured figures, with the device, to PATH")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)  # the one-thread JAX child
    args = parser.parse_args()
    if min(args.batch, args.rounds, args.steps) < 1:
        parser.error("--batch, --rounds and --steps must be at least 1")
    profile = "ci" if args.quick else "full"
    batch, rounds, steps = (8, 2, 2) if args.quick else (args.batch, args.rounds, args.steps)
    sizes = (512,) if args.quick else (512, 1024, 2048)

    import jax

    device = jax.devices()[0]
    where = device.platform.upper() + (
        "" if device.device_kind.lower() == device.platform else f" ({device.device_kind})"
    )
    cfg = lm.Config(**{**lm.PROFILES[profile].to_dict(), "compute_dtype": args.compute_dtype})
    text, _, _ = lm.stdlib_corpus(60_000 if args.quick else 300_000)
    corpus = lm.dataset(lm.encode(text), cfg.seq_len, batch, seed=0)
    tokens = batch * cfg.seq_len
    flops = mfu.flops_per_step(cfg, batch)
    if args.worker:
        return worker(cfg, batch, corpus)
    print(
        f"model ({profile} profile{', --quick' if args.quick else ''}): {cfg}\n{cfg.n_params():,} parameters, "
        f"batch {batch} x {cfg.seq_len} = {tokens:,} tokens, {flops / 1e9:.2f} GFLOPs per step (model FLOPs); "
        f"JAX {jax.__version__} on {where}; host CPU: {os.cpu_count()} logical cores"
    )

    torch = frameworks.load("torch")
    libraries = ("jax", "torch") if torch is not None and device.platform == "cpu" else ("jax",)
    peak, size = ceiling(cfg.compute_dtype, sizes, libraries)
    datasheet, datasheet_label = mfu.peak(device)
    chip = hardware.find(device.device_kind) if device.platform != "cpu" else None
    if datasheet and chip and chip.jax_devices_per_chip > 1:  # the table's peak is per chip; this is one JAX device
        datasheet, datasheet_label = datasheet / chip.jax_devices_per_chip, f"{datasheet_label}, per JAX device"
    whose = "the faster of JAX and PyTorch" if len(libraries) > 1 else "JAX"
    print(
        f"matmul ceiling: {peak / 1e9:,.1f} GFLOP/s ({cfg.compute_dtype}, {whose} on {where}, fastest call at "
        f"{'/'.join(map(str, sizes))}: {size})"
        + (f"; {datasheet_label}: {datasheet / 1e9:,.0f} GFLOP/s" if datasheet else f"; {datasheet_label}")
    )

    cores = os.cpu_count() or 1
    one_thread = None
    if device.platform == "cpu" and cores > 1:  # JAX at one thread and at every core, as PyTorch below
        runners = {f"jax, {cores} threads": jax_trainer(cfg, batch, corpus)}
        one_thread = JaxWorker(
            ["--batch", str(batch), "--compute-dtype", args.compute_dtype] + (["--quick"] if args.quick else [])
        )
        runners["jax, 1 thread"] = one_thread
        peak = max(peak, one_thread.ceiling(cfg.compute_dtype, size))
    else:
        runners = {"jax": jax_trainer(cfg, batch, corpus)}
    if torch is None:
        print(frameworks.status("torch").skipped("the PyTorch comparison"))
    elif device.platform == "gpu" and not torch.cuda.is_available():
        print(
            "JAX runs on a GPU but this PyTorch sees none: the PyTorch comparison is skipped "
            "(install a CUDA build of torch to compare on the same device)"
        )
    elif device.platform == "gpu":
        runners[f"torch eager, cuda ({torch.cuda.get_device_name(0)})"] = torch_trainer(
            cfg, batch, corpus, torch, "cuda"
        )
    elif device.platform != "cpu":
        print(f"JAX runs on {where}; eager PyTorch has no such device here: the PyTorch comparison is skipped")
    else:  # PyTorch at one thread and at every core: on a busy machine its thread pool can do worse with more
        for threads in sorted({1, os.cpu_count() or 1}):
            runners[f"torch eager, {threads} thread{'s' if threads > 1 else ''}"] = _with_threads(
                torch, threads, torch_trainer(cfg, batch, corpus, torch)
            )
    for run in runners.values():
        run(1)  # warm-up (the JAX step is compiled already; PyTorch's first step allocates)

    rates: dict[str, list[float]] = {name: [] for name in runners}
    for r in range(rounds):  # interleaved: each round times every framework once, and the ceiling
        for name, run in runners.items():
            rates[name].append(tokens / run(steps))
        peak = max(
            peak,
            ceiling(cfg.compute_dtype, (size,), libraries)[0],  # the best seen: a ceiling
            one_thread.ceiling(cfg.compute_dtype, size) if one_thread else 0.0,
        )
        print(
            f"round {r + 1}: "
            + ", ".join(f"{n} {v[-1]:,.0f} tok/s" for n, v in rates.items())
            + f"; ceiling so far {peak / 1e9:,.0f} GFLOP/s",
            flush=True,
        )

    if one_thread is not None:
        one_thread.close()
    jax_names = [n for n in rates if n.startswith("jax")]
    jax_best = max(jax_names, key=lambda n: statistics.median(rates[n]))
    jax_rate = statistics.median(rates[jax_best])
    jax_mfu = jax_rate / tokens * flops / peak
    record = {
        "benchmark": "train_throughput",
        "quick": args.quick,
        "profile": profile,
        "config": cfg.to_dict(),
        "batch": batch,
        "rounds": rounds,
        "steps_per_round": steps,
        "device": device.device_kind,
        "platform": device.platform,
        "jax": jax.__version__,
        "model_flops_per_step": flops,
        "ceiling_flops_per_s": peak,
        "datasheet_peak_flops_per_s": datasheet,
        "datasheet_peak": datasheet_label,
        "tokens_per_s": {n: statistics.median(v) for n, v in rates.items()},
        "jax_faster_setting": jax_best,
        "mfu_of_ceiling": {n: statistics.median(v) / tokens * flops / peak for n, v in rates.items()},
    }
    if datasheet:
        record["mfu_of_datasheet"] = jax_rate / tokens * flops / datasheet
    parts = [
        f"{name} on {where} {spread(rates[name])} tok/s, MFU {statistics.median(rates[name]) / tokens * flops / peak:.1%}"
        for name in jax_names
    ]
    parts[jax_names.index(jax_best)] += f" of the {peak / 1e9:,.0f} GFLOP/s measured ceiling" + (
        f" ({record['mfu_of_datasheet']:.1%} of the {datasheet_label})" if datasheet else ""
    )
    setting = f" (its faster setting, {jax_best.split(', ', 1)[1]})" if len(jax_names) > 1 else ""
    targets = [f"jax MFU >= 30%{setting}: {'met' if jax_mfu >= 0.30 else 'MISSED'}"]
    torch_names = [n for n in rates if n.startswith("torch")]
    for name in torch_names:
        rate = statistics.median(rates[name])
        parts.append(f"{name} {spread(rates[name])} tok/s, MFU {rate / tokens * flops / peak:.1%}")
    if torch_names:
        best = max(torch_names, key=lambda n: statistics.median(rates[n]))
        torch_rate = statistics.median(rates[best])
        targets.append(
            f"jax{setting} >= torch eager (its faster setting, {best.split(', ', 1)[1]}): "
            f"{'met' if jax_rate >= torch_rate else 'MISSED'} ({jax_rate / torch_rate:.2f}x)"
        )
        record["jax_over_torch"] = jax_rate / torch_rate
    else:
        targets.append("jax >= torch eager: not measured (no torch on this device)")
    record["targets"] = targets
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
        print(f"wrote {args.json}")
    print("train_throughput: " + "; ".join(parts) + " | targets: " + "; ".join(targets))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
