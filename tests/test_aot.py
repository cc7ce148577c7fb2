"""Compiling for a named TPU slice with the real TPU compiler (libtpu), on a machine with no TPU."""

from __future__ import annotations

import os

import pytest

from tpututor.hardware import slice_of


@pytest.mark.parametrize(
    "name, chips, shape, hosts, devices",
    [
        ("v5e-8", 8, (2, 4), 1, 8),  # a v5litepod-8 is one VM of 8 chips
        ("v5litepod-16", 16, (4, 4), 4, 16),  # multi-host v5e slices have 4 chips per VM
        ("v6e-256", 256, (16, 16), 64, 256),
        ("v5p-8", 4, (2, 2, 1), 1, 4),  # v5p names count TensorCores, two per chip
        ("v5p-32", 16, (2, 2, 4), 4, 16),
        ("v5p-128", 64, (4, 4, 4), 16, 64),
        ("tpu7x-8", 4, (2, 2, 1), 1, 8),  # TPU7x shows each TensorCore as a JAX device
    ],
)
def test_a_slice_name_becomes_the_real_slices_chips_shape_and_hosts(name, chips, shape, hosts, devices):
    s = slice_of(name)
    assert (s.chips, s.shape, s.hosts, s.devices) == (chips, shape, hosts, devices)
    assert s.hosts * s.chips_per_host == s.chips


@pytest.mark.parametrize("bad", ["v5e-6", "v5e-2", "v7-8", "h100-8", "", "v5p-2"])
def test_a_name_that_is_no_slice_is_refused_with_names_that_work(bad):
    with pytest.raises(ValueError, match="v5e-8|power of two"):
        slice_of(bad)


def test_the_topology_names_are_the_ones_the_compiler_takes():
    assert slice_of("v5e-8").topology == "v5e:2x4"
    assert slice_of("v5p-32").topology == "v5p:2x2x4"
    assert slice_of("tpu7x-8").topology == "tpu7x:2x2x1"
    assert slice_of("v5e-8").host_bounds == (2, 4, 1) and slice_of("v6e-16").host_bounds == (2, 2, 1)


# ----------------------------------------------------------------------------- the compiler itself

jax = pytest.importorskip("jax")
aot = pytest.importorskip("tpututor.aot")
needs_libtpu = pytest.mark.skipif(aot.available() is not None, reason=str(aot.available()))


@needs_libtpu
def test_libtpu_is_installed_in_the_course_environment():
    assert aot.available() is None


@needs_libtpu
@pytest.mark.parametrize(
    "name, kind, processes",
    [("v5e-8", "TPU v5 lite", 1), ("v5p-32", "TPU v5", 4), ("v6e-16", "TPU v6 lite", 4), ("tpu7x-8", "TPU7x", 1)],
)
def test_the_described_slice_has_the_real_device_kind_and_one_process_per_host(name, kind, processes):
    devices = aot.topology(name).devices
    assert len(devices) == slice_of(name).devices
    assert {d.device_kind for d in devices} == {kind}
    assert len({d.process_index for d in devices}) == processes


@needs_libtpu
def test_describing_a_slice_leaves_this_machine_a_cpu_and_the_environment_as_it_was():
    aot.topology("v5e-8")
    assert jax.devices()[0].platform == "cpu"
    assert "TPU_ACCELERATOR_TYPE" not in os.environ and "TPU_WORKER_HOSTNAMES" not in os.environ


@needs_libtpu
def test_a_mesh_whose_axes_do_not_multiply_to_the_slice_says_how_many_devices_it_has():
    with pytest.raises(ValueError, match="multiply to 8"):
        aot.mesh("v5e-8", {"data": 2, "model": 2})


@needs_libtpu
def test_a_compiled_program_has_tpu_layouts_collectives_memory_and_cost():
    import jax.numpy as jnp
    from jax.sharding import PartitionSpec as P

    mesh = aot.mesh("v5e-8", {"data": 8})
    x = aot.abstract((64, 1024), jnp.bfloat16, mesh, P())
    w = aot.abstract((1024, 1024), jnp.bfloat16, mesh, P("data", None))
    out = aot.compile(lambda x, w: x @ w, x, w, slice="v5e-8")
    assert "bf16[64,1024]{1,0:T(8,128)(2,1)}" in out.hlo  # the TPU's tiled bf16 layout
    assert out.collective_kinds() == {"all-reduce"}  # contracting over a sharded k sums partial products
    assert out.memory["argument_size"] == 64 * 1024 * 2 + 1024 * 1024 * 2 // 8
    assert out.cost["flops"] > 0 and out.fits
    assert "v5e-8" in out.summary() and "fits" in out.summary()


@needs_libtpu
def test_a_program_too_big_for_hbm_is_refused_with_the_compilers_message():
    import jax.numpy as jnp

    mesh = aot.mesh("v5e-8", {"data": 8})
    big = aot.abstract((4096, 2**20), jnp.float32, mesh, ())  # 16 GiB on every chip, twice
    with pytest.raises(aot.CompileError, match="RESOURCE_EXHAUSTED: Ran out of memory") as err:
        aot.compile(lambda a: a * 2 + 1, big, slice="v5e-8")
    assert err.value.out_of_memory and "exceeds available HBM" in err.value.message


@needs_libtpu
@pytest.mark.slow
def test_torch_xla_still_runs_on_the_cpu_beside_libtpu_in_one_environment():
    from conftest import run_python

    out = run_python(
        """
        import torch, torch_xla
        from jax.experimental import topologies
        x = torch.ones(3, device=torch_xla.device()) * 2
        torch_xla.sync()
        print(x.cpu().tolist(), str(torch_xla.device()))
    """,
        env={**os.environ, "PJRT_DEVICE": "CPU"},
    )
    assert "[2.0, 2.0, 2.0] xla:0" in out
