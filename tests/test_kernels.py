"""tpututor.kernels and tpututor.pallas_compat: traffic and FLOPs counted from BlockSpecs, checked
against hand counts; the step-overhead model against the Pallas matmul guide's v5e timings; the
block rule against Mosaic's own check; the interpret-mode names across JAX versions."""

from __future__ import annotations

import pytest

from conftest import run_python
from tpututor import hardware, kernels, pallas_compat

MIB = 2**20


# ----------------------------------------------------------------- the schedule


def test_the_grid_runs_last_axis_fastest():
    assert list(kernels.grid_steps((2, 3))) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


def test_a_grid_counts_its_steps():
    assert kernels.matmul_cost(512, 256, 384, 128, 128, 128).steps == 4 * 3 * 2
    assert kernels.guide_cost(kernels.GuideRun(1024, None, 1e-4)).steps == 0  # XLA's matmul: no grid


def test_a_block_is_copied_only_when_its_index_changes():
    # x's block (i, kk) in a (2, 2, 2) matmul grid changes at every step: 8 copies.
    assert kernels.copies((2, 2, 2), lambda i, j, kk: (i, kk)) == 8
    # The output block (i, j) stays put while kk runs: 4 write-backs.
    assert kernels.copies((2, 2, 2), lambda i, j, kk: (i, j)) == 4
    # A block that never changes is copied once.
    assert kernels.copies((3, 5), lambda i, j: (0, 0)) == 1


def test_an_index_map_of_the_wrong_arity_is_a_clear_error():
    with pytest.raises(ValueError, match="returned 1 block indices"):
        kernels.copies((2,), lambda i: i, ndim=2)


# ----------------------------------------------------------------- hand counts


def test_matmul_traffic_matches_a_hand_count():
    # 256^3 bf16 with 128 blocks: grid (2, 2, 2). By hand: x's 128x128 bf16 block (32 KiB) is copied
    # at all 8 steps, so is y's; the output (bf16) is written once per (i, j): 4 x 32 KiB.
    cost = kernels.matmul_cost(256, 256, 256, 128, 128, 128)
    block = 128 * 128 * 2
    assert cost.grid == (2, 2, 2)
    assert cost.reads == {"x": 8 * block, "y": 8 * block}
    assert cost.writes == {"out": 4 * block}
    assert cost.flops == 2 * 256**3
    # VMEM: two buffers each of the x, y and out blocks, and the f32 accumulator once.
    assert cost.vmem == 2 * 3 * block + 128 * 128 * 4
    assert cost.intensity == pytest.approx(2 * 256**3 / (20 * block))


def test_matmul_with_one_k_block_reads_x_once():
    # k = bk: x's block (i, 0) stays for the whole row of the grid, so x is read once;
    # y's block (0, j) changes with j, so y is read once per row block.
    cost = kernels.matmul_cost(256, 128, 512, 128, 128, 128, dtype="float32")
    assert cost.reads == {"x": 256 * 128 * 4, "y": 2 * 128 * 512 * 4}
    assert cost.writes == {"out": 256 * 512 * 4}


