"""What does XLA's fusion buy on this machine? Softmax op by op against jax.jit.

Times the softmax chain (max, subtract, exp, sum, divide) on a (rows, cols)
float32 array run op by op (each jnp call dispatched on its own) and compiled
whole with jax.jit, both through tpututor.bench, and prints the ratio of bytes
moved: op by op (every step reads its inputs and writes its output) against
the fused program (XLA's cost analysis).

Last line: fusion_speedup=<op-by-op time / jit time>; exit 1 below 2.0.
Run: .venv/bin/python benchmarks/fusion_speedup.py [--rows 4096] [--cols 4096]
"""

from __future__ import annotations

import argparse
import sys

import jax
import jax.numpy as jnp

from tpututor import bench, hlo


def softmax(x):
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=-1, keepdims=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4096)
    parser.add_argument("--cols", type=int, default=4096)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="1024 x 1024, 3 repeats: a smoke test in seconds")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.cols, args.repeats = 1024, 1024, 3

    x = jax.random.normal(jax.random.key(0), (args.rows, args.cols), dtype=jnp.float32)
    unfused_bytes = sum(b for _, b in hlo.jaxpr_bytes(softmax, x))
    stages = hlo.jax_stages(softmax, x)
    # Interleave and keep each side's best median, so background load hits both alike.
    eager, fused = [], []
    for _ in range(3):
        eager.append(bench.jax_function(softmax, x, jit=False, bytes=unfused_bytes, repeats=args.repeats))
        fused.append(bench.jax_function(softmax, x, repeats=args.repeats))
    e, f = min(eager, key=lambda r: r.seconds), min(fused, key=lambda r: r.seconds)
    print(f"softmax on ({args.rows}, {args.cols}) float32, {jax.devices()[0].device_kind}")
    print(bench.table([e, f]))
    print(
        f"kernels: {stages.unoptimized.kernels} before optimisation, {stages.optimized.kernels} optimised "
        f"({sum(stages.optimized.fusions.values())} fusions)"
    )
    print(
        f"bytes: op by op {unfused_bytes / 2**20:.0f} MiB, fused {stages.cost['bytes accessed'] / 2**20:.0f} MiB, "
        f"bytes_ratio={unfused_bytes / stages.cost['bytes accessed']:.2f}"
    )
    speedup = e.seconds / f.seconds
    print(f"fusion_speedup={speedup:.2f}")
    return 0 if speedup >= 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
