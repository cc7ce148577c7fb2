"""Decoding with a KV cache: the model of lesson 08a (training) run one token at a time
(lesson 09a (inference and serving), section 2).

The model is :class:`tpututor.models.llama.Llama` (``lm.LM`` is it, at an ``lm.Config``'s size):
RMSNorm, RoPE, grouped-query attention (``n_kv_heads`` key/value heads, so the cache holds that many)
and a SwiGLU MLP. Everything here reads its parameters as the nested dict that
``nnx.to_pure_dict(nnx.state(model, nnx.Param))`` gives, and computes what the model computes, with
the same dtypes (bf16 matmuls, f32 norms and softmax):

* :func:`serving_params` (weights cast once to the compute dtype, one dict per layer: :func:`unstack`,
  :func:`restack`), :func:`random_params`, :func:`init_cache` and :func:`cache_bytes`;
* :func:`forward`: tokens at given positions through the model (:func:`rope` at each token's own
  position), keys and values written into a static-shape cache (``dynamic_update_slice``) and
  attention masked to the filled part;
* :func:`make_prefill` and :func:`make_step`: the compiled prefill and decode step (the old cache
  donated); :func:`recompute_step`, the no-cache baseline; :func:`generate`, greedy decoding;
  :func:`check_fits` and :func:`bucket`: what a request may ask and the prompt lengths compiled for.

A prompt that does not fit the cache is a :class:`CacheFull` naming what would, never silently wrong
tokens. The rest of serving is beside this module in :mod:`tpututor.serving`: sizing, batching,
int8 weights, pages, sharding and an endpoint.

This module exists to run the model: it imports JAX, NumPy and Flax (and :mod:`tpututor.lm`) at its
top. Importing it creates no array and touches no device, so a lesson may still choose its
(simulated) devices after the import, before the first call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import lm
from ..models import llama
from ..validate import positive_ints
from . import sizing

__all__ = [
    "CacheFull",
    "unstack",
    "serving_params",
    "random_params",
    "init_cache",
    "cache_bytes",
    "rope",
    "write_rows",
    "store_kv",
    "load_kv",
    "forward",
    "make_prefill",
    "greedy",
    "make_step",
    "restack",
    "recompute_step",
    "check_fits",
    "bucket",
    "generate",
]


class CacheFull(ValueError):
    """A prompt (plus the tokens asked for) does not fit the KV cache; the message says what would."""


# --------------------------------------------------------------------------- parameters and cache


def _dtype(cfg: Any):
    return jnp.dtype(cfg.compute_dtype)


def unstack(params: Mapping[str, Any], n_layers: int) -> dict:
    """The model's parameters with the stacked ``layers`` (a leading axis of ``n_layers``) as a list of
    one dict per layer: what a decode loop walks through. A tree already split is returned as it is."""
    if not isinstance(params["layers"], Mapping):
        return dict(params)
    layers = [jax.tree.map(lambda a, i=i: a[i], params["layers"]) for i in range(n_layers)]
    return {**params, "layers": layers}


def serving_params(params: Mapping[str, Any], cfg: Any):
    """The weights as a server keeps them: one dict per layer (:func:`unstack`), matrices and embeddings
    cast once to the compute dtype, norm scales in float32.

    The model casts its float32 master weights to bf16 in every matmul, so the logits are the same;
    a decode step then reads half the bytes.
    """
    dt = _dtype(cfg)
    return jax.tree_util.tree_map_with_path(
        lambda keys, a: a if lm.is_norm_scale(keys) or not jnp.issubdtype(a.dtype, jnp.floating) else a.astype(dt),
        unstack(params, cfg.n_layers),
    )


def random_params(cfg: Any, seed: int = 0):
    """A same-shaped model's parameters with random weights: normal(0, 0.02) matrices and unit norm
    scales, drawn with NumPy (compiling JAX's random initialiser takes seconds on a CPU)."""
    shapes = jax.eval_shape(lambda: nnx.to_pure_dict(nnx.state(lm.LM(cfg, nnx.Rngs(0)), nnx.Param)))
    rng = np.random.default_rng(seed)

    def draw(keys, a):
        if lm.is_norm_scale(keys):
            return jnp.ones(a.shape, a.dtype)
        return jnp.asarray(rng.normal(0.0, 0.02, a.shape).astype(a.dtype))

    return jax.tree_util.tree_map_with_path(draw, shapes)


def init_cache(cfg: Any, batch: int, length: int | None = None, dtype: str | None = None, device=None) -> list[dict]:
    """An empty KV cache: per layer ``{"k", "v"}`` of shape (batch, length, n_kv_heads, head_dim), on ``device``.

    ``length`` defaults to the model's ``seq_len``, the context it was trained for (RoPE has no
    position table, but positions beyond training are ones the model never learned). The arrays
    are committed to ``device`` (default: the first one), as the caches a step returns are: a step
    called first with an uncommitted cache and then with its own output would compile twice.
    """
    length = cfg.seq_len if length is None else length
    positive_ints(batch=batch, length=length)
    if length > cfg.seq_len:
        raise CacheFull(
            f"a cache of {length} positions is longer than the context the model was trained for "
            f"(seq_len={cfg.seq_len}): use length <= {cfg.seq_len}"
        )
    shape = (batch, length, sizing.key_value_heads(cfg), cfg.head_dim)
    dt = jnp.dtype(dtype or cfg.compute_dtype)
    device = device or jax.devices()[0]
    return [
        {"k": jax.device_put(jnp.zeros(shape, dt), device), "v": jax.device_put(jnp.zeros(shape, dt), device)}
        for _ in range(cfg.n_layers)
    ]


def cache_bytes(cache) -> int:
    """Bytes a cache holds (every layer's keys and values)."""
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(cache))


