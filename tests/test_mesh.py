"""tpututor.mesh: meshes that fit, shard layouts, collectives read from compiled HLO."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from tpututor import mesh


@pytest.fixture(scope="module")
def grid():
    return mesh.make_mesh((4, 2), ("data", "model"))


def test_eight_simulated_devices_are_picked():
    assert len(mesh.pick_devices(8)) == 8


def test_too_many_devices_names_the_simulation_flag():
    with pytest.raises(ValueError, match="jax_num_cpu_devices', 64"):
        mesh.pick_devices(64)
    with pytest.raises(ValueError, match="at least one"):
        mesh.pick_devices(0)


def test_suggest_shapes_lists_every_factorisation():
    assert mesh.suggest_shapes(8) == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert (2, 2, 2) in mesh.suggest_shapes(8, 3) and mesh.suggest_shapes(5, 1) == [(5,)]


def test_a_mesh_that_does_not_fit_says_which_shapes_would():
    with pytest.raises(ValueError, match=r"needs 16 devices but 8 are present. Shapes that fit 8 devices: \(1, 8\)"):
        mesh.make_mesh((4, 4), ("data", "model"))
    with pytest.raises(ValueError, match="needs 8 devices but 4 were given"):
        mesh.make_mesh((4, 2), ("data", "model"), devices=jax.devices()[:4])


@pytest.mark.parametrize(
    "shape, names, message",
    [
        ((4, 2), ("data",), "2 axes but 1 names"),
        ((0, 8), ("a", "b"), "positive integers"),
        ((2.5, 2), ("a", "b"), "positive"),
    ],
)
def test_bad_mesh_arguments_are_clear_errors(shape, names, message):
    with pytest.raises(ValueError, match=message):
        mesh.make_mesh(shape, names)


def test_auto_and_explicit_axes(grid):
    assert set(grid.axis_types) == {jax.sharding.AxisType.Auto}
    explicit = mesh.make_mesh((4, 2), ("data", "model"), explicit=True)
    assert set(explicit.axis_types) == {jax.sharding.AxisType.Explicit}


def test_shards_show_each_devices_block(grid):
    a = jax.device_put(jnp.zeros((16, 8)), NamedSharding(grid, P("data", "model")))
    blocks = mesh.shards(a)
    assert len(blocks) == 8 and {b["shape"] for b in blocks} == {(4, 4)}
    assert blocks[1] == {"device": 1, "index": ("0:4", "4:8"), "shape": (4, 4)}
    assert "P('data', 'model')" in mesh.shard_table(a) and "| 7 | [12:16, 4:8] | (4, 4) |" in mesh.shard_table(a)


def test_replicated_array_has_whole_blocks(grid):
    a = jax.device_put(jnp.zeros((4, 4)), NamedSharding(grid, P()))
    assert {b["index"] for b in mesh.shards(a)} == {(":", ":")}


def test_plot_sharding_draws_one_patch_per_block_and_refuses_3d(grid, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    ax = mesh.plot_sharding(jax.device_put(jnp.zeros((8, 8)), NamedSharding(grid, P("data", None))))
    assert len(ax.patches) == 4
    ax.figure.savefig(tmp_path / "sharding.png")
    with pytest.raises(ValueError, match="1-D and 2-D"):
        mesh.plot_sharding(jax.device_put(jnp.zeros((2, 2, 2)), NamedSharding(grid, P())))


def _mlp_step(params, x, y):
    def loss_fn(p):
        return jnp.mean((jax.nn.relu(x @ p["w1"]) @ p["w2"] - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), loss


@pytest.fixture(scope="module")
def mlp():
    k1, k2, k3 = jax.random.split(jax.random.key(0), 3)
    params = {"w1": jax.random.normal(k1, (32, 64)), "w2": jax.random.normal(k2, (64, 8))}
    return params, jax.random.normal(k3, (16, 32)), jnp.ones((16, 8))


STRATEGIES = {
    "dp": ({"w1": P(), "w2": P()}, P(("data", "model"))),
    "tp": ({"w1": P(None, "model"), "w2": P("model", None)}, P("data")),
    "fsdp": ({"w1": P(("data", "model"), None), "w2": P(("data", "model"), None)}, P(("data", "model"))),
}


def _placed(grid, mlp, name):
    """The parameter shardings of a strategy, and the MLP's arguments placed by it."""
    params, x, y = mlp
    specs, data = STRATEGIES[name]
    shard = {k: NamedSharding(grid, s) for k, s in specs.items()}
    return shard, (
        jax.device_put(params, shard),
        jax.device_put(x, NamedSharding(grid, data)),
        jax.device_put(y, NamedSharding(grid, data)),
    )


