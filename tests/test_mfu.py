"""tpututor.mfu: model FLOPs as MaxText counts them, the compiler's count beside them, and MFU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tpututor import hardware, mfu

# A configuration small enough to count by hand.
TINY = SimpleNamespace(d_model=8, n_layers=1, d_ff=32, vocab=10, seq_len=4)


def test_hand_counted_flops_of_a_tiny_config():
    b, s, d, ff, v = 2, 4, 8, 32, 10
    tokens = b * s
    forward = (
        4 * 2 * tokens * d * d  # query, key, value and output projections
        + 2 * 2 * tokens * d * ff  # the MLP's two matmuls
        + 2 * tokens * d * v  # the projection to the vocabulary
        + (2 * b * s * s * d + 2 * b * s * s * d) // 2  # scores and weighted sum, causal: half of them
    )
    assert forward == 14_080
    assert mfu.matmul_params(TINY) == 4 * d * d + 2 * d * ff + d * v == 848
    assert mfu.flops_per_step(TINY, b) == 3 * forward == 42_240  # backward = twice the forward
    assert mfu.flops_per_token(TINY) == 6 * 848 + 6 * 1 * s * d


def test_causal_attention_counts_half_the_score_matrix():
    full = mfu.attention_flops_per_token(TINY, causal=False)
    assert full == 12 * 1 * 4 * 8 and mfu.attention_flops_per_token(TINY) == full / 2
    assert mfu.flops_per_token(TINY, causal=False) - mfu.flops_per_token(TINY) == full / 2


def test_flops_per_step_grow_with_batch_and_with_sequence_squared_in_attention():
    assert mfu.flops_per_step(TINY, 4) == 2 * mfu.flops_per_step(TINY, 2)
    longer = mfu.attention_flops_per_token(TINY, seq_len=8)
    assert longer == 2 * mfu.attention_flops_per_token(TINY)  # per token linear in S, per sequence S squared


def test_the_compiler_counts_more_than_the_model_but_less_than_twice():
    import jax
    import jax.numpy as jnp

    from tpututor import lm

    cfg = lm.Config(d_model=32, n_layers=1, n_heads=2, d_ff=64, seq_len=32)
    tx = lm.optimizer(1e-3, 10)
    grid = lm.make_mesh(devices=jax.devices()[:1])
    tok = jax.ShapeDtypeStruct((4, cfg.seq_len), jnp.int32)
    compiled = (
        lm.make_train_step(cfg, tx, grid).lower(lm.abstract_state(cfg, tx), {"inputs": tok, "targets": tok}).compile()
    )
    model = mfu.flops_per_step(cfg, 4)
    assert model < mfu.xla_flops(compiled) < 2 * model


def test_xla_flops_reads_both_shapes_of_cost_analysis():
    class Compiled:
        def __init__(self, analysis):
            self.analysis = analysis

        def cost_analysis(self):
            return self.analysis

    assert mfu.xla_flops(Compiled({"flops": 12.0})) == 12.0
    assert mfu.xla_flops(Compiled([{"flops": 7.0}])) == 7.0  # older JAX: a list of dicts
    assert mfu.xla_flops(Compiled(None)) is None and mfu.xla_flops(Compiled([])) is None


def test_mfu_is_model_flops_over_time_and_peak():
    assert mfu.mfu(50e12, 0.5, 200e12) == pytest.approx(0.5)
    assert mfu.mfu(1.0, 1.0, None) is None  # no peak, no MFU


@pytest.mark.parametrize("seconds", [0, -1.0, None])
def test_a_step_time_that_is_not_positive_is_refused(seconds):
    with pytest.raises(ValueError, match="step time must be positive"):
        mfu.mfu(1.0, seconds, 1.0)


def test_bad_batches_and_configs_name_what_is_expected():
    with pytest.raises(ValueError, match="batch must be a positive number"):
        mfu.flops_per_step(TINY, 0)
    with pytest.raises(TypeError, match="d_model, n_layers, d_ff, vocab and seq_len"):
        mfu.matmul_params(object())
    with pytest.raises(ValueError, match="positive integers"):
        mfu.matmul_params(SimpleNamespace(d_model=0, n_layers=1, d_ff=1, vocab=1, seq_len=1))


def test_the_peak_of_a_tpu_comes_from_the_chip_table():
    device = SimpleNamespace(device_kind="TPU v5 lite", platform="tpu")
    peak, label = mfu.peak(device)
    assert peak == hardware.lookup("v5e").peak_flops and "table" in label


def test_throughput_reports_tokens_flops_and_mfu():
    t = mfu.throughput(TINY, 2, 0.001, peak_flops=84_480_000.0)
    assert t.tokens_per_s == pytest.approx(8000) and t.flops_per_s == pytest.approx(42_240_000)
    assert t.mfu == pytest.approx(0.5) and "MFU 50.0%" in str(t)


def test_mfu_gives_back_the_scaling_books_llama3_70b_worked_example():
    # How to Scale Your Model, "Training LLaMA 3 on TPUs": 6 * 70e9 * 15e12 = 6.3e24 FLOPs on 8960 TPU v5p
    # (4.59e14 FLOP/s each) at 40% MFU takes T = 3.8e6 s, "about 44 days".
    v5p = hardware.lookup("v5p")
    assert v5p.peak_flops == 4.59e14
    assert mfu.mfu(6 * 70e9 * 15e12, 3.8e6, 8960 * v5p.peak_flops) == pytest.approx(0.40, abs=0.01)


def test_non_causal_flops_match_the_scaling_books_per_layer_table():
    # How to Scale Your Model, "All the Transformer Math": training FLOPs per layer are 24BTDNH + 12BT^2NH for
    # attention (NH = D here) and 6 x the MLP's weights per token (2DF for an MLP of two matmuls), 6DV for the
    # vocabulary projection, counted once (MaxText's count; the book's table also counts the embedding).
    cfg = SimpleNamespace(d_model=64, n_layers=3, d_ff=256, vocab=128, seq_len=32)
    d, f, v, t, layers = 64, 256, 128, 32, 3
    per_token = layers * (24 * d * d + 12 * t * d + 6 * 2 * d * f) + 6 * d * v
    assert mfu.flops_per_token(cfg, causal=False) == per_token


def test_non_causal_flops_match_palms_appendix_b_formula():
    # PaLM (Chowdhery et al. 2022), Appendix B: training FLOPs per token 6N + 12·L·H·Q·T (H heads of size Q).
    for d, heads, layers, ff, seq in ((64, 4, 2, 256, 64), (2048, 16, 24, 8192, 2048)):
        cfg = SimpleNamespace(d_model=d, n_layers=layers, d_ff=ff, vocab=128, seq_len=seq)
        assert (
            mfu.flops_per_token(cfg, causal=False)
            == 6 * mfu.matmul_params(cfg) + 12 * layers * heads * (d // heads) * seq
        )


def test_attention_costs_as_much_as_the_layers_matmuls_at_six_times_d_model():
    # How to Scale Your Model, "All the Transformer Math": T = 8D for a gated MLP (three D x 4D matrices);
    # the same algebra for two D x 4D matrices (72 D^2 per token against 12 T D) gives T = 6D.
    d = 256
    cfg = SimpleNamespace(d_model=d, n_layers=1, d_ff=4 * d, vocab=1, seq_len=6 * d)
    assert mfu.attention_flops_per_token(cfg, causal=False) == 6 * (mfu.matmul_params(cfg) - d)


def test_the_course_models_gated_mlp_matches_the_books_eight_times_d_model():
    # The same chapter: with a gated MLP (three D x 4D matrices) attention costs as much as the matmuls at T = 8D.
    from tpututor.lm_config import Config

    d = 256
    cfg = Config(d_model=d, n_layers=1, n_heads=2, d_ff=4 * d, vocab=1, seq_len=8 * d)
    assert cfg.mlp_matrices == 3
    assert mfu.attention_flops_per_token(cfg, causal=False) == 6 * (mfu.matmul_params(cfg) - d)


def test_grouped_query_attention_shrinks_only_the_key_and_value_projections():
    from tpututor.lm_config import Config

    mha = Config(d_model=64, n_layers=2, n_heads=4, d_ff=128, vocab=16)
    gqa = Config(d_model=64, n_layers=2, n_heads=4, n_kv_heads=1, d_ff=128, vocab=16)
    assert mfu.matmul_params(mha) - mfu.matmul_params(gqa) == 2 * 2 * 64 * (64 - 16)
    assert mha.n_params() - gqa.n_params() == mfu.matmul_params(mha) - mfu.matmul_params(gqa)
