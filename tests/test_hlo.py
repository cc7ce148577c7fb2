"""tpututor.hlo on HLO that the installed JAX, TensorFlow and torch_xla really produce.

TensorFlow and torch_xla write their HLO in subprocesses: importing TensorFlow
before torch_xla in one process aborts it, and the test process stays clean.
"""

from __future__ import annotations

import logging

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from conftest import run_python
from tpututor import bench, hlo


def softmax(x):
    m = jnp.max(x, axis=-1, keepdims=True)
    e = jnp.exp(x - m)
    return e / jnp.sum(e, axis=-1, keepdims=True)


X = jnp.ones((64, 256), jnp.float32)


@pytest.fixture(scope="module")
def softmax_stages():
    return hlo.jax_stages(softmax, X)


def test_jax_stages_keep_every_stage(softmax_stages):
    s = softmax_stages
    assert "reduce_max" in s.jaxpr and "exp" in s.jaxpr
    assert "stablehlo.exponential" in s.stablehlo
    assert s.hlo.startswith("HloModule") and "exponential" in s.hlo
    assert "fusion" in s.optimized_hlo


def test_fusion_leaves_fewer_kernels_than_the_unoptimized_module(softmax_stages):
    before, after = softmax_stages.unoptimized, softmax_stages.optimized
    assert before.ops["exponential"] == 1 and before.ops["reduce"] == 2 and not before.fusions
    assert after.kernels < before.kernels and sum(after.fusions.values()) >= 1
    assert "exponential" in after.fused_ops and after.parameters == 1


def test_cost_and_memory_records_are_plain_numbers(softmax_stages):
    assert {"flops", "bytes accessed", "transcendentals"} <= set(softmax_stages.cost)
    assert not any("{" in k for k in softmax_stages.cost)
    assert softmax_stages.cost["transcendentals"] == X.size
    assert softmax_stages.memory["argument_size"] == X.size * 4 == softmax_stages.memory["output_size"]


def test_fusions_list_their_ops_in_program_order(softmax_stages):
    found = hlo.fusions(softmax_stages.optimized_hlo)
    assert found and all(kind.startswith("k") for _, kind, _ in found)
    assert "exponential" in [op for _, _, ops in found for op in ops]


def test_entry_text_is_only_the_entry_computation_without_metadata(softmax_stages):
    text = hlo.entry_text(softmax_stages.optimized_hlo)
    assert text.lstrip().startswith("ENTRY") and text.rstrip().endswith("}")
    assert "metadata=" not in text and "fused_computation" in text


def test_elementwise_chain_fuses_into_one_kernel():
    s = hlo.jax_stages(lambda v: jnp.tanh(jnp.exp(v) * 2 + 1), X)
    assert s.optimized.kernels == 1 and s.optimized.fusions["kLoop"] == 1


def test_a_dot_is_counted_and_a_host_callback_is_a_custom_call():
    dense = hlo.jax_stages(lambda x, w: jax.nn.gelu(x @ w), X, jnp.ones((256, 32)))
    assert dense.optimized.dots == 1 and dense.unoptimized.dots == 1

    def with_callback(v):
        y = jnp.exp(v)
        return jnp.tanh(jax.pure_callback(lambda a: np.asarray(a) + 1, jax.ShapeDtypeStruct(y.shape, y.dtype), y))

    called = hlo.jax_stages(with_callback, X).optimized
    assert called.ops["custom-call"] == 1 and called.custom_calls and called.kernels >= 3
    assert called.host_calls == 1 and dense.optimized.host_calls == 0


def test_static_arguments_reach_the_traced_function():
    s = hlo.jax_stages(
        lambda v, kind: jnp.tanh(v) if kind == "tanh" else v * 2, X, kind="tanh", static_argnames=["kind"]
    )
    assert "tanh" in s.jaxpr