@pytest.mark.parametrize("name", STRATEGIES)
def test_sharded_training_step_equals_the_unsharded_one(grid, mlp, name):
    params, x, y = mlp
    shard, args = _placed(grid, mlp, name)
    new, loss = jax.jit(_mlp_step, out_shardings=(shard, NamedSharding(grid, P())))(*args)
    ref_new, ref_loss = jax.jit(_mlp_step)(params, x, y)
    assert np.isclose(float(loss), float(ref_loss), rtol=1e-5)
    for k in params:
        np.testing.assert_allclose(np.asarray(new[k]), np.asarray(ref_new[k]), rtol=1e-4, atol=1e-4)


def _collectives(grid, mlp, name):
    shard, args = _placed(grid, mlp, name)
    return mesh.collectives(jax.jit(_mlp_step, out_shardings=(shard, NamedSharding(grid, P()))).lower(*args).compile())


def test_data_parallel_all_reduces_the_gradients(grid, mlp):
    found = _collectives(grid, mlp, "dp")
    assert {c.kind for c in found} == {"all-reduce"}
    grads = max(found, key=lambda c: c.bytes)
    assert grads.group_size == 8 and grads.bytes >= (32 * 64 + 64 * 8) * 4
    assert grads.moved == pytest.approx(2 * 7 / 8 * grads.bytes)


def test_tensor_parallel_all_reduces_over_the_model_axis(grid, mlp):
    assert any(c.kind == "all-reduce" and c.group_size == 2 for c in _collectives(grid, mlp, "tp"))


def test_fully_sharded_gathers_the_weights(grid, mlp):
    gathers = [c for c in _collectives(grid, mlp, "fsdp") if c.kind == "all-gather"]
    assert {c.shape.split("{")[0] for c in gathers} >= {"f32[32,64]", "f32[64,8]"}


def test_shard_map_psum_and_psum_scatter(grid):
    a = jnp.arange(64.0).reshape(8, 8)
    f = jax.jit(jax.shard_map(lambda b: jax.lax.psum(b, "data"), mesh=grid, in_specs=P("data"), out_specs=P()))
    g = jax.jit(
        jax.shard_map(
            lambda b: jax.lax.psum_scatter(b, "data", tiled=True), mesh=grid, in_specs=P(), out_specs=P("data")
        )
    )
    assert [(c.kind, c.group_size) for c in mesh.collectives(f.lower(a).compile())] == [("all-reduce", 4)]
    rs = mesh.collectives(g.lower(a).compile())
    assert [(c.kind, c.group_size) for c in rs] == [("reduce-scatter", 4)]
    assert rs[0].moved == 3 * rs[0].bytes
    np.testing.assert_allclose(np.asarray(g(a)), np.asarray(a) * 4)


@pytest.mark.parametrize(
    "text, size",
    [
        ("all-reduce(%x), replica_groups={{0,1},{2,3}}, to_apply=%add", 2),
        ("all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%add", 4),
        ("all-reduce(%x), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%add", 2),
        ("all-reduce(%x), replica_groups=mesh['data'=4,'model'=2] {'data','model'}, to_apply=%add", 8),
        ("all-reduce(%x), replica_groups=mesh['data'=4,'model'=2] {'model'}, to_apply=%add", 2),
        ("all-reduce(%x), replica_groups={}, to_apply=%add", None),
    ],
)
def test_group_sizes_are_read_from_every_replica_group_format(text, size):
    assert mesh._group_size(text, None) == size


