"""Does tpututor.bench measure what a plain stopwatch measures?

On this machine, for a float32 n=2048 matmul in JAX, compare tpututor.bench's
median with an independent measurement of the same jitted product: a
time.perf_counter() around each of 20 calls, each blocked on. Both should agree
within 5%. Also print the best framework's figure against the best BLAS figure
in the environment (NumPy's matmul).

Last line: fidelity_ratio=<bench / stopwatch>; exit 1 outside 0.95-1.05.
Run: .venv/bin/python benchmarks/matmul_fidelity.py [--size 2048] [--calls 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tpututor import bench


def stopwatch_jax(n: int, calls: int) -> float:
    """Median seconds of `calls` blocked calls of the jitted n x n matmul, timed by hand."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(1), (n, n), dtype=jnp.float32)
    b = jax.random.normal(jax.random.key(2), (n, n), dtype=jnp.float32)
    f = jax.jit(lambda x, y: x @ y)
    f(a, b).block_until_ready()  # compile and warm up
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f(a, b).block_until_ready()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    n, calls = args.size, args.calls
    flops = 2 * n**3

    # Interleave the two methods and keep each one's best median, so that a burst of
    # background load on a shared machine hits both alike.
    bench_s, watch_s = [], []
    for _ in range(3):
        bench_s.append(bench.matmul(n, "float32", "jax", repeats=calls).seconds)
        watch_s.append(stopwatch_jax(n, calls))
    b, w = min(bench_s), min(watch_s)
    ratio = b / w
    print(f"float32 matmul n={n}, {calls} blocked calls per measurement, best of 3")
    print(f"tpututor.bench (jax): {b * 1e3:8.2f} ms  {flops / b / 1e9:8.1f} GFLOP/s")
    print(f"stopwatch      (jax): {w * 1e3:8.2f} ms  {flops / w / 1e9:8.1f} GFLOP/s")

    records = [bench.matmul(n, "float32", fw, repeats=5) for fw in bench.available()
               if fw in ("jax", "numpy", "torch", "torch_xla")]
    blas = next(r for r in records if r.framework == "numpy")  # NumPy's matmul is the BLAS itself
    best = max((r for r in records if r.framework != "numpy"), key=lambda r: r.flops_per_s)
    print(bench.table(records))
    print(f"best framework {best.framework}: {best.flops_per_s / 1e9:.1f} GFLOP/s; "
          f"best BLAS (numpy): {blas.flops_per_s / 1e9:.1f} GFLOP/s; "
          f"framework_vs_blas={best.flops_per_s / blas.flops_per_s:.2f}")
    print(f"fidelity_ratio={ratio:.2f}")
    return 0 if 0.95 <= ratio <= 1.05 else 1


if __name__ == "__main__":
    sys.exit(main())
