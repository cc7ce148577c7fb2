"""tpututor.bench and tpututor.roofline: the FLOP/byte math, the records, bad arguments."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import CPU_ONLY, PYTHON, ROOT
from tpututor import bench, roofline

# ----------------------------------------------------------------- roofline math


def test_matmul_flops_are_2mkn():
    assert roofline.matmul_flops(4096, 4096, 4096) == 137_438_953_472
    assert roofline.matmul_flops(2, 3, 5) == 60


def test_matmul_bytes_count_both_operands_and_the_result():
    assert roofline.matmul_bytes(2, 3, 5, "float32") == (6 + 15 + 10) * 4
    assert roofline.matmul_bytes(2, 3, 5, "int8", "int32") == 6 + 15 + 10 * 4


def test_square_matmul_intensity_is_n_over_one_and_a_half_itemsize():
    assert roofline.matmul_intensity(4096, 4096, 4096, "bfloat16") == pytest.approx(4096 / 3)
    assert roofline.matmul_intensity(1024, 1024, 1024, "float32") == pytest.approx(1024 / 6)


def test_elementwise_add_moves_twelve_bytes_per_float32_flop():
    assert roofline.elementwise_intensity(1, 2, 1, "float32") == pytest.approx(1 / 12)
    assert roofline.elementwise_bytes(10, 2, 1, "bfloat16") == 60


def test_crossover_size_puts_the_matmul_on_the_ridge():
    v5e = roofline.Roofline.of("v5e")
    n = v5e.crossover_size("bfloat16")
    assert roofline.matmul_intensity(round(n), round(n), round(n), "bfloat16") == pytest.approx(
        v5e.ridge_point, rel=1e-2
    )
    assert v5e.bound(roofline.matmul_intensity(4096, 4096, 4096, "bfloat16")) == "compute"
    assert v5e.bound(1 / 12) == "memory"


def test_attainable_is_the_lower_of_the_two_roofs():
    roof = roofline.Roofline("toy", peak_flops=100.0, bandwidth=10.0)
    assert roof.ridge_point == 10 and roof.attainable(1) == 10 and roof.attainable(1000) == 100


def test_roofline_of_int8_uses_the_int8_peak():
    assert roofline.Roofline.of("v6e", "int8").peak_flops == 1836e12
    with pytest.raises(ValueError, match="no int8 peak"):
        roofline.Roofline.of("7x", "int8")


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, None])
def test_matmul_math_rejects_non_positive_sizes(bad):
    with pytest.raises(ValueError, match="positive integer"):
        roofline.matmul_flops(bad, 2, 2)


def test_unknown_dtype_names_the_known_ones():
    with pytest.raises(ValueError, match="unknown dtype 'float128'.*float32"):
        roofline.itemsize("float128")


def test_roofline_plot_draws_roofs_and_measured_series(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    ax = roofline.plot([roofline.Roofline.of("v5e")], {"matmul": [(10, 1e10), (100, 1e11)]})
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[0].startswith("TPU v5e (bf16), ridge 241") and labels[1] == "measured: matmul"


# ----------------------------------------------------------------- timing and records


def test_time_calls_syncs_every_timed_call_and_times_the_first_apart():
    events = []
    first, times = bench.time_calls(
        lambda: events.append("call") or len(events), lambda r: events.append("sync"), warmup=2, repeats=3
    )
    assert events == ["call", "sync"] * 5 and len(times) == 3 and first >= 0


@pytest.mark.parametrize("kw", [{"repeats": 0}, {"warmup": 0}])
def test_time_calls_rejects_zero_repeats_or_warmup(kw):
    with pytest.raises(ValueError, match="at least 1"):
        bench.time_calls(lambda: None, lambda r: None, **kw)


def test_alternating_timing_takes_turns_and_rotates_who_goes_first():
    events = []
    calls = {name: (lambda name=name: events.append(name) or name) for name in "ab"}
    times = bench.time_alternating(calls, lambda r: events.append("sync"), warmup=2, repeats=4)
    runs = [e for e in events if e != "sync"]
    assert runs == ["a", "a", "b", "b"] + ["a", "b", "b", "a", "a", "b", "b", "a"]
    assert events.count("sync") == len(runs) and {k: len(v) for k, v in times.items()} == {"a": 4, "b": 4}


def test_a_busy_spell_falls_on_both_alternating_calls_alike(monkeypatch):
    clock = {"now": 0.0, "runs": 0}

    def run(cost):  # runs 5 to 8 are slowed by a neighbour: ten times the cost
        clock["runs"] += 1
        clock["now"] += cost * (10 if 5 <= clock["runs"] <= 8 else 1)

    monkeypatch.setattr(bench.time, "perf_counter", lambda: clock["now"])
    times = bench.time_alternating({"fast": lambda: run(1.0), "slow": lambda: run(1.1)}, lambda r: None, repeats=5)
    assert sorted(times["fast"])[2] < sorted(times["slow"])[2]  # the medians keep the order


@pytest.mark.parametrize("calls, match", [({"a": lambda: None}, "two calls or more"), ({}, "two calls or more")])
def test_alternating_timing_needs_two_calls_to_compare(calls, match):
    with pytest.raises(ValueError, match=match):
        bench.time_alternating(calls, lambda r: None)


class _Clock:
    """A fake time.perf_counter: each call() of the timed function advances it by ``step`` seconds."""

    def __init__(self, step: float):
        self.now, self.step = 0.0, step

    def perf_counter(self) -> float:
        return self.now

    def call(self):
        self.now += self.step
        return self.now


def test_amortised_timing_queues_k_calls_waits_once_and_divides_by_k(monkeypatch):
    clock, synced = _Clock(0.5), []
    monkeypatch.setattr(bench, "time", clock)
    first, times = bench.time_calls(clock.call, synced.append, repeats=3, calls=4)
    assert first == 0.5 and times == [0.5, 0.5, 0.5]  # 4 calls of 0.5 s in 2 s: 0.5 s per call
    # the first call alone, then one untimed burst (warm-up), then 3 timed bursts: each one wait for 4 results
    assert [len(s) if isinstance(s, list) else 1 for s in synced] == [1, 4, 4, 4, 4]


def test_blocked_timing_waits_after_every_call(monkeypatch):
    clock, synced = _Clock(0.25), []
    monkeypatch.setattr(bench, "time", clock)
    _, times = bench.time_calls(clock.call, synced.append, repeats=3)
    assert times == [0.25] * 3 and len(synced) == 4 and not any(isinstance(s, list) for s in synced)


@pytest.mark.parametrize("seconds_per_call, k", [(1e-3, 10), (2.0, 1), (1e-7, bench.AUTO_MAX_CALLS)])
def test_auto_calls_fill_the_target_from_one_blocked_call(monkeypatch, seconds_per_call, k):
    clock = _Clock(seconds_per_call)
    monkeypatch.setattr(bench, "time", clock)
    assert bench._timed(clock.call, lambda r: r, 1, 2, "auto")[2] == k


def test_auto_calls_are_not_fooled_by_one_slow_probe(monkeypatch):
    steps = iter([1e-3, 0.5, 1e-3, 1e-3] + [1e-3] * 100)  # the first call, then a probe the machine interrupted

    class Clock(_Clock):
        def call(self):
            self.now += next(steps)

    clock = Clock(0.0)
    monkeypatch.setattr(bench, "time", clock)
    assert bench._timed(clock.call, lambda r: r, 1, 1, "auto")[2] == 10  # the best probe: 1 ms, so 10 calls


@pytest.mark.parametrize("calls", [0, -3, 2.5, True, "many", None])
def test_calls_must_be_a_positive_whole_number_or_auto(calls):
    with pytest.raises(ValueError, match="calls must be a whole number of at least 1 or 'auto'"):
        bench.matmul(8, "float32", "numpy", calls=calls)


@CPU_ONLY
def test_the_record_says_which_timing_mode_produced_it():
    blocked = bench.matmul(32, "float32", "jax", repeats=2)
    amortised = bench.matmul(32, "float32", "jax", repeats=2, calls=8)
    auto = bench.run("add", 32, "float32", "jax", repeats=2, calls="auto")
    assert (blocked.calls, blocked.timing) == (1, "blocked")
    assert (amortised.calls, amortised.timing) == (8, "amortised") and amortised.to_dict()["timing"] == "amortised"
    assert auto.calls > 1 and auto.timing == "amortised"  # a 32x32 add takes microseconds: auto queues many
    assert amortised.flops == 2 * 32**3 and amortised.size == 32  # k calls change the clock, not the counts


@CPU_ONLY
def test_amortised_tiny_matmul_is_not_charged_k_times():
    # Real clocks on a shared machine: compare the best of several runs, with a wide margin. Forgetting to
    # divide by k would make the amortised figure about k times a call's dispatch (40-180x the blocked figure
    # here); dividing gives 0.3-1.4x on a quiet machine, and up to 2.4x was seen during the whole suite.
    k = 128
    blocked = bench.matmul(16, "float32", "jax", repeats=7)
    amortised = bench.matmul(16, "float32", "jax", repeats=7, calls=k)
    assert amortised.calls == k and amortised.min_seconds < 8 * blocked.min_seconds


def test_table_adds_a_calls_column_only_for_amortised_records():
    one = bench.matmul(16, "float32", "numpy", repeats=1)
    many = bench.matmul(16, "float32", "numpy", repeats=1, calls=3)
    assert (
        "calls/wait" not in bench.table([one]) and bench.table([one, many]).splitlines()[0].split()[-1] == "calls/wait"
    )


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_jax_operands_are_drawn_from_different_keys(dtype):
    import numpy as np

    prepared = bench._jax(bench.OPS["matmul"], [(8, 8), (8, 8)], dtype, None)
    a, b = (np.asarray(x) for x in prepared.inputs)
    assert not np.array_equal(a, b), "a square matmul must not be x @ x"


@CPU_ONLY
def test_a_dot_algorithm_the_backend_lacks_is_unsupported_not_a_crash(capsys):
    with pytest.raises(bench.UnsupportedError, match="TF32_TF32_F32.*not supported"):
        bench.matmul(16, "float32", "jax", precision="TF32_TF32_F32")
    records = bench.sweep([16], ["float32"], ["jax"], progress=False, repeats=1, precision="TF32_TF32_F32")
    assert records == [] and "skipped jax float32" in capsys.readouterr().out
    assert bench.matmul(16, "float32", "jax", repeats=1, precision="F32_F32_F32").flops == 2 * 16**3


def test_a_bad_precision_name_is_still_jax_own_error():
    with pytest.raises(ValueError, match="Precision argument must be one of") as info:
        bench.matmul(8, "float32", "jax", precision="bogus")
    assert not isinstance(info.value, bench.UnsupportedError)


@pytest.mark.parametrize("generation, kind, peak", [("v5e", "TPU v5e", 197e12), (None, "TPU", None)])
def test_tensorflow_on_a_tpu_names_the_chip_so_the_peak_is_found(monkeypatch, generation, kind, peak):
    from tpututor import runtime

    monkeypatch.setattr(runtime, "detect_accelerator", lambda: runtime.Accelerator("tpu", generation, 1))
    assert bench._tensorflow_kind(None, "tpu") == kind
    assert bench.peak_for(kind, "tpu", "bfloat16")[0] == peak


@CPU_ONLY
def test_jax_record_is_tidy_and_consistent():
    r = bench.matmul(64, "float32", "jax", repeats=3)
    assert (r.framework, r.device, r.platform, r.op, r.size, r.dtype) == ("jax", "cpu", "cpu", "matmul", 64, "float32")
    assert r.flops == 2 * 64**3 and r.bytes == 3 * 64 * 64 * 4
    assert r.min_seconds <= r.seconds <= r.max_seconds and len(r.times) == 3
    assert r.flops_per_s == pytest.approx(r.flops / r.seconds)
    assert r.compile_seconds > 0 and r.peak_basis.startswith("CPU float32 estimate")
    assert r.percent_of_peak == pytest.approx(100 * r.flops_per_s / r.peak_flops)
    json.dumps(r.to_dict())


def test_rectangular_matmul_has_no_size_but_the_right_shapes():
    r = bench.matmul((32, 16, 8), "float32", "numpy", repeats=1)
    assert r.size is None and r.shapes == [[32, 16], [16, 8]] and r.flops == 2 * 32 * 16 * 8


def test_add_is_measured_with_its_own_flops_and_bytes():
    r = bench.run("add", 128, "float32", "jax", repeats=2)
    assert r.flops == 128 * 128 and r.bytes == 3 * 128 * 128 * 4 and r.intensity == pytest.approx(1 / 12)


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@CPU_ONLY
def test_other_frameworks_give_the_same_kind_of_record(framework):
    r = bench.matmul(64, "float32", framework, repeats=2)
    assert r.framework == framework and r.platform == "cpu" and r.flops_per_s > 0


@pytest.mark.slow
@CPU_ONLY
def test_torch_xla_is_timed_through_sync_in_a_fresh_process():
    code = (
        "from tpututor import bench; r = bench.matmul(64, 'float32', 'torch_xla', repeats=2); "
        "print(r.platform, r.first_call_seconds > r.seconds)"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.stdout.split()[-2:] == ["cpu", "True"], out.stderr[-2000:]


def test_torch_xla_after_tensorflow_is_refused_with_the_fix():
    code = (
        "import sys; sys.modules['tensorflow'] = type(sys)('tensorflow')\n"
        "from tpututor import bench\n"
        "try:\n    bench.matmul(8, 'float32', 'torch_xla')\nexcept bench.UnsupportedError as e:\n    print(e)"
    )
    out = subprocess.run([PYTHON, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "restart the kernel and use torch_xla before TensorFlow" in out.stdout


@pytest.mark.parametrize(
    "framework, dtype, reason",
    [
        ("numpy", "bfloat16", "NumPy has no fast bfloat16"),
        ("jax", "float64", "jax_enable_x64"),
        ("torch", "int8", "no general int8 matmul"),
    ],
)
def test_dtypes_a_framework_cannot_do_raise_unsupported(framework, dtype, reason):
    with pytest.raises(bench.UnsupportedError, match=reason):
        bench.matmul(16, dtype, framework)


@pytest.mark.parametrize(
    "args, message",
    [
        (dict(size=0), "positive integer"),
        (dict(size=(4, 4)), "positive integer"),
        (dict(dtype="float128"), "unknown dtype"),
        (dict(framework="mxnet"), "unknown framework"),
    ],
)
def test_bad_arguments_are_clear_errors(args, message):
    kw = {"size": 16, "dtype": "float32", "framework": "jax", **args}
    with pytest.raises(ValueError, match=message):
        bench.matmul(kw["size"], kw["dtype"], kw["framework"])


def test_sweep_skips_unsupported_combinations_with_a_note(capsys):
    records = bench.sweep([16, 32], ["float32", "bfloat16"], ["numpy"], progress=False, repeats=1)
    assert [(r.size, r.dtype) for r in records] == [(16, "float32"), (32, "float32")]
    assert "skipped numpy bfloat16" in capsys.readouterr().out


def test_available_lists_the_installed_frameworks():
    assert set(bench.available()) == set(bench.FRAMEWORKS)  # the course environment has them all


def test_table_has_a_row_per_record():
    r = bench.matmul(16, "float32", "numpy", repeats=1)
    lines = bench.table([r, r]).splitlines()
    assert len(lines) == 4 and lines[0].split()[:3] == ["framework", "device", "op"]


# ----------------------------------------------------------------- CLI


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [PYTHON, "-m", "tpututor", "bench", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )


def test_cli_bench_json_lists_one_record_per_size():
    out = cli("matmul", "--sizes", "64,128", "--dtype", "float32", "--repeats", "2", "--json")
    assert out.returncode == 0, out.stderr
    records = json.loads(out.stdout)
    assert [r["size"] for r in records] == [64, 128]
    for r in records:
        assert {"framework", "device", "size", "dtype", "seconds", "flops_per_s", "percent_of_peak"} <= set(r)


def test_cli_bench_calls_amortises_the_wait_and_says_so():
    out = cli("matmul", "--sizes", "64", "--repeats", "2", "--calls", "8", "--json")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)[0]
    assert (record["calls"], record["timing"]) == (8, "amortised")


@CPU_ONLY
def test_cli_bench_table_names_the_peak_it_compares_with():
    out = cli("matmul", "--sizes", "64", "--framework", "numpy", "--repeats", "1")
    assert out.returncode == 0 and "numpy" in out.stdout and "peak: CPU float32 estimate" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["matmul", "--sizes", "0,512"], "sizes must be positive"),
        (["matmul", "--sizes", "-4"], "sizes must be positive"),
        (["matmul", "--sizes", "big"], "whole numbers"),
        (["matmul", "--dtype", "float128"], "unknown dtype 'float128'"),
        (["matmul", "--sizes", "64", "--dtype", "bfloat16", "--framework", "numpy"], "no fast bfloat16"),
        (["matmul", "--sizes", "64", "--dtype", "float64"], "jax_enable_x64"),
        (["matmul", "--repeats", "0"], "positive whole number"),
        (["matmul", "--calls", "0"], "whole number >= 1 or 'auto'"),
        (["conv"], "invalid choice"),
    ],
)
def test_cli_bench_bad_arguments_exit_2_with_a_clear_message(args, message):
    out = cli(*args)
    assert out.returncode == 2 and message in out.stderr


def test_second_tpu_runtime_in_one_process_is_refused_with_the_fix(monkeypatch):
    monkeypatch.setattr(bench, "_tpu_attached", lambda: True)
    monkeypatch.delenv("PJRT_DEVICE", raising=False)
    monkeypatch.setitem(__import__("sys").modules, "torch_xla", type(__import__("sys"))("torch_xla"))
    with pytest.raises(bench.UnsupportedError, match="--framework jax") as info:
        bench.matmul(8, "float32", "jax")
    message = str(info.value)
    assert "one process owns a chip" in message and "already in use" in message and "forever" not in message