# --------------------------------------------------------------------------- the model, with a cache


def _rms_norm(x, weight, eps: float = 1e-6):
    """RMSNorm as the model computes it: in float32, times the scale, back in ``x``'s dtype."""
    x32 = x.astype(jnp.float32)
    y = x32 * jax.lax.rsqrt(jnp.mean(x32 * x32, axis=-1, keepdims=True) + eps)
    return (y * weight.astype(jnp.float32)).astype(x.dtype)


def _dense(x, p: Mapping[str, Any], dt):
    """x @ kernel in ``dt``; an int8 kernel (``quantize_int8``) is scaled per output column after the product."""
    kernel = p["kernel"]
    if "scale" in p:
        y = jnp.dot(x.astype(dt), kernel.astype(dt), preferred_element_type=jnp.float32)
        return (y * p["scale"]).astype(dt)
    return jnp.dot(x.astype(dt), kernel.astype(dt))


def rope(x, positions, cfg: Any):
    """RoPE at each token's own position: x (B, T, heads, head_dim), positions (B, T)."""
    inv = llama.rope_frequencies(lm.llama_config(cfg))  # the model's own frequencies
    angles = positions[:, :, None].astype(jnp.float32) * inv  # (B, T, head_dim / 2)
    angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]  # (B, T, 1, head_dim)
    return llama.rotate(x, jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype))


def write_rows(cache, update, pos):
    """Write ``update`` (B, T, ...) into ``cache`` (B, S, ...) at row ``pos[b]`` of each sequence (in the cache's dtype)."""
    write = jax.vmap(lambda c, u, p: jax.lax.dynamic_update_slice(c, u.astype(c.dtype), (p,) + (0,) * (c.ndim - 1)))
    return write(cache, update, pos)


def store_kv(layer: Mapping[str, Any], k, v, pos) -> dict:
    """The plain cache's write: keys and values as they are, in the cache's dtype."""
    return {"k": write_rows(layer["k"], k, pos), "v": write_rows(layer["v"], v, pos)}


def load_kv(layer: Mapping[str, Any], dt):
    """The plain cache's read: (keys, values) in the compute dtype ``dt``."""
    return layer["k"].astype(dt), layer["v"].astype(dt)