def test_collectives_from_text_count_combined_buffers_and_async_pairs_once():
    text = """HloModule m
ENTRY %e (a: f32[8], b: f32[4]) -> f32[32] {
  %a = f32[8]{0} parameter(0)
  %b = f32[4]{0} parameter(1)
  %ar = (f32[8]{0}, f32[4]{0}) all-reduce(%a, %b), replica_groups={{0,1,2,3}}, to_apply=%add
  %ags = (f32[8]{0}, f32[32]{0}) all-gather-start(%a), replica_groups={{0,1,2,3}}, dimensions={0}
  ROOT %agd = f32[32]{0} all-gather-done(%ags)
}
"""
    found = mesh.collectives(text)
    assert [(c.kind, c.bytes, c.group_size) for c in found] == [("all-reduce", 48, 4), ("all-gather", 128, 4)]
    assert found[1].moved == 96


# ------------------------------------------------------------ the cost model against scaling-book
# jax-ml/scaling-book, read 2026-12-01: sharding.md ("A Deeper Dive into TPU Communication
# Primitives", Pop Quiz 2 and "Some Problems to Work" Question 2), training.md ("Data Parallelism",
# "Tensor Parallelism"), applied-training.md ("How to Shard LLaMA 3-70B for Training").


def test_all_gather_on_a_v5e_axis_without_wraparound_matches_scaling_books_pop_quiz():
    # AllGather_Y([E_Y, F]) on a v5e {'X': 8, 'Y': 4}, E=2048, F=8192, bf16: no wraparound below 16
    # chips, so 3 hops of 8.4 MB at 4.5e10 B/s: "more like 560us"; the profile there showed 680us.
    t = mesh.collective_seconds("all-gather", 2048 * 8192 * 2, 4, "v5e", wraparound=False)
    assert t == pytest.approx(560e-6, rel=0.2) and t == pytest.approx(680e-6, rel=0.2)
    with_ring = mesh.collective_seconds("all-gather", 2048 * 8192 * 2, 4, "v5e", wraparound=True)
    assert t == pytest.approx(2 * with_ring)  # a wraparound link doubles what the axis carries


def test_a_small_all_gather_is_latency_bound_as_in_the_pop_quiz():
    # the same gather with E=F=256: "we have 3 hops, so this will take roughly 3 * 1us = 3us"
    t = mesh.collective_seconds("all-gather", 256 * 256 * 2, 4, "v5e", wraparound=False)
    assert t == pytest.approx(3e-6, rel=0.2)


def test_gathering_over_two_axes_of_a_v4_cube_matches_scaling_books_question_2():
    # AllGather_XY([B_X, D_Y]) on a TPU v4p 4x4x4, B=1024, D=4096, bf16: "2BD / (2 * W) = 46us"
    assert mesh.hardware.lookup("v4").wraparound((4, 4, 4)) == (True, True, True)
    t = mesh.collective_seconds("all-gather", 2 * 1024 * 4096, (4, 4), "v4", wraparound=True)
    assert t == pytest.approx(46e-6, rel=0.2)


def test_one_axis_of_four_is_scaling_books_large_axis_figure_times_three_quarters():
    # AllGather_X over X=4 of the same cube: scaling-book writes 2BD / (W Y) = 23us, the large-X
    # form V / W; the ring moves (X-1)/X of it.
    t = mesh.collective_seconds("all-gather", 2 * 1024 * 4096 / 4, 4, "v4", wraparound=True)
    assert t * 4 / 3 == pytest.approx(23e-6, rel=0.2)


def test_data_parallel_threshold_on_v5p_is_scaling_books_2550_tokens_and_850_over_three_axes():
    # training.md: "C=4.6e14 and W=2 * 9e10 ... our batch size per chip must be at least 2,550";
    # "if we dedicate all three axes of a TPUv5p pod to pure data parallelism ... BS=850"
    assert mesh.data_parallel_threshold("v5p", 16, wraparound=True) == pytest.approx(2550, rel=0.2)
    assert mesh.data_parallel_threshold("v5p", 10**6, wraparound=True) == pytest.approx(2550, rel=0.01)
    assert mesh.data_parallel_threshold("v5p", (16, 20, 28), wraparound=True) == pytest.approx(850, rel=0.2)


