"""What does a KV cache buy? Tokens/s decoding with the cache against recomputing the prefix.

A model as wide as the full profile of lesson 08a (training), tpututor.lm with random weights
(speed does not depend on them) and a context of --context tokens, generates from an
8-token prompt to the end of its context, greedily, batch 1, two ways: with a KV cache (tpututor.serving.decode: one prefill, then one
decode step per token) and without (every step runs the whole window through lm.LM, as
lm.generate does). The two runs alternate, --repeats times, so background load hits both alike;
the medians and the spread (min to max) are printed. Then one decode step with a full cache is
timed against its bandwidth bound, (cache bytes + weight bytes) / the bandwidth an elementwise add
reaches on this device.

Last line: kv_cache_speedup=<recompute time / cached time> decode_vs_bound=<step time / bound>;
exit 1 when the speedup is below 5 (--quick, a smoke test at 64 tokens, only reports).
Run: .venv/bin/python benchmarks/kv_cache.py [--context 256] [--repeats 5] [--quick]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from tpututor import bench, lm
from tpututor.serving import decode, sizing

PROMPT = 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--context", type=int, default=256, help="cache length = the model's seq_len (default 256)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="64 tokens, 3 repeats: seconds, not minutes; reports only")
    args = parser.parse_args()
    base = lm.PROFILES["full"]
    context = 64 if args.quick else args.context
    repeats = 3 if args.quick else args.repeats
    if context <= PROMPT + 1:
        parser.error(f"--context must exceed the {PROMPT}-token prompt")
    cfg = dataclasses.replace(base, seq_len=context)
    params = decode.serving_params(decode.random_params(cfg), cfg)
    device = jax.devices()[0]
    prefill, step, recompute = decode.make_prefill(cfg), decode.make_step(cfg), decode.recompute_step(cfg)
    prompt = jnp.asarray(np.random.default_rng(0).integers(1, cfg.vocab, (1, PROMPT)), jnp.int32)
    new = context - PROMPT

    def cached():
        cache = decode.init_cache(cfg, 1)
        tok, _, cache = prefill(params, prompt, cache, jnp.array([PROMPT], jnp.int32))
        pos = jax.device_put(jnp.array([PROMPT], jnp.int32), device)  # committed, like the step's output
        for _ in range(new - 1):
            tok, cache, pos = step(params, tok, cache, pos)
        return tok.block_until_ready()

    def recomputed():
        window = jax.device_put(jnp.zeros((1, context), jnp.int32).at[:, :PROMPT].set(prompt), device)
        t = jax.device_put(jnp.int32(PROMPT), device)  # committed, like the step's outputs: one compilation
        for _ in range(new):
            window, t = recompute(params, window, t)
        return window.block_until_ready()

    cached(), recomputed()  # compile both, warm up
    times: dict[str, list[float]] = {"kv cache": [], "recompute": []}
    for _ in range(repeats):
        for name, fn in (("kv cache", cached), ("recompute", recomputed)):
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    print(
        f"{cfg}\n{new} new tokens after an {PROMPT}-token prompt, batch 1, {repeats} alternating runs, "
        f"on {device.platform.upper()} ({device.device_kind})"
    )
    for name, ts in times.items():
        rates = [new / t for t in ts]
        print(
            f"  {name:10s} {statistics.median(rates):10,.0f} tokens/s  (spread {min(rates):,.0f} to {max(rates):,.0f})"
        )
    pairs = [r / c for r, c in zip(times["recompute"], times["kv cache"])]
    speedup = statistics.median(times["recompute"]) / statistics.median(times["kv cache"])
    print(f"  speedup per run: {', '.join(f'{p:.1f}' for p in pairs)}")

    # One decode step with the whole cache against (cache bytes + weight bytes) / measured bandwidth.
    add = bench.run(
        "add", 2048 if args.quick else 4096, "float32", "jax", repeats=repeats
    )  # 48 or 192 MiB: past the caches
    state = [jax.device_put(jnp.zeros(1, jnp.int32), device), decode.init_cache(cfg, 1)]
    pos = jnp.full(1, context - 1, jnp.int32)

    def steps(k=16):
        for _ in range(k):
            state[0], state[1], _ = step(params, state[0], state[1], pos)
        return state[0]

    _, runs = bench.time_calls(steps, jax.block_until_ready, warmup=2, repeats=repeats)
    step_s = statistics.median(runs) / 16
    bandwidth = add.bytes / add.min_seconds  # the best run: the least interference from other work
    bound = sizing.min_step_seconds(cfg, 1, context, bandwidth)
    print(
        f"decode step, full cache: {step_s * 1e6:,.0f} us (spread {min(runs) / 16 * 1e6:,.0f} to "
        f"{max(runs) / 16 * 1e6:,.0f}); bound {bound * 1e6:,.1f} us at the measured {bandwidth / 1e9:.1f} GB/s "
        f"(median run {add.bytes_per_s / 1e9:.1f} GB/s)"
    )
    print(f"kv_cache_speedup={speedup:.2f} decode_vs_bound={step_s / bound:.2f}")
    return 0 if args.quick or speedup >= 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
