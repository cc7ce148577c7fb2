"""The Llama family in Flax NNX against Hugging Face's PyTorch models, and checkpoints both ways."""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("PJRT_DEVICE", "CPU")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import jax.numpy as jnp  # noqa: E402
from flax import nnx  # noqa: E402

from tpututor.models import checkpoint, llama  # noqa: E402

SHAPE = dict(
    vocab_size=256,
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    max_position_embeddings=512,
)


def tiny(family: str, directory) -> torch.nn.Module:
    """A tiny random Hugging Face model of ``family``, norms and biases moved off their defaults so that
    a conversion that skipped them would show, written with save_pretrained."""
    if family == "llama":  # with Llama 3's RoPE scaling, short wavelengths and long both in play
        config = transformers.LlamaConfig(
            **SHAPE,
            rope_theta=500000.0,
            rope_scaling={
                "rope_type": "llama3",
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 64,
            },
        )
        model = transformers.LlamaForCausalLM(config)
    elif family == "qwen2":  # q/k/v biases, tied embeddings
        model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**SHAPE, tie_word_embeddings=True))
    else:  # 1 + w norms, sqrt(d) embedding scale, tanh-GELU, tied
        model = transformers.GemmaForCausalLM(transformers.GemmaConfig(**SHAPE, head_dim=16))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name or "bias" in name:
                p.add_(torch.randn_like(p) * 0.1)
    model.save_pretrained(directory)
    return model


def logits_of(model, tokens):
    return np.asarray(nnx.jit(lambda m, t: m(t))(model, jnp.asarray(tokens)))


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "qwen2", "gemma"])
def test_the_nnx_model_computes_what_transformers_computes_from_the_same_checkpoint(tmp_path, family):
    reference = tiny(family, tmp_path)
    tokens = np.random.default_rng(0).integers(0, 256, (2, 40))
    with torch.no_grad():
        expected = reference(torch.tensor(tokens)).logits.numpy()
    model = checkpoint.load(tmp_path)
    assert model.cfg.family == family
    np.testing.assert_allclose(logits_of(model, tokens), expected, atol=2e-5)  # float32: 4e-7 seen here


@pytest.mark.slow
@pytest.mark.parametrize("family", ["llama", "gemma"])
def test_a_saved_model_loads_in_transformers_and_computes_the_same_logits(tmp_path, family):
    tiny(family, tmp_path / "in")
    model = checkpoint.load(tmp_path / "in")
    checkpoint.save(model, tmp_path / "out")
    back = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out")
    tokens = np.random.default_rng(1).integers(0, 256, (1, 24))
    with torch.no_grad():
        np.testing.assert_allclose(back(torch.tensor(tokens)).logits.numpy(), logits_of(model, tokens), atol=2e-5)


def test_the_config_reads_each_familys_conventions():
    qwen = llama.Config.from_hf({"model_type": "qwen2", **SHAPE, "tie_word_embeddings": True})
    gemma = llama.Config.from_hf({"model_type": "gemma", **SHAPE, "head_dim": 16})
    assert qwen.qkv_bias and qwen.tie_embeddings and not qwen.gemma
    assert gemma.gemma and gemma.tie_embeddings and not gemma.qkv_bias
    with pytest.raises(ValueError, match="gpt2"):
        llama.Config.from_hf({"model_type": "gpt2", **SHAPE})


def test_the_parameter_count_matches_the_model_and_llama_3_1_8b():
    cfg = llama.Config()
    model = llama.Llama(cfg, nnx.Rngs(0))
    assert llama.param_count(cfg) == sum(x.size for x in __import__("jax").tree.leaves(nnx.state(model, nnx.Param)))
    big = llama.Config(vocab=128256, d_model=4096, n_layers=32, n_heads=32, n_kv_heads=8, head_dim=128, d_ff=14336)
    assert llama.param_count(big) == pytest.approx(8.03e9, rel=0.001)  # the model card's 8B


def test_sharding_rules_name_mesh_axes_for_every_weight_and_the_layer_axis():
    model = llama.Llama(llama.Config(), nnx.Rngs(0))
    specs = nnx.to_pure_dict(llama.logical_to_mesh(model, {"embed": "fsdp", "mlp": "tensor", "heads": "tensor"}))
    assert tuple(specs["layers"]["mlp"]["up"]["kernel"]) == (None, "fsdp", "tensor")  # (layers, embed, mlp)
    assert tuple(specs["layers"]["attn"]["k"]["kernel"]) == (None, "fsdp", None)  # kv_heads: not in the rules
    assert tuple(specs["embed"]["embedding"]) == (None, "fsdp")


def test_the_layer_scan_saves_activations_for_the_backward_pass_not_copies_of_the_weights():
    import jax

    cfg = llama.Config(vocab=97, d_model=40, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=12, d_ff=56)
    model = llama.Llama(cfg, nnx.Rngs(0))
    graph, state = nnx.split(model)
    jaxpr = jax.make_jaxpr(jax.grad(lambda s, t: nnx.merge(graph, s)(t).mean()))(state, jnp.zeros((2, 7), jnp.int32))
    scans = [e for e in jaxpr.jaxpr.eqns if e.primitive.name == "scan"]
    assert len(scans) == 2, "one scan forward, one backward"
    stacked = {tuple(x.shape) for x in __import__("jax").tree.leaves(nnx.state(model.layers))}
    residuals = [tuple(v.aval.shape) for v in scans[0].outvars[1:]]
    assert residuals and not set(residuals) & stacked, f"the forward scan hands back weights: {residuals}"


@pytest.mark.slow
def test_keeping_activations_split_by_batch_shrinks_an_fsdp_steps_memory():
    import jax
    import optax
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(np.array(jax.devices()[:8]), ("fsdp",))
    cfg = llama.Config(
        vocab=128, d_model=128, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, d_ff=256, dtype="bfloat16"
    )
    graph, state = nnx.split(nnx.eval_shape(lambda: llama.Llama(cfg, nnx.Rngs(0))))
    rules = {"embed": "fsdp"}
    specs = llama.logical_to_mesh(nnx.merge(graph, state), rules)
    placed = jax.tree.map(
        lambda v, s: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=NamedSharding(mesh, s)),
        state,
        specs,
        is_leaf=lambda x: isinstance(x, nnx.Variable),
    )
    rows = NamedSharding(mesh, PartitionSpec("fsdp"))
    tokens = jax.ShapeDtypeStruct((8, 129), jnp.int32, sharding=rows)

    def temporaries(activations):
        def loss(s, t):
            logits = nnx.merge(graph, s)(t[:, :-1], activations=activations).astype(jnp.float32)
            return optax.softmax_cross_entropy_with_integer_labels(logits, t[:, 1:]).mean()

        grads = jax.jit(jax.grad(loss, allow_int=True)).lower(placed, tokens).compile()
        return grads.memory_analysis().temp_size_in_bytes

    assert temporaries(rows) < 0.5 * temporaries(None)
