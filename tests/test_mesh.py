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


@pytest.mark.parametrize("shape, names, message", [
    ((4, 2), ("data",), "2 axes but 1 names"), ((0, 8), ("a", "b"), "positive integers"), ((2.5, 2), ("a", "b"), "positive"),
])
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
    return shard, (jax.device_put(params, shard), jax.device_put(x, NamedSharding(grid, data)),
                   jax.device_put(y, NamedSharding(grid, data)))


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
    g = jax.jit(jax.shard_map(lambda b: jax.lax.psum_scatter(b, "data", tiled=True), mesh=grid,
                              in_specs=P(), out_specs=P("data")))
    assert [(c.kind, c.group_size) for c in mesh.collectives(f.lower(a).compile())] == [("all-reduce", 4)]
    rs = mesh.collectives(g.lower(a).compile())
    assert [(c.kind, c.group_size) for c in rs] == [("reduce-scatter", 4)]
    assert rs[0].moved == 3 * rs[0].bytes
    np.testing.assert_allclose(np.asarray(g(a)), np.asarray(a) * 4)


@pytest.mark.parametrize("text, size", [
    ("all-reduce(%x), replica_groups={{0,1},{2,3}}, to_apply=%add", 2),
    ("all-reduce(%x), replica_groups=[2,4]<=[8], to_apply=%add", 4),
    ("all-reduce(%x), replica_groups=[4,2]<=[2,4]T(1,0), to_apply=%add", 2),
    ("all-reduce(%x), replica_groups=mesh['data'=4,'model'=2] {'data','model'}, to_apply=%add", 8),
    ("all-reduce(%x), replica_groups=mesh['data'=4,'model'=2] {'model'}, to_apply=%add", 2),
    ("all-reduce(%x), replica_groups={}, to_apply=%add", None),
])
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


def test_comm_seconds_uses_the_chips_ici_and_refuses_a_chip_without_one():
    assert mesh.comm_seconds(400e9, "v5e") == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no chip-to-chip bandwidth"):
        mesh.comm_seconds(1.0, "T4")


def test_collective_table_has_a_time_per_chip():
    table = mesh.collective_table([mesh.Collective("all-reduce", "ar", "f32[1000]", 4000, 8, 7000.0)])
    assert "TPU v5e µs" in table and "| all-reduce | f32[1000] | 8 | 7,000 |" in table