def forward(
    params: Mapping[str, Any],
    tokens,
    cache: Sequence[Mapping[str, Any]],
    pos,
    *,
    cfg: Any,
    store: Callable = store_kv,
    load: Callable = load_kv,
):
    """Run ``tokens`` (B, T) at positions ``pos[b] .. pos[b] + T - 1`` through the model.

    Each layer writes its keys and values into ``cache`` at those positions
    (``lax.dynamic_update_slice``, one row per sequence) and attends to every cached position up
    to the token's own; later positions are masked out, so the cache's shape never changes.
    Returns (logits (B, T, vocab) float32, the new cache). Positions are not checked here (this
    runs inside ``jit``): :func:`check_fits` does that before a request is admitted.

    ``store(layer, k, v, pos) -> new layer`` and ``load(layer, dt) -> (k, v)`` say how a layer's
    cache holds keys and values (:func:`store_kv` and :func:`load_kv`: as they are; an int8
    cache, :mod:`tpututor.serving.kvquant`, passes its own pair).
    """
    dt = _dtype(cfg)
    b, t = tokens.shape
    heads, kv_heads, head_dim = cfg.n_heads, sizing.key_value_heads(cfg), cfg.head_dim
    pos = jnp.asarray(pos, jnp.int32).reshape(b)
    positions = pos[:, None] + jnp.arange(t, dtype=jnp.int32)  # (B, T)
    params = unstack(params, cfg.n_layers)
    x = params["embed"]["embedding"].astype(dt)[tokens]
    length = cache[0]["k"].shape[1]
    visible = jnp.arange(length)[None, None, :] <= positions[:, :, None]  # (B, T, S): keys up to each query
    new_cache = []
    for i in range(cfg.n_layers):
        p = params["layers"][i]
        h = _rms_norm(x, p["attn_norm"]["weight"])
        q = rope(_dense(h, p["attn"]["q"], dt).reshape(b, t, heads, head_dim), positions, cfg)
        k = rope(_dense(h, p["attn"]["k"], dt).reshape(b, t, kv_heads, head_dim), positions, cfg)
        v = _dense(h, p["attn"]["v"], dt).reshape(b, t, kv_heads, head_dim)
        layer = store(cache[i], k, v, pos)
        new_cache.append(layer)
        keys, values = load(layer, dt)
        att = jax.nn.dot_product_attention(q, keys, values, mask=visible[:, None])  # GQA: K/V heads shared
        x = x + _dense(att.reshape(b, t, heads * head_dim), p["attn"]["o"], dt)
        h = _rms_norm(x, p["mlp_norm"]["weight"])
        x = x + _dense(
            jax.nn.silu(_dense(h, p["mlp"]["gate"], dt)) * _dense(h, p["mlp"]["up"], dt), p["mlp"]["down"], dt
        )
    logits = _dense(_rms_norm(x, params["norm"]["weight"]), params["lm_head"], dt).astype(jnp.float32)
    return logits, new_cache


@functools.lru_cache(maxsize=64)  # one compiled prefill per model config, shared by every caller
def make_prefill(cfg: Any):
    """``prefill(params, tokens (B, T), cache, lengths (B,)) -> (first new tokens (B,), logits at the last prompt token, cache)``.

    Prompts are padded to T; row b's next token is read at ``lengths[b] - 1``. Compiled once per T.
    """

    def prefill(params, tokens, cache, lengths):
        logits, cache = forward(params, tokens, cache, jnp.zeros(tokens.shape[0], jnp.int32), cfg=cfg)
        last = jnp.take_along_axis(logits, (lengths - 1)[:, None, None], axis=1)[:, 0]
        return jnp.argmax(last, axis=-1).astype(jnp.int32), last, cache

    return jax.jit(prefill, donate_argnums=(2,))


def greedy(logits, key=None):
    """The most likely token of each row."""
    return jnp.argmax(logits, axis=-1).astype(jnp.int32)


@functools.lru_cache(maxsize=64)
def make_step(cfg: Any, sample: Callable | None = None, *, donate: bool = True):
    """The decode step, compiled once for every position and batch content:

    ``step(params, tokens (B,), cache, pos (B,)) -> (next tokens (B,), cache, pos + 1)``.
    ``sample(logits, key)`` picks the next tokens (default: greedy; a sampler then also takes a
    ``key`` argument after ``pos``). The old cache is donated: its buffers are reused.
    """

    def step(params, tokens, cache, pos, key=None):
        logits, cache = forward(params, tokens[:, None], cache, pos, cfg=cfg)
        return (sample or greedy)(logits[:, 0], key), cache, pos + 1

    return jax.jit(step, donate_argnums=(2,) if donate else ())


def restack(params: Mapping[str, Any]) -> dict:
    """The model's own layout back from a server's (:func:`unstack`): the layers stacked along a leading axis."""
    if isinstance(params["layers"], Mapping):
        return dict(params)
    return {**params, "layers": jax.tree.map(lambda *xs: jnp.stack(xs), *params["layers"])}