def test_data_parallel_threshold_doubles_without_wraparound_and_follows_flops_per_byte():
    ring = mesh.data_parallel_threshold("v5e", 16, wraparound=True)
    assert mesh.data_parallel_threshold("v5e", 16, wraparound=False) == pytest.approx(2 * ring)
    assert mesh.data_parallel_threshold("v6e", 16, wraparound=True) > 2 * ring  # 4.7x the FLOPs, 2x the ICI


@pytest.mark.parametrize("d_ff, expected", [(28672, 11), (50_000, 19)])
def test_tensor_parallel_limit_matches_scaling_books_f_over_2550(d_ff, expected):
    # applied-training.md: LLaMA 3-70B (F=28672) is ICI bound "when Y > F / 2550 = 11";
    # training.md: "For Gemma 7B, F ~ 50k, so we become communication bound with 19-way"
    assert mesh.tensor_parallel_limit(d_ff, "v5p", wraparound=True) == pytest.approx(expected, rel=0.2)


def test_all_reduce_costs_two_all_gathers_and_all_to_all_a_quarter():
    args = (1e9, 16, "v5p")
    gather = mesh.collective_seconds("all-gather", *args, wraparound=True)
    assert mesh.collective_seconds("reduce-scatter", *args, wraparound=True) == gather
    assert mesh.collective_seconds("all-reduce", *args, wraparound=True) == pytest.approx(2 * gather)
    assert mesh.collective_seconds("all-to-all", *args, wraparound=True) == pytest.approx(gather / 4)
    # on a line (no wraparound) the middle link carries V/4 each way: (X/2)^2 pieces of V/X^2 cross it
    line = mesh.collective_seconds("all-to-all", *args, wraparound=False)
    assert line == pytest.approx(mesh.collective_seconds("all-gather", *args, wraparound=False) / 4)
    assert line == pytest.approx(15 / 16 * 1e9 / 4 / 9e10) and line == pytest.approx(1e9 / 4 / 9e10, rel=0.07)
    assert mesh.collective_seconds("all-gather", 1e9, 1, "v5p", wraparound=True) == 0.0
    assert mesh.collective_seconds("collective-permute", 9e10, 8, "v5p", wraparound=False) == pytest.approx(1.0)


def test_large_axes_approach_bytes_over_the_axis_bandwidth():
    v5e = mesh.hardware.lookup("v5e")
    t = mesh.collective_seconds("all-gather", 1e9, 4096, v5e, wraparound=True)
    assert t == pytest.approx(1e9 / v5e.ici_axis_bandwidth, rel=1e-3)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"kind": "psum"}, "unknown collective 'psum'"),
        ({"axis_size": 0}, "positive integer"),
        ({"axis_size": 2.5}, "positive integer"),
        ({"axis_size": True}, "positive"),
        ({"axis_size": (4, 2), "wraparound": (True,)}, "one per axis"),
        ({"wraparound": None}, "one bool"),
        ({"chip": "H100"}, "NVLink 4, not an ICI torus"),
        ({"chip": "7x"}, "no per-link ICI figure"),
        ({"nbytes": -1}, "must not be negative"),
    ],
)
def test_bad_cost_model_arguments_are_clear_errors(kwargs, message):
    args = {"kind": "all-gather", "nbytes": 1e6, "axis_size": 4, "chip": "v5e", "wraparound": True, **kwargs}
    with pytest.raises(ValueError, match=message):
        mesh.collective_seconds(args.pop("kind"), args.pop("nbytes"), args.pop("axis_size"), args.pop("chip"), **args)


def test_volume_of_a_reduce_scatter_is_its_unreduced_input_and_results_drop_the_layout():
    rs = mesh.Collective("reduce-scatter", "rs", "f32[4,8]{1,0}", 128, 4, 384.0)
    assert rs.volume == 512 and mesh.Collective("all-gather", "ag", "f32[32]", 128, 4, 96.0).volume == 128
    assert rs.result == "f32[4,8]"
    assert mesh.Collective("all-reduce", "ar", "(f32[8]{0}, f32[4]{0})", 48, 4, 72.0).result == "2 buffers, combined"


