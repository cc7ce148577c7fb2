"""The Llama family in Flax NNX: one definition for Llama 2/3, Qwen2 and Gemma checkpoints.

A decoder-only Transformer, as Hugging Face's ``LlamaForCausalLM`` computes it::

    x = embed(tokens)                       (Gemma: times sqrt(d_model))
    for each layer:                         (the layers are stacked and run under jax.lax.scan)
        x = x + attention(rms_norm(x))      RoPE on q and k; n_kv_heads < n_heads shares K/V (GQA)
        x = x + mlp(rms_norm(x))            down(act(gate(x)) * up(x)): SwiGLU (Gemma: tanh-GELU)
    logits = lm_head(rms_norm(x))           (tied to the embedding where the checkpoint says so)

What differs between the families is configuration, read from the checkpoint's ``config.json``
(:meth:`Config.from_hf`): Qwen2 adds biases to q, k and v; Gemma scales the embedding, multiplies by
``1 + w`` in its norms and uses tanh-GELU; Llama 3.1 and later stretch RoPE's long wavelengths
(``rope_scaling`` of type ``llama3``).

Every weight carries logical axis names in its ``logical_axes`` metadata (``"embed"``, ``"heads"``,
``"kv_heads"``, ``"mlp"``, ``"vocab"``; ``"layers"`` for the stacked layer axis): sharding rules map
those names to mesh axes (:func:`logical_to_mesh`), so a sharding plan is a small dictionary, not code.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

__all__ = [
    "Config",
    "RMSNorm",
    "Attention",
    "MLP",
    "Block",
    "Llama",
    "rope_frequencies",
    "rotate",
    "logical_to_mesh",
    "param_count",
]


@dataclasses.dataclass(frozen=True)
class Config:
    """A model's shape and family conventions (what ``config.json`` says)."""

    family: str = "llama"  # "llama" | "qwen2" | "gemma"
    vocab: int = 256
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int = 16
    d_ff: int = 128
    rope_theta: float = 10_000.0
    rope_scaling: tuple[tuple[str, float], ...] = ()  # llama3: factor, low/high_freq_factor, original length
    eps: float = 1e-6
    tie_embeddings: bool = False
    qkv_bias: bool = False
    max_len: int = 2048
    dtype: str = "float32"  # activations and matmuls; the weights stay float32 unless loaded otherwise
    remat: bool = True  # recompute each layer's activations in the backward pass (saves memory)

    def __post_init__(self):
        if self.family not in ("llama", "qwen2", "gemma"):
            raise ValueError(f"family must be 'llama', 'qwen2' or 'gemma', got {self.family!r}")
        if self.n_heads % self.n_kv_heads:
            raise ValueError(f"n_heads ({self.n_heads}) must be a multiple of n_kv_heads ({self.n_kv_heads})")

    @property
    def gemma(self) -> bool:
        return self.family == "gemma"

    @classmethod
    def from_hf(cls, config: Mapping[str, Any], **overrides: Any) -> Config:
        """From a Hugging Face ``config.json`` (as a dict) of a Llama, Qwen2 or Gemma model."""
        kind = str(config.get("model_type", "llama"))
        family = {"llama": "llama", "qwen2": "qwen2", "gemma": "gemma", "mistral": "llama"}.get(kind)
        if family is None:
            raise ValueError(f"model_type {kind!r} is not one this model reads: llama, qwen2, gemma (or mistral)")
        rope = dict(config.get("rope_parameters") or config.get("rope_scaling") or {})
        theta = rope.pop("rope_theta", None) or config.get("rope_theta", 10_000.0)
        kind_of_rope = rope.pop("rope_type", rope.pop("type", "default"))
        if kind_of_rope not in ("default", "llama3"):
            raise ValueError(f"RoPE type {kind_of_rope!r} is not implemented here (default and llama3 are)")
        scaling = (
            ()
            if kind_of_rope == "default"
            else tuple(
                sorted(
                    (k, float(v))
                    for k, v in rope.items()
                    if k in ("factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")
                )
            )
        )
        heads = int(config["num_attention_heads"])
        values = dict(
            family=family,
            vocab=int(config["vocab_size"]),
            d_model=int(config["hidden_size"]),
            n_layers=int(config["num_hidden_layers"]),
            n_heads=heads,
            n_kv_heads=int(config.get("num_key_value_heads") or heads),
            head_dim=int(config.get("head_dim") or int(config["hidden_size"]) // heads),
            d_ff=int(config["intermediate_size"]),
            rope_theta=float(theta),
            rope_scaling=scaling,
            eps=float(config.get("rms_norm_eps", 1e-6)),
            tie_embeddings=bool(config.get("tie_word_embeddings", family == "gemma")),
            qkv_bias=bool(config.get("attention_bias", family == "qwen2")),
            max_len=int(config.get("max_position_embeddings", 2048)),
        )
        values.update(overrides)
        return cls(**values)

    def to_hf(self) -> dict[str, Any]:
        """The ``config.json`` Hugging Face's loader needs to rebuild this model."""
        arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "gemma": "GemmaForCausalLM"}[self.family]
        out: dict[str, Any] = {
            "architectures": [arch],
            "model_type": self.family,
            "vocab_size": self.vocab,
            "hidden_size": self.d_model,
            "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_heads,
            "num_key_value_heads": self.n_kv_heads,
            "head_dim": self.head_dim,
            "intermediate_size": self.d_ff,
            "rms_norm_eps": self.eps,
            "rope_theta": self.rope_theta,
            "tie_word_embeddings": self.tie_embeddings,
            "max_position_embeddings": self.max_len,
            "torch_dtype": "float32",
        }
        if self.rope_scaling:
            out["rope_scaling"] = {
                "rope_type": "llama3",
                **{k: int(v) if k.startswith("original") else v for k, v in self.rope_scaling},
            }
        if self.family == "llama":
            out.update(attention_bias=self.qkv_bias, mlp_bias=False, hidden_act="silu")
        elif self.family == "qwen2":
            out.update(hidden_act="silu", use_sliding_window=False)
        else:
            out.update(hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh")
        return out


def param_count(cfg: Config) -> int:
    """Parameters of the model (the embedding once when tied)."""
    attn = cfg.d_model * cfg.head_dim * (2 * cfg.n_heads + 2 * cfg.n_kv_heads)
    if cfg.qkv_bias:
        attn += cfg.head_dim * (cfg.n_heads + 2 * cfg.n_kv_heads)
    per_layer = attn + 3 * cfg.d_model * cfg.d_ff + 2 * cfg.d_model
    head = 0 if cfg.tie_embeddings else cfg.vocab * cfg.d_model
    return cfg.n_layers * per_layer + cfg.vocab * cfg.d_model + cfg.d_model + head


def rope_frequencies(cfg: Config) -> jax.Array:
    """RoPE's inverse frequencies, one per pair of a head's dimensions (Llama 3's scaling applied)."""
    inv = 1.0 / (cfg.rope_theta ** (jnp.arange(0, cfg.head_dim, 2, dtype=jnp.float32) / cfg.head_dim))
    if not cfg.rope_scaling:
        return inv
    s = dict(cfg.rope_scaling)
    factor, low, high = s["factor"], s["low_freq_factor"], s["high_freq_factor"]
    old = s["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    scaled = jnp.where(wavelen > old / low, inv / factor, inv)  # long wavelengths: stretched by the factor
    smooth = (old / wavelen - low) / (high - low)
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = (wavelen >= old / high) & (wavelen <= old / low)
    return jnp.where(medium, blended, scaled)


def rotate(x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
    """RoPE as Hugging Face lays it out: a head's first half pairs with its second half."""
    first, second = jnp.split(x, 2, axis=-1)
    return x * cos + jnp.concatenate([-second, first], axis=-1) * sin


def _linear(
    rngs: nnx.Rngs,
    d_in: int,
    d_out: int,
    axes: tuple[str | None, str | None],
    bias: bool = False,
    dtype: str = "float32",
):
    """A Linear whose weights are float32 and whose matmul runs in ``dtype`` (bfloat16: mixed precision)."""
    init = nnx.with_metadata(nnx.initializers.lecun_normal(), logical_axes=axes)
    bias_init = nnx.with_metadata(nnx.initializers.zeros_init(), logical_axes=(axes[1],))
    return nnx.Linear(
        d_in, d_out, use_bias=bias, kernel_init=init, bias_init=bias_init, dtype=jnp.dtype(dtype), rngs=rngs
    )


class RMSNorm(nnx.Module):
    """x / rms(x) times a learned scale, in float32 (Gemma's scale is 1 + w)."""

    def __init__(self, dim: int, eps: float, plus_one: bool = False):
        self.weight = nnx.Param(jnp.zeros(dim) if plus_one else jnp.ones(dim), logical_axes=("embed",))
        self.eps, self.plus_one = eps, plus_one

    def __call__(self, x: jax.Array) -> jax.Array:
        x32 = x.astype(jnp.float32)
        y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + self.eps)
        scale = self.weight[...].astype(jnp.float32)
        return (y * (1 + scale if self.plus_one else scale)).astype(x.dtype)


class Attention(nnx.Module):
    """Causal self-attention with RoPE and grouped-query heads (``n_kv_heads`` K/V heads shared)."""

    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        d, h = cfg.d_model, cfg.head_dim
        self.q = _linear(rngs, d, cfg.n_heads * h, ("embed", "heads"), cfg.qkv_bias, cfg.dtype)
        self.k = _linear(rngs, d, cfg.n_kv_heads * h, ("embed", "kv_heads"), cfg.qkv_bias, cfg.dtype)
        self.v = _linear(rngs, d, cfg.n_kv_heads * h, ("embed", "kv_heads"), cfg.qkv_bias, cfg.dtype)
        self.o = _linear(rngs, cfg.n_heads * h, d, ("heads", "embed"), dtype=cfg.dtype)
        self.cfg = cfg

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        cfg, (b, t, _) = self.cfg, x.shape
        q = self.q(x).reshape(b, t, cfg.n_heads, cfg.head_dim)
        k = self.k(x).reshape(b, t, cfg.n_kv_heads, cfg.head_dim)
        v = self.v(x).reshape(b, t, cfg.n_kv_heads, cfg.head_dim)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        out = jax.nn.dot_product_attention(q, k, v, is_causal=True)  # GQA: K/V heads are shared by groups of q
        return self.o(out.reshape(b, t, cfg.n_heads * cfg.head_dim))


class MLP(nnx.Module):
    """down(act(gate(x)) * up(x)): SwiGLU (SiLU), or tanh-GELU for Gemma."""

    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        self.gate = _linear(rngs, cfg.d_model, cfg.d_ff, ("embed", "mlp"), dtype=cfg.dtype)
        self.up = _linear(rngs, cfg.d_model, cfg.d_ff, ("embed", "mlp"), dtype=cfg.dtype)
        self.down = _linear(rngs, cfg.d_ff, cfg.d_model, ("mlp", "embed"), dtype=cfg.dtype)
        self.gemma = cfg.gemma

    def __call__(self, x: jax.Array) -> jax.Array:
        gate = self.gate(x)
        act = jax.nn.gelu(gate, approximate=True) if self.gemma else jax.nn.silu(gate)
        return self.down(act * self.up(x))


class Block(nnx.Module):
    """One decoder layer: pre-norm attention, then pre-norm MLP, each added to the residual."""

    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        self.attn_norm = RMSNorm(cfg.d_model, cfg.eps, cfg.gemma)
        self.attn = Attention(cfg, rngs)
        self.mlp_norm = RMSNorm(cfg.d_model, cfg.eps, cfg.gemma)
        self.mlp = MLP(cfg, rngs)

    def __call__(self, x: jax.Array, cos: jax.Array, sin: jax.Array) -> jax.Array:
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.mlp(self.mlp_norm(x))


class Llama(nnx.Module):
    """tokens (batch, time) -> logits (batch, time, vocab)."""

    def __init__(self, cfg: Config, rngs: nnx.Rngs):
        self.cfg = cfg
        self.embed = nnx.Embed(
            cfg.vocab,
            cfg.d_model,
            rngs=rngs,
            embedding_init=nnx.with_metadata(nnx.initializers.normal(0.02), logical_axes=("vocab", "embed")),
        )

        @nnx.split_rngs(splits=cfg.n_layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def stacked(rngs: nnx.Rngs) -> Block:
            return Block(cfg, rngs)

        self.layers = stacked(rngs)  # every weight gains a leading axis of n_layers
        self.norm = RMSNorm(cfg.d_model, cfg.eps, cfg.gemma)
        self.lm_head = (
            None if cfg.tie_embeddings else _linear(rngs, cfg.d_model, cfg.vocab, ("embed", "vocab"), dtype=cfg.dtype)
        )

    def __call__(self, tokens: jax.Array, *, activations: Any = None, remat: Any = None) -> jax.Array:
        """``remat``: the ``jax.checkpoint`` policy each layer runs under (a ``jax.checkpoint_policies``
        function), False for none; None follows ``cfg.remat`` (True: keep only what a matmul without
        batch dimensions produced, recompute the rest in the backward pass).

        ``activations``: where the residual stream (batch, time, d_model) lives between layers, a
        ``Sharding`` such as ``NamedSharding(mesh, P("fsdp"))`` (split by batch). None leaves it to the
        compiler, which may follow the weights' sharding instead (under FSDP: split along d_model, every
        device holding the whole batch, and the activations saved for the backward pass with it)."""
        cfg = self.cfg
        dtype = jnp.dtype(cfg.dtype)

        def keep(x: jax.Array) -> jax.Array:
            return x if activations is None else jax.lax.with_sharding_constraint(x, activations)

        x = keep(self.embed(tokens).astype(dtype))
        if cfg.gemma:
            x = x * jnp.asarray(math.sqrt(cfg.d_model), dtype)
        angles = jnp.arange(tokens.shape[1], dtype=jnp.float32)[:, None] * rope_frequencies(cfg)[None, :]
        angles = jnp.concatenate([angles, angles], axis=-1)[None, :, None, :]  # (1, time, 1, head_dim)
        cos, sin = jnp.cos(angles).astype(dtype), jnp.sin(angles).astype(dtype)

        # The layers' weights are stacked (a leading axis of n_layers): scan over them as plain arrays, one
        # layer's slice per step. (nnx.scan would also hand each layer's state back out of the loop, and
        # autodiff then keeps a copy of every weight for the backward pass: sharded for FSDP, the compiler
        # keeps those copies gathered, a whole layer's weights per layer.)
        block_def, stacked = nnx.split(self.layers)

        def layer(x: jax.Array, weights) -> tuple[jax.Array, None]:
            return keep(nnx.merge(block_def, weights)(x, cos, sin)), None

        if remat is None:
            remat = jax.checkpoint_policies.dots_with_no_batch_dims_saveable if cfg.remat else False
        if remat is not False:  # what the policy does not keep is recomputed in the backward pass
            layer = jax.checkpoint(layer, policy=remat)
        x, _ = jax.lax.scan(layer, x, stacked)
        x = self.norm(x)
        if self.lm_head is None:
            return x @ self.embed.embedding[...].astype(dtype).T
        return self.lm_head(x)


def logical_to_mesh(model: nnx.Module, rules: Mapping[str, str | tuple[str, ...] | None]):
    """Each weight's ``PartitionSpec`` from its logical axis names and ``rules`` (name -> mesh axis or None).

    ``rules`` is the whole sharding plan: ``{"embed": "fsdp", "mlp": "tensor", "heads": "tensor"}``
    shards weights' embed dimension over the mesh's ``fsdp`` axis and their MLP and head dimensions
    over ``tensor``; a name the rules leave out is replicated.
    """
    from jax.sharding import PartitionSpec

    def spec(x):
        names = tuple(getattr(x, "logical_axes", ()))
        if len(names) == len(x.shape) - 1:  # a layer's weight, stacked along the scanned layer axis
            names = ("layers",) + names
        return PartitionSpec(*(rules.get(n) if n is not None else None for n in names))

    return jax.tree.map(spec, nnx.state(model, nnx.Param), is_leaf=lambda x: isinstance(x, nnx.Variable))