def recompute_step(cfg: Any):
    """The no-cache baseline: every step runs the whole window through the model (``lm.generate``'s way).

    ``step(params, window (B, seq_len), t) -> (window with token t filled in, t + 1)``: the
    logits at position t - 1 choose token t. ``params`` in the model's layout (stacked layers);
    a server's tree (:func:`serving_params`) is restacked once, outside the compiled step.
    """
    graph = lm.graphdef(cfg)

    @functools.partial(jax.jit, donate_argnums=(1,))
    def compiled(params, window, t):
        logits = nnx.merge(graph, params)(window)
        nxt = jnp.argmax(jax.lax.dynamic_index_in_dim(logits, t - 1, axis=1, keepdims=False), axis=-1)
        return jax.lax.dynamic_update_index_in_dim(window, nxt.astype(window.dtype), t, axis=1), t + 1

    stacked: dict[str, Any] = {}  # the last tree restacked, by identity: a loop passes the same one every step

    def step(params, window, t):
        if not isinstance(params["layers"], Mapping):
            if stacked.get("of") is not params:
                stacked.update({"of": params, "tree": jax.jit(restack)(params)})
            params = stacked["tree"]
        return compiled(params, window, t)

    return step


def check_fits(prompt_len: int, new_tokens: int, cache_len: int) -> None:
    """Raise :class:`CacheFull` unless a prompt and ``new_tokens`` more fit a cache of ``cache_len``.

    The last new token is sampled, never fed back, so the cache needs prompt + new - 1 positions.
    """
    if prompt_len < 1:
        raise ValueError("the prompt is empty: give at least one token (the tokenizer's '\\n' will do)")
    if new_tokens < 1:
        raise ValueError(f"ask for at least one new token, not {new_tokens}")
    if prompt_len + new_tokens - 1 > cache_len:
        raise CacheFull(
            f"a prompt of {prompt_len} tokens and {new_tokens} new ones need {prompt_len + new_tokens - 1} "
            f"cache positions, but the cache holds {cache_len}: shorten the prompt to at most "
            f"{cache_len - new_tokens + 1} tokens, ask for at most {cache_len - prompt_len + 1} new ones, "
            f"or build a longer cache (up to the model's seq_len)"
        )


def bucket(n: int, limit: int) -> int:
    """The padded prompt length: the next power of two (at least 8), at most ``limit``.

    Every padded length is a program shape XLA compiles once, so prompts of any length up to
    ``limit`` cost about log2(limit / 8) + 1 prefill compilations instead of one per length.
    """
    positive_ints(n=n, limit=limit)
    if n > limit:
        raise CacheFull(f"a prompt of {n} tokens is longer than the {limit} positions it may be padded to")
    return min(limit, max(8, 1 << (n - 1).bit_length()))


def generate(
    params,
    cfg: Any,
    prompts: Sequence[Sequence[int]],
    new_tokens: int,
    *,
    cache_len: int | None = None,
    prefill=None,
    step=None,
) -> list[list[int]]:
    """Greedy continuations of equal-length ``prompts``, decoded together with a KV cache."""
    cache_len = cache_len or cfg.seq_len
    lengths = {len(p) for p in prompts}
    if len(lengths) != 1:
        raise ValueError(
            f"generate() decodes prompts of one length together, got lengths {sorted(lengths)}: "
            "use Batcher for prompts of different lengths"
        )
    n = lengths.pop()
    check_fits(n, new_tokens, cache_len)
    prefill = prefill or make_prefill(cfg)
    step = step or make_step(cfg)
    width = bucket(n, cache_len)
    tokens = np.zeros((len(prompts), width), np.int32)
    tokens[:, :n] = np.asarray(prompts, np.int32)
    cache = init_cache(cfg, len(prompts), cache_len)
    tok, _, cache = prefill(params, jnp.asarray(tokens), cache, jnp.full(len(prompts), n, jnp.int32))
    pos = jax.device_put(jnp.full(len(prompts), n, jnp.int32), next(iter(cache[0]["k"].devices())))  # committed
    out = [tok]
    for _ in range(new_tokens - 1):
        tok, cache, pos = step(params, tok, cache, pos)
        out.append(tok)
    return np.stack([np.asarray(t) for t in out], axis=1).tolist()