def test_an_all_to_all_costs_a_quarter_of_gathering_the_whole_array_it_reshuffles():
    # scaling-book, sharding.md: an AllToAll on a bidirectional ring costs about a quarter of an AllGather
    # of the same array, where V is the whole array; in HLO each device holds 1/X of it
    text = (
        "HloModule m\nENTRY e {\n  p = f32[1024,1024]{1,0} parameter(0)\n"
        "  ROOT a2a = f32[1024,1024]{1,0} all-to-all(p), replica_groups=[1,4]<=[4], dimensions={0}\n}"
    )
    (a2a,) = mesh.collectives(text)
    assert (a2a.kind, a2a.group_size, a2a.bytes) == ("all-to-all", 4, 4 * 2**20)
    assert a2a.volume == 4 * a2a.bytes  # the whole array, not one device's buffer
    t = mesh.collective_seconds("all-to-all", a2a.volume, 4, "v5p", wraparound=False)
    w = mesh.hardware.lookup("v5p").ici_link_bandwidth  # a 4-chip axis wraps nowhere: one link each way
    assert t == pytest.approx(3 / 4 * a2a.volume / w / 4)
    gather = mesh.collective_seconds("all-gather", a2a.volume, 4, "v5p", wraparound=False)
    assert t == pytest.approx(gather / 4)


def _cell(table: str, column: str) -> str:
    """The last row's entry in the named column of a collective_table."""
    lines = table.splitlines()
    head = [h.strip() for h in lines[0].strip("|").split("|")]
    return [c.strip() for c in lines[-1].strip("|").split("|")][head.index(column)]


def test_collective_table_places_a_group_of_eight_on_each_chips_eight_chip_slice():
    # Eight chips are a 2x2x2 v5p (two hosts, no wraparound: Cloud TPU v5p docs) and a 2x4 v5e or v6e.
    # scaling-book, sharding.md: an AllGather over several axes gets n_axes times the bandwidth,
    # T = V / (W * n_axes), with one direction of a link per axis when it has no wraparound (Pop Quiz 2);
    # the model adds the ring's (X-1)/X.
    v = 8e6
    found = [mesh.Collective("all-gather", "ag", "bf16[4000000]", int(v), 8, 7 / 8 * v)]
    table = mesh.collective_table(found)
    assert "| all-gather | bf16[4000000] | 8 | 8,000,000 |" in table
    for chip, axes, one_way in (("v5p", 3, 9e10), ("v5e", 2, 4.5e10), ("v6e", 2, 9e10)):
        label = mesh.hardware.lookup(chip).label
        scaling_book = v / (one_way * axes)
        assert float(_cell(table, f"{label} µs")) == pytest.approx(7 / 8 * scaling_book * 1e6, abs=0.01)
        assert float(_cell(table, f"{label} µs")) * 1e-6 == pytest.approx(scaling_book, rel=0.2)
    # the old rule took any eight v5p chips as a wrapped ring (8 % 4 == 0): 2 x 9e10 over one axis
    wrapped_ring = mesh.collective_seconds("all-gather", v, 8, "v5p", wraparound=True) * 1e6
    assert float(_cell(table, "TPU v5p µs")) != pytest.approx(wrapped_ring, rel=0.05)
    explicit = mesh.collective_table(found, slices={"v5e": (2, 4), "v5p": (2, 2, 2), "v6e": (2, 4)})
    assert explicit == table