def test_collectives_are_found_in_a_sharded_program():
    text = run_python(
        """
        import jax, jax.numpy as jnp
        from jax.sharding import PartitionSpec as P
        mesh = jax.make_mesh((2,), ("d",), axis_types=(jax.sharding.AxisType.Auto,))
        f = jax.shard_map(lambda v: jax.lax.psum(v, "d"), mesh=mesh, in_specs=P("d"), out_specs=P())
        print(jax.jit(f).lower(jnp.ones(8)).compile().as_text())
    """,
        env={"XLA_FLAGS": "--xla_force_host_platform_device_count=2", "JAX_PLATFORMS": "cpu"},
    )
    summary = hlo.summarize(text)
    assert summary.collectives["all-reduce"] >= 1


@pytest.mark.slow
def test_tensorflow_hlo_before_and_after_optimisation_parses():
    out = run_python(
        """
        import tensorflow as tf
        from tpututor import hlo
        f = tf.function(lambda t: tf.nn.softmax(t) * 2, jit_compile=True)
        ir = hlo.tf_stages(f, tf.ones((8, 16)))
        print(ir["hlo"]); print("=====SPLIT====="); print(ir["optimized_hlo"])
    """,
        env={"TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    before, after = out.split("=====SPLIT=====")
    b, a = hlo.summarize(before[before.index("HloModule") :]), hlo.summarize(after)
    assert b.ops["exponential"] == 1 and not b.fusions
    assert a.kernels < b.kernels and sum(a.fusions.values()) >= 1


@pytest.mark.slow
def test_torch_xla_ir_and_hlo_parse():
    out = run_python(
        """
        import torch, torch_xla
        from tpututor import hlo
        t = torch.ones(8, 16).to(torch_xla.device())
        st = hlo.torch_xla_stages(torch.softmax(t, dim=-1) * 2)
        print(st["ir"]); print("=====SPLIT====="); print(st["hlo"])
    """,
        env={"PJRT_DEVICE": "CPU"},
    )
    ir, text = out.split("=====SPLIT=====")
    assert "aten::softmax" in ir
    s = hlo.summarize(text[text.index("HloModule") :])
    assert s.ops["exponential"] == 1 and s.ops["reduce"] == 2 and s.parameters >= 1


def test_tf_stages_rejects_a_plain_function():
    with pytest.raises(TypeError, match="wrap it: tf.function"):
        hlo.tf_stages(lambda t: t, 1.0)


# ----------------------------------------------------------------- robustness of the parser


def test_parse_tolerates_source_tables_and_typed_operands(softmax_stages):
    module = hlo.parse(softmax_stages.optimized_hlo)  # has FileNames/StackFrames tables
    assert module.entry.entry and module.name == "jit_softmax"


def test_parse_reads_tuple_shapes_and_nested_tuples():
    text = """HloModule m
ENTRY %e (p: f32[2]) -> ((f32[2], s32[]), f32[2]) {
  %p = f32[2]{0} parameter(0)
  %c = s32[] constant(1)
  %t = (f32[2]{0}, s32[]) tuple(f32[2]{0} %p, s32[] %c)
  ROOT %r = ((f32[2]{0}, s32[]), f32[2]{0}) tuple((f32[2]{0}, s32[]) %t, f32[2]{0} %p)
}
"""
    entry = hlo.parse(text).entry
    assert [i.opcode for i in entry.instructions] == ["parameter", "constant", "tuple", "tuple"]
    assert entry.instructions[-1].root and entry.instructions[-1].shape.startswith("((")
    assert hlo.summarize(text).kernels == 0


def test_module_without_entry_marker_uses_the_last_computation():
    text = "HloModule m\n\nhelper {\n  a = f32[] parameter(0)\n}\n\nmain {\n  b = f32[] parameter(0)\n  ROOT c = f32[] negate(b)\n}\n"
    assert hlo.parse(text).entry.name == "main" and hlo.summarize(text).ops["negate"] == 1


def test_unterminated_module_is_still_read():
    assert hlo.summarize("ENTRY %e {\n  %p = f32[] parameter(0)\n  ROOT %n = f32[] exponential(%p)\n").kernels == 1


@pytest.mark.parametrize("text", ["", "not hlo at all", "HloModule empty\n", "{ lambda ; a. let in (a,) }"])
def test_text_without_hlo_is_a_clear_error(text):
    with pytest.raises(ValueError, match="no HLO computation"):
        hlo.parse(text)


def test_non_text_is_a_type_error():
    with pytest.raises(TypeError, match="takes HLO text"):
        hlo.parse(b"HloModule m")  # type: ignore[arg-type]


def test_compare_sets_two_summaries_side_by_side(softmax_stages):
    table = hlo.compare(softmax_stages.unoptimized, softmax_stages.optimized, ("a", "b"))
    lines = table.splitlines()
    assert lines[0] == "| | a | b |" and any(line.startswith("| kernels |") for line in lines)


# ----------------------------------------------------------------- bytes, compilations, timing


def test_jaxpr_bytes_count_inputs_and_outputs_of_each_step():
    steps = hlo.jaxpr_bytes(lambda v: (v * 2 + 1) ** 2, X)
    assert [p for p, _ in steps] == ["mul", "add", "integer_pow"]
    assert all(abs(b - 2 * X.size * 4) <= 8 for _, b in steps)  # one array in, one out (+ a scalar)


def test_compiles_counts_new_signatures_and_restores_logging():
    f = jax.jit(lambda v: v + 1)
    a, b, c = jnp.ones(3), jnp.ones(5), jnp.ones(5, jnp.bfloat16)
    before = (jax.config.jax_log_compiles, logging.getLogger("jax").propagate)
    with hlo.compiles() as log:
        f(a), f(a), f(b), f(c)
    assert len([n for n in log if "lambda" in n]) == 3
    assert (jax.config.jax_log_compiles, logging.getLogger("jax").propagate) == before


def test_jax_function_times_op_by_op_and_fused_runs():
    eager = bench.jax_function(softmax, X, jit=False, repeats=2)
    fused = bench.jax_function(softmax, X, repeats=2)
    assert eager.framework == "jax (op by op)" and fused.framework == "jax"
    assert fused.compile_seconds > 0 and eager.compile_seconds is None
    assert fused.bytes == hlo.jax_stages(softmax, X).cost["bytes accessed"] and fused.op == "softmax"


def test_library_matmuls_and_tpu_host_transfers_are_counted():
    text = """HloModule m
ENTRY %e (a: f32[8,8], b: f32[8,8]) -> f32[8,8] {
  %a = f32[8,8]{1,0} parameter(0)
  %b = f32[8,8]{1,0} parameter(1)
  %g = (f32[8,8]{1,0}, s8[64]{0}) custom-call(%a, %b), custom_call_target="__cublas$gemm"
  %t = token[] after-all()
  %s = (f32[8,8]{1,0}, u32[], token[]) send(%a, %t), channel_id=1, is_host_transfer=true
  %sd = token[] send-done(%s), channel_id=1, is_host_transfer=true
  ROOT %r = f32[8,8]{1,0} get-tuple-element(%g), index=0
}
"""
    summary = hlo.summarize(text)
    assert summary.dots == 1 and summary.host_calls == 1 and summary.custom_calls == ["__cublas$gemm"]


def test_device_to_device_send_and_recv_are_not_host_calls():
    text = """HloModule m
ENTRY %e (a: f32[8]) -> f32[8] {
  %a = f32[8]{0} parameter(0)
  %t = token[] after-all()
  %s = (f32[8]{0}, u32[], token[]) send(%a, %t), channel_id=1
  %sd = token[] send-done(%s), channel_id=1
  %r = (f32[8]{0}, u32[], token[]) recv(%t), channel_id=2
  %rd = (f32[8]{0}, token[]) recv-done(%r), channel_id=2
  %hr = (f32[8]{0}, u32[], token[]) recv(%t), channel_id=3, is_host_transfer=true
  %hrd = (f32[8]{0}, token[]) recv-done(%hr), channel_id=3, is_host_transfer=true
  %o = token[] outfeed(%a, %t), outfeed_shape=f32[8]{0}
  ROOT %g = f32[8]{0} get-tuple-element(%rd), index=0
}
"""
    assert hlo.summarize(text).host_calls == 2  # the host recv and the outfeed; the channel pair is device to device


def test_fusion_op_lists_leave_out_the_reducers_helper_computation(softmax_stages):
    for _, _, ops in hlo.fusions(softmax_stages.optimized_hlo):
        assert "maximum" not in ops or "reduce" not in ops  # reduce's to_apply region is not listed
