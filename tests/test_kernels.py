"""tpututor.kernels and tpututor.pallas_compat: traffic and FLOPs counted from BlockSpecs, checked
against hand counts; clear errors for bad blocks; the interpret-mode names across JAX versions."""

from __future__ import annotations

import pytest

from conftest import run_python
from tpututor import hardware, kernels, pallas_compat

MIB = 2**20


# ----------------------------------------------------------------- the schedule


def test_the_grid_runs_last_axis_fastest():
    assert list(kernels.grid_steps((2, 3))) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


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


@pytest.mark.parametrize("dims", [(256, 256, 256, 128, 128, 128), (512, 256, 384, 128, 256, 128),
                                  (256, 128, 512, 128, 128, 128), (128, 128, 128, 128, 128, 128),
                                  (256, 512, 128, 256, 128, 128)])
def test_matmul_closed_form_agrees_with_walking_the_grid(dims):
    m, k, n, bm, bk, bn = dims
    walked = kernels.grid_cost(
        "matmul", (m // bm, n // bn, k // bk),
        [kernels.Operand("x", (m, k), (bm, bk), lambda i, j, kk: (i, kk), "bfloat16"),
         kernels.Operand("y", (k, n), (bk, bn), lambda i, j, kk: (kk, j), "bfloat16"),
         kernels.Operand("out", (m, n), (bm, bn), lambda i, j, kk: (i, j), "bfloat16", output=True)],
        flops_per_step=2 * bm * bk * bn, scratch_bytes=bm * bn * 4)
    closed = kernels.matmul_cost(m, k, n, bm, bk, bn)
    assert (walked.reads, walked.writes, walked.flops, walked.vmem) == (closed.reads, closed.writes, closed.flops,
                                                                         closed.vmem)


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


def test_vmem_budget_and_capacity():
    cost = kernels.matmul_cost(8192, 8192, 8192, 1024, 256, 2048)
    assert cost.vmem == 2 * (1024 * 256 * 2 + 256 * 2048 * 2 + 1024 * 2048 * 2) + 1024 * 2048 * 4 == 19 * MIB
    assert cost.fits(32 * MIB) and not cost.fits(16 * MIB)
    assert kernels.vmem_capacity("v5e") == kernels.vmem_capacity("TPU v5 lite") == 128 * MIB
    assert kernels.vmem_capacity("v5p") == 64 * MIB


def test_an_unknown_chip_lists_the_known_vmem_figures():
    with pytest.raises(KeyError, match="known: v4, v5e, v5p, v6e"):
        kernels.vmem_capacity("H100")


# ----------------------------------------------------------------- clear errors


def test_the_tpu_block_rule_names_the_fix():
    kernels.check_tile((16, 200), (8, 200))  # as wide as the array: allowed
    kernels.check_tile((64, 512), (16, 256))
    with pytest.raises(ValueError, match="last dimension 100 is neither a multiple of 128 nor the array's full 200"):
        kernels.check_tile((16, 200), (8, 100))
    with pytest.raises(ValueError, match="second to last dimension 4 .* use 8"):
        kernels.check_tile((16, 256), (4, 128))
    with pytest.raises(ValueError, match="different numbers of dimensions"):
        kernels.check_tile((16, 256), (128,))


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
    out = run_python("import sys, tpututor.kernels, tpututor.pallas_compat\n"
                     "print(sorted(m for m in ('jax', 'numpy', 'matplotlib') if m in sys.modules))")
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
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct((8, 128), x.dtype), grid=(4,),
                              in_specs=[pl.BlockSpec((8, 128), lambda i: (i, 0))],
                              out_specs=pl.BlockSpec((8, 128), lambda i: (0, 0)),
                              compiler_params=pltpu.CompilerParams(dimension_semantics=(semantics,)),
                              interpret=pallas_compat.interpret_params(detect_races=True, cores=2))(x)

    jax.block_until_ready(run("parallel"))
    assert pallas_compat.races_found()
    assert float(jax.block_until_ready(run("arbitrary"))[0, 0]) == 4.0
    assert not pallas_compat.races_found()