def test_collective_table_uses_the_wraparound_of_whole_cubes_and_of_sixteen_chip_axes():
    # scaling-book, sharding.md, Question 2: AllGather_XY([B_X, D_Y]) on a TPU v4p 4x4x4, B=1024, D=4096:
    # a full cube wraps on every axis, so 2BD / (2 * W) = 46us, W = 9e10 both ways
    v = 2 * 1024 * 4096
    found = [mesh.Collective("all-gather", "ag", "bf16[1024,4096]", v, 16, 15 / 16 * v)]
    on_cube = float(_cell(mesh.collective_table(found, chips=("v4",), slices={"v4": (4, 4, 4)}), "TPU v4 µs"))
    assert on_cube * 1e-6 == pytest.approx(46e-6, rel=0.2)
    assert on_cube == pytest.approx(
        mesh.collective_seconds("all-gather", v, (4, 4), "v4", wraparound=True) * 1e6, abs=0.01
    )
    # a v5e 8x16 wraps along its 16-chip axis only: a group of 16 there gets W = 9e10, one of 8 gets 4.5e10
    on_v5e = {
        n: float(
            _cell(
                mesh.collective_table(
                    [mesh.Collective("all-gather", "ag", "bf16[x]", v, n, 0.0)], chips=("v5e",), slices={"v5e": (8, 16)}
                ),
                "TPU v5e µs",
            )
        )
        for n in (8, 16)
    }
    assert on_v5e[16] == pytest.approx(15 / 16 * v / 9e10 * 1e6, abs=0.01)
    assert on_v5e[8] == pytest.approx(7 / 8 * v / 4.5e10 * 1e6, abs=0.01)


def test_collective_table_marks_a_group_the_slice_cannot_hold_and_asks_for_a_slice_it_cannot_guess():
    found = [mesh.Collective("all-reduce", "ar", "f32[1000]", 4000, 16, 7500.0)]
    assert _cell(mesh.collective_table(found, devices=8), "TPU v5e µs") == "?"
    with pytest.raises(ValueError, match=r"no standard TPU v5e slice of 6 chips.*slices=\{'v5e'"):
        mesh.collective_table(found, devices=6)
    with pytest.raises(ValueError, match="no wraparound rule for TPU v3.*collective_seconds"):
        mesh.collective_table(found, chips=("v3",))
    with pytest.raises(ValueError, match="no ICI cost model for TPU7x"):
        mesh.collective_table(found, chips=("7x",))


def test_a_collective_knows_which_program_parameter_it_reads_through_layout_only_ops():
    text = """HloModule m
ENTRY e {
  p0 = f32[512,64]{1,0} parameter(0)
  p1 = f32[1,512,64]{2,1,0} parameter(1)
  b = f32[512,64]{1,0} bitcast(p0)
  ag = f32[2048,64]{1,0} all-gather(b), replica_groups=[1,4]<=[4], dimensions={0}
  t = f32[1,512,64]{2,1,0} tanh(p1)
  ag2 = f32[1,2048,64]{2,1,0} all-gather(f32[1,512,64]{2,1,0} %t), replica_groups=[1,4]<=[4], dimensions={1}
  ROOT r = (f32[2048,64]{1,0}, f32[1,2048,64]{2,1,0}) tuple(ag, ag2)
}"""
    weight, activation = mesh.collectives(text)
    assert weight.parameter == 0  # a weight, gathered: the operand is input 0, bitcast on the way
    assert activation.parameter is None  # computed in the step: an activation, whatever its shape


def test_a_reduction_whose_result_updates_a_parameter_is_a_gradient_whatever_its_shape():
    text = """HloModule m
ENTRY e {
  w = f32[512,64]{1,0} parameter(0)
  x = f32[512,64]{1,0} parameter(1)
  h = f32[512,64]{1,0} tanh(x)
  activation = f32[512,64]{1,0} all-reduce(h), replica_groups=[1,4]<=[4], to_apply=add
  g = f32[512,64]{1,0} multiply(x, x)
  gradient = f32[512,64]{1,0} all-reduce(g), replica_groups=[1,4]<=[4], to_apply=add
  b = f32[512,64]{1,0} bitcast(gradient)
  new = f32[512,64]{1,0} subtract(w, b)
  out = f32[512,64]{1,0} exponential(activation)
  ROOT r = (f32[512,64]{1,0}, f32[512,64]{1,0}) tuple(new, out)
}"""
    activation, gradient = mesh.collectives(text)
    assert activation.updates is None  # the same shape as the weight, but it never meets one
    assert gradient.updates == 0  # subtracted from parameter 0 (through a bitcast): an optimizer update
