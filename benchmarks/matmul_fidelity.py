"""Does tpututor.bench measure what a plain stopwatch measures?

For a float32 n x n matmul in JAX on this machine, one compiled program is timed two ways,
interleaved call by call so that background load on a shared machine hits both alike:
``tpututor.bench.time_calls`` (the timing core every bench function uses) and a
``time.perf_counter()`` around a blocked call, written out by hand. Each gets ``--calls`` samples;
the medians, their interquartile spread and their ratio are printed. Then ``bench.matmul`` end to
end (its own inputs and compile) is checked against the same stopwatch, also interleaved. Last,
the best framework's figure against NumPy's BLAS, for context.

Last line: fidelity_ratio=<bench / stopwatch> spread=<half the IQR over the median, both methods>;
exit 1 when the ratio is outside 0.97-1.03. Five runs in a row should print the same ratio within 3%.
Run: .venv/bin/python benchmarks/matmul_fidelity.py [--size 1024] [--calls 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

from tpututor import bench


def quartiles(samples: list[float]) -> tuple[float, float, float]:
    q1, q2, q3 = statistics.quantiles(samples, n=4)
    return q1, q2, q3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="size 256, 30 calls: a smoke test in seconds")
    args = parser.parse_args()
    n, calls = (256, 30) if args.quick else (args.size, args.calls)
    flops = 2 * n**3

    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(1), (n, n), dtype=jnp.float32)
    b = jax.random.normal(jax.random.key(2), (n, n), dtype=jnp.float32)
    compiled = jax.jit(lambda x, y: x @ y).lower(a, b).compile()
    compiled(a, b).block_until_ready()  # warm-up

    timed_by_bench, timed_by_hand = [], []
    for _ in range(calls):  # call by call: A, B, A, B, ...
        timed_by_bench += bench.time_calls(lambda: compiled(a, b), jax.block_until_ready, warmup=1, repeats=1)[1]
        t0 = time.perf_counter()
        compiled(a, b).block_until_ready()
        timed_by_hand.append(time.perf_counter() - t0)
    qb, qh = quartiles(timed_by_bench), quartiles(timed_by_hand)
    ratio = qb[1] / qh[1]
    spread = max((qb[2] - qb[0]) / 2 / qb[1], (qh[2] - qh[0]) / 2 / qh[1])
    print(f"float32 matmul n={n} on {jax.devices()[0].device_kind}, {calls} calls each, interleaved call by call")
    print(
        f"bench.time_calls: median {qb[1] * 1e3:7.3f} ms (IQR {qb[0] * 1e3:.3f}-{qb[2] * 1e3:.3f})  "
        f"{flops / qb[1] / 1e9:7.1f} GFLOP/s"
    )
    print(
        f"stopwatch       : median {qh[1] * 1e3:7.3f} ms (IQR {qh[0] * 1e3:.3f}-{qh[2] * 1e3:.3f})  "
        f"{flops / qh[1] / 1e9:7.1f} GFLOP/s"
    )

    end_to_end, by_hand = [], []
    for _ in range(10):  # bench.matmul builds its own inputs and compiles: interleave in blocks of 5
        end_to_end += bench.matmul(n, "float32", "jax", repeats=5).times
        for _ in range(5):
            t0 = time.perf_counter()
            compiled(a, b).block_until_ready()
            by_hand.append(time.perf_counter() - t0)
    print(
        f"bench.matmul end to end: median {statistics.median(end_to_end) * 1e3:.3f} ms against "
        f"{statistics.median(by_hand) * 1e3:.3f} ms by hand (ratio "
        f"{statistics.median(end_to_end) / statistics.median(by_hand):.3f})"
    )

    records = [
        bench.matmul(n, "float32", fw, repeats=5)
        for fw in bench.available()
        if fw in ("jax", "numpy", "torch", "torch_xla")
    ]
    blas = next((r for r in records if r.framework == "numpy"), None)  # NumPy's matmul is the BLAS itself
    print(bench.table(records))
    if blas is not None and len(records) > 1:
        best = max((r for r in records if r.framework != "numpy"), key=lambda r: r.flops_per_s)
        print(
            f"best framework {best.framework}: {best.flops_per_s / 1e9:.1f} GFLOP/s; "
            f"best BLAS (numpy): {blas.flops_per_s / 1e9:.1f} GFLOP/s; "
            f"framework_vs_blas={best.flops_per_s / blas.flops_per_s:.2f}"
        )
    print(f"fidelity_ratio={ratio:.3f} spread={spread:.3f}")
    return 0 if 0.97 <= ratio <= 1.03 else 1


if __name__ == "__main__":
    sys.exit(main())