@pytest.mark.parametrize(
    "dims",
    [
        (256, 256, 256, 128, 128, 128),
        (512, 256, 384, 128, 256, 128),
        (256, 128, 512, 128, 128, 128),
        (128, 128, 128, 128, 128, 128),
        (256, 512, 128, 256, 128, 128),
    ],
)
def test_matmul_closed_form_agrees_with_walking_the_grid(dims):
    m, k, n, bm, bk, bn = dims
    walked = kernels.grid_cost(
        "matmul",
        (m // bm, n // bn, k // bk),
        [
            kernels.Operand("x", (m, k), (bm, bk), lambda i, j, kk: (i, kk), "bfloat16"),
            kernels.Operand("y", (k, n), (bk, bn), lambda i, j, kk: (kk, j), "bfloat16"),
            kernels.Operand("out", (m, n), (bm, bn), lambda i, j, kk: (i, j), "bfloat16", output=True),
        ],
        flops_per_step=2 * bm * bk * bn,
        scratch_bytes=bm * bn * 4,
    )
    closed = kernels.matmul_cost(m, k, n, bm, bk, bn)
    assert (walked.reads, walked.writes, walked.flops, walked.vmem) == (
        closed.reads,
        closed.writes,
        closed.flops,
        closed.vmem,
    )


def test_a_fused_epilogue_adds_flops_but_no_traffic():
    plain = kernels.matmul_cost(256, 256, 256, 128, 128, 128)
    fused = kernels.matmul_cost(256, 256, 256, 128, 128, 128, epilogue_flops_per_element=10)
    assert fused.hbm_bytes == plain.hbm_bytes and fused.flops == plain.flops + 10 * 256 * 256


def test_elementwise_traffic_matches_a_hand_count():
    # (64, 512) f32 with (8, 128) blocks, two inputs: each array read once (128 KiB), the output
    # written once; one FLOP per element.
    cost = kernels.elementwise_cost((64, 512), (8, 128))
    assert cost.grid == (8, 4)
    assert cost.reads == {"x0": 64 * 512 * 4, "x1": 64 * 512 * 4} and cost.writes == {"out": 64 * 512 * 4}
    assert cost.flops == 64 * 512 and cost.vmem == 2 * 3 * 8 * 128 * 4


def test_softmax_traffic_matches_a_hand_count():
    # Whole rows per block: x read once and the result written once, 5 FLOPs per element.
    cost = kernels.softmax_cost(64, 1024, 8)
    assert cost.reads == {"x": 64 * 1024 * 4} and cost.writes == {"out": 64 * 1024 * 4}
    assert cost.flops == 5 * 64 * 1024 and cost.hbm_bytes == 2 * 64 * 1024 * 4


def test_attention_traffic_matches_a_hand_count():
    # seq 512, d 128, f32, blocks 128: grid (4, 4). q's block (i, 0) stays for a grid row: read
    # once. k and v change at every step: read 4 times each. FLOPs: 4 * 128 * 128 * 128 per block.
    cost = kernels.attention_cost(512, 512, 128, 128, 128)
    array = 512 * 128 * 4
    assert cost.reads == {"q": array, "k": 4 * array, "v": 4 * array} and cost.writes == {"out": array}
    assert cost.flops == 16 * 4 * 128**3 and cost.blocks_computed == 16
    scratch = 4 * (2 * 128 * 128 + 128 * 128)
    assert cost.vmem == 2 * 4 * 128 * 128 * 4 + scratch


def test_causal_attention_skips_and_does_not_copy_masked_blocks():
    # Blocks 128 over seq 512: query block i sees key blocks 0..i, so 1 + 2 + 3 + 4 = 10 blocks.
    assert kernels.causal_blocks(512, 512, 128, 128) == 10
    assert kernels.causal_blocks(512, 512, 256, 128) == 2 + 4
    cost = kernels.attention_cost(512, 512, 128, 128, 128, causal=True)
    assert cost.blocks_computed == 10 and cost.flops == 10 * 4 * 128**3
    # K's clamped index per grid row: [0,0,0,0] [0,1,1,1] [0,1,2,2] [0,1,2,3]. Copies happen at each
    # change, and row 1 starts on the block row 0 ended with: 1 + 1 + 3 + 4 = 9 copies.
    block = 128 * 128 * 4
    assert cost.reads["k"] == cost.reads["v"] == 9 * block


# ----------------------------------------------------------------- roofline and VMEM


def test_block_size_decides_the_bound_on_v5e_and_v6e():
    small = kernels.matmul_cost(8192, 8192, 8192, 128, 128, 128)
    mid = kernels.matmul_cost(8192, 8192, 8192, 512, 512, 512)
    large = kernels.matmul_cost(8192, 8192, 8192, 1024, 256, 2048)
    assert small.on("v5e").bound == "memory" and mid.on("v5e").bound == "compute"
    assert mid.on("v6e").bound == "memory" and large.on("v6e").bound == "compute"
    # The estimated time is the larger of the compute and memory times, from the chip table.
    v5e = hardware.lookup("v5e")
    place = small.on("v5e")
    assert place.seconds == pytest.approx(max(small.flops / v5e.peak_flops, small.hbm_bytes / v5e.hbm_bandwidth))
    assert place.fraction_of_peak == pytest.approx(small.intensity * v5e.hbm_bandwidth / v5e.peak_flops)


def test_the_model_reproduces_published_numbers():
    # Pallas TPU matmul guide: v5e's ridge is about 240 FLOPs/byte. Scaling book: a bf16 matmul
    # passing B rows over wide weights has an intensity of about B.
    assert hardware.lookup("v5e").ridge_point == pytest.approx(240, rel=0.02)
    narrow = kernels.matmul_cost(8192, 65536, 65536, 256, 512, 16384)
    assert narrow.intensity == pytest.approx(256, rel=0.05)


def test_intensity_has_the_closed_form_for_bf16():
    # flops 2mkn over bytes 2(mkn/bn + mkn/bm + mn): 1 / (1/bm + 1/bn + 1/k).
    for bm, bk, bn in ((128, 128, 128), (1024, 256, 2048), (512, 512, 1024)):
        cost = kernels.matmul_cost(8192, 8192, 8192, bm, bk, bn)
        assert cost.intensity == pytest.approx(1 / (1 / bm + 1 / bn + 1 / 8192))


def test_a_kernel_on_tpu7x_gets_one_tensorcores_share():
    # TPU7x: two JAX devices per chip, so a pallas_call sees half the chip's peak and bandwidth.
    chip, core = hardware.lookup("7x"), kernels.device_roofline("TPU7x")
    assert chip.jax_devices_per_chip == 2
    assert core.peak_flops == pytest.approx(chip.peak_flops / 2)
    assert core.bandwidth == pytest.approx(chip.hbm_bandwidth / 2)
    assert core.ridge_point == pytest.approx(chip.ridge_point)
    cost = kernels.matmul_cost(4096, 4096, 4096, 512, 512, 512)
    assert cost.on("7x").seconds == pytest.approx(
        2 * max(cost.flops / chip.peak_flops, cost.hbm_bytes / chip.hbm_bandwidth)
    )
    # One device per chip elsewhere: the chip's own figures.
    assert kernels.device_roofline("v5e").peak_flops == hardware.lookup("v5e").peak_flops


# ----------------------------------------------------------------- the guide's v5e timings


def test_the_step_overhead_is_fitted_from_two_of_the_guides_runs():
    fixed, per_step = kernels.guide_overheads()
    # XLA's 1024^3 run: 119.4 us measured against an 10.9 us roofline bound.
    assert fixed == pytest.approx(119.43e-6 - 2 * 1024**3 / 197e12, rel=1e-3)
    # The 128-block run at 8192^3: 262,144 steps, 91.8 ms against a 21.1 ms HBM bound.
    big = kernels.matmul_cost(8192, 8192, 8192, 128, 128, 128)
    assert big.steps == 64**3
    assert per_step == pytest.approx((91.836e-3 - big.hbm_bytes / 819e9 - fixed) / 64**3, rel=1e-3)
    assert 0.2e-6 < per_step < 0.35e-6


def test_the_model_matches_every_guide_run_within_ten_percent():
    fixed, per_step = kernels.guide_overheads()
    for run in kernels.GUIDE_V5E_MATMUL:
        place = kernels.guide_cost(run).on("v5e", step_overhead=per_step)
        assert place.estimate + fixed == pytest.approx(run.seconds, rel=0.10), run
    # Without the step term the roofline misses the 128-block kernel at 8192^3 by more than 4x.
    small = kernels.guide_cost(kernels.GuideRun(8192, (128, 128, 128), 0.0918))
    assert 0.0918 / small.on("v5e").seconds > 4


def test_placement_adds_steps_times_the_overhead():
    cost = kernels.matmul_cost(1024, 1024, 1024, 128, 128, 128)
    place = cost.on("v5e", step_overhead=1e-6)
    assert place.steps == 8**3 and place.overhead_seconds == pytest.approx(512e-6)
    assert place.estimate == pytest.approx(place.seconds + 512e-6)
    assert cost.on("v5e").estimate == cost.on("v5e").seconds
    with pytest.raises(ValueError, match="step_overhead must be a non-negative"):
        cost.on("v5e", step_overhead=-1.0)


def test_vmem_budget_and_capacity():
    cost = kernels.matmul_cost(8192, 8192, 8192, 1024, 256, 2048)
    assert cost.vmem == 2 * (1024 * 256 * 2 + 256 * 2048 * 2 + 1024 * 2048 * 2) + 1024 * 2048 * 4 == 19 * MIB
    assert cost.fits(32 * MIB) and not cost.fits(16 * MIB)
    assert kernels.vmem_capacity("v5e") == kernels.vmem_capacity("TPU v5 lite") == 128 * MIB
    assert kernels.vmem_capacity("v5p") == 64 * MIB
    assert kernels.vmem_capacity("TPU7x") == 64 * MIB and kernels.vmem_capacity("v3") == 16 * MIB


def test_an_unknown_chip_lists_the_known_vmem_figures():
    with pytest.raises(KeyError, match="known: v2, v3, v4, v5e, v5p, v6e, 7x.*JAX 0.8.1"):
        kernels.vmem_capacity("H100")


# ----------------------------------------------------------------- clear errors


def test_the_tpu_block_rule_names_the_fix():
    kernels.check_tile((16, 200), (8, 200))  # as wide as the array: allowed
    kernels.check_tile((64, 512), (16, 256))
    with pytest.raises(ValueError, match="last dimension 100 is neither a multiple of 128 nor the array's full 200"):
        kernels.check_tile((16, 200), (8, 100))
    with pytest.raises(ValueError, match=r"second to last dimension 4 .* use 8 \(divides 16\)"):
        kernels.check_tile((16, 256), (4, 128))
    with pytest.raises(ValueError, match="different numbers of dimensions"):
        kernels.check_tile((16, 256), (128,))


def test_the_fix_never_suggests_a_block_that_drops_data():
    # 128 does not divide 200: with grid = 200 // 128 it would cover 128 of 200 columns. The
    # message offers the full 200, or padding, or a pl.cdiv grid, and says the last block is partial.
    with pytest.raises(ValueError) as err:
        kernels.check_tile((16, 200), (4, 100))
    text = str(err.value)
    assert "use 128" not in text and "use the full 200" in text and "pl.cdiv(200, 128) = 2" in text
    assert "use 8 (divides 16)" in text


@pytest.mark.parametrize(
    "shape, block, dtype",
    [
        ((16, 384), (8, 200), "float32"),
        ((24, 640), (5, 100), "float32"),
        ((3072,), (384,), "float32"),
        ((1000, 1000), (10, 300), "float32"),
        ((4096,), (100,), "bfloat16"),
        ((96, 1152), (12, 500), "float32"),
        ((2, 40, 200), (1, 12, 100), "bfloat16"),
    ],
)
def test_every_suggested_block_divides_the_array_and_obeys_the_rule(shape, block, dtype):
    fixes = kernels.suggest_blocks(shape, block, dtype)
    assert fixes and not kernels.tile_ok(shape, block, dtype)
    for axis, choices in fixes.items():
        assert choices[-1] == shape[axis]  # the full dimension is always offered
        for size in choices:
            assert shape[axis] % size == 0
            fixed = tuple(size if i == axis else b for i, b in enumerate(block))
            assert axis not in kernels.suggest_blocks(shape, fixed, dtype)
    first = tuple(fixes[i][0] if i in fixes else b for i, b in enumerate(block))
    assert kernels.tile_ok(shape, first, dtype)
    assert kernels.suggest_blocks(shape, first, dtype) == {}


def test_rank_one_blocks_follow_mosaics_rule():
    # The whole array, a multiple of 1024, or a power of two of at least 128 x (32 // bits).
    assert kernels.tile_ok((3072,), (3072,)) and kernels.tile_ok((3072,), (1024,))
    assert kernels.tile_ok((3072,), (256,)) and kernels.tile_ok((3072,), (128,))
    assert not kernels.tile_ok((3072,), (384,))  # a multiple of 128, but neither of the above
    assert not kernels.tile_ok((3072,), (128,), "bfloat16") and kernels.tile_ok((3072,), (256,), "bfloat16")
    assert not kernels.tile_ok((4096,), (256,), "int8") and kernels.tile_ok((4096,), (512,), "int8")
    with pytest.raises(ValueError, match=r"power of two of at least 256 \(128 x 2: bfloat16 packs 2 values"):
        kernels.check_tile((3072,), (128,), "bfloat16")


def _mosaic_accepts(shape, block, dtype):
    """Lower a copy kernel with these blocks for a TPU on this CPU: Mosaic's own check runs."""
    import inspect

    import jax
    from jax.experimental import pallas as pl

    def copy_kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    spec = pl.BlockSpec(block, lambda *i: i)
    grid = tuple(-(-a // b) for a, b in zip(shape, block))
    call = pl.pallas_call(
        copy_kernel, out_shape=jax.ShapeDtypeStruct(shape, dtype), grid=grid, in_specs=[spec], out_specs=spec
    )
    # Rank-1 blocks ask for the chip's tiling (JAX 0.10): name one through an abstract mesh.
    extra = {"platform": "tpu"} if "platform" in inspect.signature(jax.sharding.AbstractDevice).parameters else {}
    device = jax.sharding.AbstractDevice(device_kind="TPU v5 lite", num_cores=1, **extra)
    try:
        with jax.sharding.use_abstract_mesh(jax.sharding.AbstractMesh((1,), ("x",), abstract_device=device)):
            lowered = jax.jit(call).trace(jax.ShapeDtypeStruct(shape, dtype)).lower(lowering_platforms=("tpu",))
    except ValueError as err:
        if "block shape" in str(err) or "rank 1 block" in str(err):
            return False
        raise
    assert "tpu_custom_call" in lowered.as_text()
    return True


@pytest.mark.slow
@pytest.mark.parametrize(
    "shape, block, dtype",
    [
        ((16, 200), (4, 100), "float32"),
        ((16, 200), (8, 200), "float32"),
        ((16, 200), (16, 100), "float32"),
        ((16, 256), (8, 128), "float32"),
        ((16, 256), (4, 256), "float32"),
        ((16, 256), (8, 128), "bfloat16"),
        ((2, 16, 256), (1, 8, 128), "float32"),
        ((4, 16, 256), (2, 4, 256), "float32"),
        ((3072,), (384,), "float32"),
        ((3072,), (256,), "float32"),
        ((3072,), (128,), "bfloat16"),
        ((3072,), (1024,), "float32"),
        ((3072,), (3072,), "bfloat16"),
        ((4096,), (2048,), "int8"),
        ((4096,), (256,), "int8"),
    ],
)
def test_check_tile_agrees_with_mosaics_own_check(shape, block, dtype):
    import jax
    import jax.numpy as jnp

    mosaic = _mosaic_accepts(shape, block, getattr(jnp, dtype))
    ours = kernels.tile_ok(shape, block, dtype)
    if len(block) == 1 and jax.__version_info__ < (0, 10):
        assert mosaic or not ours  # JAX 0.7.2's rank-1 rule accepts more; ours is the stricter one
    else:
        assert ours == mosaic


def test_blocks_that_do_not_divide_the_array_are_refused():
    with pytest.raises(ValueError, match="block 96 does not divide k=256"):
        kernels.matmul_cost(256, 256, 256, 128, 96, 128)
    with pytest.raises(ValueError, match=r"block \(8, 100\) does not divide the array \(16, 256\)"):
        kernels.Operand("x", (16, 256), (8, 100), lambda i, j: (i, j))


@pytest.mark.parametrize("bad", [0, -128, 1.5, True])
def test_sizes_must_be_positive_integers(bad):
    with pytest.raises(ValueError, match="positive integer"):
        kernels.matmul_cost(256, 256, 256, bad, 128, 128)


def test_an_unknown_dtype_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown dtype"):
        kernels.matmul_cost(256, 256, 256, 128, 128, 128, dtype="float12")


def test_grid_cost_refuses_duplicate_names_and_bad_counts():
    op = kernels.Operand("x", (16, 128), (8, 128), lambda i: (i, 0))
    with pytest.raises(ValueError, match="unique"):
        kernels.grid_cost("k", (2,), [op, op], flops_per_step=1)
    with pytest.raises(ValueError, match="flops_per_step"):
        kernels.grid_cost("k", (2,), [op], flops_per_step=-1)
    with pytest.raises(ValueError, match="nothing to plot"):
        kernels.plot_on_roofline({})


# ----------------------------------------------------------------- pallas_compat


def test_the_modules_import_no_framework():
    out = run_python(
        "import sys, tpututor.kernels, tpututor.pallas_compat\n"
        "print(sorted(m for m in ('jax', 'numpy', 'matplotlib') if m in sys.modules))"
    )
    assert out.strip() == "[]"


def test_interpret_params_spells_the_cores_field_for_this_jax():
    params = pallas_compat.interpret_params(detect_races=True, cores=2)
    assert getattr(params, pallas_compat.cores_field()) == 2 and params.detect_races
    assert pallas_compat.cores_field() in ("num_cores_or_threads", "num_cores_per_device")


def test_interpret_params_refuses_bad_cores_and_the_version_specific_field():
    with pytest.raises(ValueError, match="cores must be a positive integer"):
        pallas_compat.interpret_params(cores=0)
    with pytest.raises(ValueError, match="pass the number of cores as cores="):
        pallas_compat.interpret_params(num_cores_per_device=2)


def test_grid_point_recorder_takes_both_call_signatures():
    visits = []
    record = pallas_compat.grid_point_recorder(visits)
    assert record("token", (3,), 0) == "token"  # JAX 0.10: (token, point, core) -> token
    assert record((1, 2), 1) is None  # JAX 0.7.2: (point, core)
    assert visits == [((3,), 0), ((1, 2), 1)]
    with pytest.raises(ValueError, match="pass a list"):
        pallas_compat.grid_point_recorder(None)


@pytest.mark.slow
def test_interpret_mode_shuffles_parallel_axes_and_keeps_arbitrary_ones_in_order():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref):
        o_ref[...] = x_ref[...]

    def order(semantics, seed):
        visits = []
        params = pallas_compat.interpret_params(
            random_seed=seed, grid_point_recorder=pallas_compat.grid_point_recorder(visits)
        )
        x = jax.device_put(jnp.ones((64, 128)), jax.devices("cpu")[0])
        jax.block_until_ready(
            pl.pallas_call(
                kernel,
                out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype),
                grid=(8,),
                in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                out_specs=pl.BlockSpec((8, 128), lambda i: (i, 0)),
                compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
                interpret=params,
            )(x)
        )
        return [point[0] for point, _ in visits]

    assert order("arbitrary", 1) == list(range(8))
    shuffled = order("parallel", 1)
    assert sorted(shuffled) == list(range(8)) and shuffled != list(range(8))
    assert order("parallel", None) == order("parallel", 0)  # no seed draws with seed 0


@pytest.mark.slow
def test_the_race_detector_verdict_is_read_for_this_jax():
    import jax
    import jax.numpy as jnp
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import tpu as pltpu

    def kernel(x_ref, o_ref):
        @pl.when(pl.program_id(0) == 0)
        def _():
            o_ref[...] = jnp.zeros_like(o_ref)

        o_ref[...] += x_ref[...]

    def run(semantics):
        x = jax.device_put(jnp.ones((32, 128)), jax.devices("cpu")[0])
        return pl.pallas_call(
            kernel,
            out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype),
            grid=(4,),
            in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
            out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
            compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
            interpret=pallas_compat.interpret_params(detect_races=True, cores=2),
        )(x)

    jax.block_until_ready(run("parallel"))
    assert pallas_compat.races_found()
    assert float(jax.block_until_ready(run("arbitrary"))[0, 0]) == 4.0
    assert not pallas_compat.races_found()
