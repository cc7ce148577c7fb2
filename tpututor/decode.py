"""Serving the language model of lesson 08 (training) in lesson 09 (inference and serving).

The model is :class:`tpututor.models.llama.Llama` (``lm.LM`` is it, at an ``lm.Config``'s size):
RMSNorm, RoPE, grouped-query attention (``n_kv_heads`` key/value heads, so the cache holds that many)
and a SwiGLU MLP. Everything here reads its parameters as the nested dict that
``nnx.to_pure_dict(nnx.state(model, nnx.Param))`` gives, and computes what the model computes, with
the same dtypes (bf16 matmuls, f32 norms and softmax):

* costs from the shapes alone (plain arithmetic, no arrays): :func:`decode_cost` and :func:`prefill_cost`,
  :func:`min_step_seconds` (scaling-book's bound) and :func:`critical_batch` (from the chip table);
* :func:`serving_params` (weights cast once to the compute dtype, one dict per layer), :func:`init_cache`, and
  :func:`forward`: tokens at given positions through the model, keys and values written into a
  static-shape cache (``dynamic_update_slice``) and attention masked to the filled part;
* :func:`make_prefill` and :func:`make_step`: the compiled prefill and decode step (the old cache
  donated); :func:`recompute_step`, the no-cache baseline; :func:`generate`, greedy decoding;
* :func:`quantize_int8`: per-channel int8 weights that :func:`forward` reads as they are;
* :class:`Batcher`: continuous batching (requests join free slots and leave when done);
* :func:`paged_attention`, :func:`pages_from_cache`, :func:`check_page_table`: pages and page
  tables in plain JAX, the layout of JAX's ragged paged attention kernel for TPUs;
* :func:`host_memory`, :func:`offload`, :func:`host_placement`: memory kinds (``pinned_host``);
* :func:`serving_shardings`: weights and cache over a mesh through ``lm``'s logical axes;
* :func:`serve`: a small HTTP endpoint on 127.0.0.1 around a generate function, bounded in time.

Bad input is a clear error, never silently wrong tokens: a prompt that does not fit the cache
(:class:`CacheFull`), a slot that is taken or does not exist (:class:`SlotsFull`), a page table
pointing outside the pool (:class:`PageTableError`).

This module exists to run the model: it imports JAX, NumPy and Flax (and :mod:`tpututor.lm`) at its
top. Importing it creates no array and touches no device, so a lesson may still choose its
(simulated) devices after the import, before the first call. The JAX-free serving plan is
:mod:`tpututor.serving.planner`.
"""

from __future__ import annotations

import functools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from jax.sharding import NamedSharding, SingleDeviceSharding

from . import hardware, hlo, lm, mfu, roofline
from .validate import positive_ints

__all__ = [
    "CacheFull",
    "SlotsFull",
    "PageTableError",
    "Cost",
    "kv_bytes_per_token",
    "matmul_weights",
    "weight_bytes",
    "params_bytes",
    "memory_bytes",
    "max_batch",
    "decode_cost",
    "prefill_cost",
    "min_step_seconds",
    "critical_batch",
    "serving_params",
    "random_params",
    "init_cache",
    "cache_bytes",
    "write_rows",
    "store_kv",
    "load_kv",
    "forward",
    "make_prefill",
    "make_step",
    "recompute_step",
    "unstack",
    "restack",
    "check_fits",
    "bucket",
    "generate",
    "greedy",
    "quantize_int8",
    "dequantize",
    "quantize_params",
    "dequantized_copies",
    "Request",
    "Batcher",
    "one_at_a_time",
    "check_page_table",
    "pages_from_cache",
    "paged_attention",
    "contiguous_attention",
    "host_memory",
    "offload",
    "host_placement",
    "SERVING_RULES",
    "serving_shardings",
    "cache_spec",
    "Endpoint",
    "serve",
]


class CacheFull(ValueError):
    """A prompt (plus the tokens asked for) does not fit the KV cache; the message says what would."""


class SlotsFull(ValueError):
    """Every batch slot is taken, or a slot number does not exist."""


class PageTableError(ValueError):
    """A page table entry points outside the page pool."""


# --------------------------------------------------------------------------- costs (from the shapes)


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of one step, read as the textbook minimum (every weight and cache entry read once)."""

    flops: float
    bytes: float

    @property
    def intensity(self) -> float:
        return self.flops / self.bytes


def _kv_heads(cfg: Any, kv_heads: int | None) -> int:
    """The number of key/value heads: the config's own (``n_kv_heads``; ``n_heads`` for a config without
    one, multi-head attention) unless given (GQA, MQA)."""
    if kv_heads is None:
        return getattr(cfg, "n_kv_heads", None) or cfg.n_heads
    if not isinstance(kv_heads, int) or isinstance(kv_heads, bool) or kv_heads < 1 or cfg.n_heads % kv_heads:
        raise ValueError(
            f"kv_heads must be a positive integer dividing n_heads={cfg.n_heads} (grouped-query "
            f"attention shares each key/value head among n_heads // kv_heads query heads), got {kv_heads!r}"
        )
    return kv_heads


def kv_bytes_per_token(cfg: Any, kv_bytes: int = 2, *, kv_heads: int | None = None) -> int:
    """Bytes of cache one token takes: keys and values (2) x layers x kv_heads x head_dim x bytes per number.

    ``kv_heads`` defaults to the config's ``n_kv_heads``; multi-head attention keeps one per query
    head, grouped-query attention (GQA) fewer, multi-query (MQA) one.
    """
    return 2 * cfg.n_layers * _kv_heads(cfg, kv_heads) * cfg.head_dim * kv_bytes


def matmul_weights(cfg: Any, *, kv_heads: int | None = None) -> int:
    """The matmul weights (``mfu.matmul_params``), with the key and value projections resized for ``kv_heads``."""
    fewer = _kv_heads(cfg, None) - _kv_heads(cfg, kv_heads)
    return mfu.matmul_params(cfg) - 2 * cfg.n_layers * cfg.d_model * fewer * cfg.head_dim


def weight_bytes(cfg: Any, bytes_per_weight: float = 2, *, kv_heads: int | None = None) -> float:
    """Bytes of the weights a step reads: the matmul weights (:func:`matmul_weights`) at ``bytes_per_weight``.

    The embedding tables are not read whole (one row per token), so they are left out.
    """
    return matmul_weights(cfg, kv_heads=kv_heads) * bytes_per_weight


def params_bytes(cfg: Any, bytes_per_weight: float = 2, *, kv_heads: int | None = None) -> float:
    """Bytes the weights hold in HBM: every parameter (embeddings too, read or not) at ``bytes_per_weight``."""
    return (cfg.n_params() - (mfu.matmul_params(cfg) - matmul_weights(cfg, kv_heads=kv_heads))) * bytes_per_weight


def memory_bytes(
    cfg: Any, batch: int, context: int, *, bytes_per_weight: float = 2, kv_bytes: int = 2, kv_heads: int | None = None
) -> float:
    """HBM a decode batch holds: the weights (:func:`params_bytes`) plus ``batch`` caches of ``context`` tokens.

    Activations are left out: at decode they are a few rows per layer (scaling-book, inference chapter).
    """
    positive_ints(batch=batch, context=context)
    return params_bytes(cfg, bytes_per_weight, kv_heads=kv_heads) + batch * context * kv_bytes_per_token(
        cfg, kv_bytes, kv_heads=kv_heads
    )


def max_batch(
    cfg: Any,
    context: int,
    chip: str | hardware.Chip = "v5e",
    *,
    chips: int = 1,
    bytes_per_weight: float = 2,
    kv_bytes: int = 2,
    kv_heads: int | None = None,
    hbm_bytes: float | None = None,
) -> int:
    """The most sequences of ``context`` tokens whose caches fit beside the weights in the HBM of ``chips`` chips.

    0 when the weights alone do not fit. ``hbm_bytes`` overrides the chip table's capacity (per
    chip), for a chip whose usable memory is less than its nominal one. Scaling-book's LLaMA-2-13B
    on eight v5e chips at 8192 tokens: 16 ("We OOM beyond batch size 16").
    """
    positive_ints(context=context, chips=chips)
    if hbm_bytes is None:
        chip = hardware.lookup(chip) if isinstance(chip, str) else chip
        if not chip.hbm_bytes:
            raise ValueError(f"the chip table has no HBM capacity for {chip.label}: pass hbm_bytes=")
        hbm_bytes = chip.hbm_bytes
    if hbm_bytes <= 0:
        raise ValueError(f"hbm_bytes must be positive, got {hbm_bytes!r}")
    left = chips * hbm_bytes - params_bytes(cfg, bytes_per_weight, kv_heads=kv_heads)
    per_sequence = context * kv_bytes_per_token(cfg, kv_bytes, kv_heads=kv_heads)
    return max(0, int(left // per_sequence))


def decode_cost(
    cfg: Any, batch: int, context: int, *, bytes_per_weight: float = 2, kv_bytes: int = 2, kv_heads: int | None = None
) -> Cost:
    """One decode step: ``batch`` new tokens, each attending to ``context`` cached tokens.

    FLOPs: 2 per weight per token (2·N·B) and attention's two products (4·L·d·S per token, the
    same for GQA: every query head still meets every cached position). Bytes: every weight once,
    plus each sequence's cache of ``context`` tokens.
    """
    positive_ints(batch=batch, context=context)
    flops = 2 * matmul_weights(cfg, kv_heads=kv_heads) * batch + 4 * cfg.n_layers * cfg.d_model * context * batch
    nbytes = weight_bytes(cfg, bytes_per_weight, kv_heads=kv_heads) + batch * context * kv_bytes_per_token(
        cfg, kv_bytes, kv_heads=kv_heads
    )
    return Cost(float(flops), float(nbytes))


def prefill_cost(
    cfg: Any, batch: int, tokens: int, *, bytes_per_weight: float = 2, kv_bytes: int = 2, kv_heads: int | None = None
) -> Cost:
    """One prefill: ``batch`` prompts of ``tokens`` tokens, causal attention (half the score matrix).

    FLOPs: 2·N per token and 4·L·d·T²/2 per prompt for attention. Bytes: every weight once, plus
    the cache written for every prompt token.
    """
    positive_ints(batch=batch, tokens=tokens)
    flops = (
        2 * matmul_weights(cfg, kv_heads=kv_heads) * batch * tokens
        + 2 * cfg.n_layers * cfg.d_model * tokens * tokens * batch
    )
    nbytes = weight_bytes(cfg, bytes_per_weight, kv_heads=kv_heads) + batch * tokens * kv_bytes_per_token(
        cfg, kv_bytes, kv_heads=kv_heads
    )
    return Cost(float(flops), float(nbytes))


def min_step_seconds(
    cfg: Any,
    batch: int,
    context: int,
    bandwidth: float,
    *,
    bytes_per_weight: float = 2,
    kv_bytes: int = 2,
    kv_heads: int | None = None,
) -> float:
    """Scaling-book's least decode step time: (batch x cache bytes + weight bytes) / memory bandwidth."""
    if not bandwidth or bandwidth <= 0:
        raise ValueError(f"bandwidth must be positive bytes/s, got {bandwidth!r}")
    return (
        decode_cost(cfg, batch, context, bytes_per_weight=bytes_per_weight, kv_bytes=kv_bytes, kv_heads=kv_heads).bytes
        / bandwidth
    )


def critical_batch(chip: str | hardware.Chip, *, bytes_per_weight: float = 2, compute: str = "bfloat16") -> float:
    """Tokens per step from which a decode step's matmuls are compute-bound on ``chip``.

    A (B, D) x (D, F) matmul does 2·B·D·F FLOPs and reads D·F weights of ``bytes_per_weight``:
    its intensity is 2·B / bytes_per_weight, which reaches the ridge (peak / bandwidth) at
    B = ridge x bytes_per_weight / 2. bf16 weights: the ridge itself (about 240 on v5e).
    """
    chip = hardware.lookup(chip) if isinstance(chip, str) else chip
    roof = roofline.Roofline.of(chip, compute)
    return roof.ridge_point * bytes_per_weight / 2


# --------------------------------------------------------------------------- parameters and cache


def _dtype(cfg: Any):
    return jnp.dtype(cfg.compute_dtype)


def _is_norm(keys) -> bool:
    return str(getattr(keys[-1], "key", keys[-1])) == "weight"  # RMSNorm scales; matrices end in "kernel"


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
        lambda keys, a: a if _is_norm(keys) or not jnp.issubdtype(a.dtype, jnp.floating) else a.astype(dt),
        unstack(params, cfg.n_layers),
    )


def random_params(cfg: Any, seed: int = 0):
    """A same-shaped model's parameters with random weights: normal(0, 0.02) matrices and unit norm
    scales, drawn with NumPy (compiling JAX's random initialiser takes seconds on a CPU)."""
    shapes = jax.eval_shape(lambda: nnx.to_pure_dict(nnx.state(lm.LM(cfg, nnx.Rngs(0)), nnx.Param)))
    rng = np.random.default_rng(seed)

    def draw(keys, a):
        if _is_norm(keys):
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
    shape = (batch, length, _kv_heads(cfg, None), cfg.head_dim)
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
    inv = 1.0 / (cfg.rope_theta ** (jnp.arange(0, cfg.head_dim, 2, dtype=jnp.float32) / cfg.head_dim))
    angles = positions[:, :, None].astype(jnp.float32) * inv  # (B, T, head_dim / 2)
    angles = jnp.concatenate([angles, angles], axis=-1)[:, :, None, :]  # (B, T, 1, head_dim)
    cos, sin = jnp.cos(angles).astype(x.dtype), jnp.sin(angles).astype(x.dtype)
    first, second = jnp.split(x, 2, axis=-1)
    return x * cos + jnp.concatenate([-second, first], axis=-1) * sin


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
    heads, kv_heads, head_dim = cfg.n_heads, _kv_heads(cfg, None), cfg.head_dim
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


# --------------------------------------------------------------------------- int8 weights


def quantize_int8(w):
    """Per-output-channel symmetric int8: ``{"kernel": int8 (in, out), "scale": float32 (out,)}``.

    Each column is scaled so that its largest magnitude maps to 127; ``kernel * scale`` gives the
    weight back to within half a step of that column.
    """
    w = jnp.asarray(w, jnp.float32)
    if w.ndim != 2:
        raise ValueError(f"quantize_int8 takes a (in, out) matrix, got shape {w.shape}")
    scale = jnp.max(jnp.abs(w), axis=0) / 127.0
    scale = jnp.where(scale == 0, 1.0, scale)
    return {"kernel": jnp.clip(jnp.round(w / scale), -127, 127).astype(jnp.int8), "scale": scale}


def dequantize(p: Mapping[str, Any]):
    """The float32 matrix an int8 ``{"kernel", "scale"}`` stands for."""
    return p["kernel"].astype(jnp.float32) * p["scale"]


def quantize_params(params: Mapping[str, Any]):
    """Every matmul kernel (``.../kernel``) to int8 per channel; embeddings and norms unchanged.

    Pass the tree a server keeps (:func:`serving_params`: one dict per layer, bf16 embeddings) to
    compare like with like; from the float32 master weights the embeddings stay float32.
    """

    def walk(node):
        if isinstance(node, Mapping):
            if "kernel" in node:
                return quantize_int8(node["kernel"])
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list | tuple):
            return [walk(v) for v in node]
        return node

    if isinstance(params.get("layers"), Mapping):
        raise ValueError("the layers are still stacked: quantize the tree serving_params returned")
    return walk(params)


def dequantized_copies(hlo_text: str, params: Mapping[str, Any]) -> list[str]:
    """The buffers of a compiled program that hold an int8 kernel converted to a float type.

    ``hlo_text`` is the optimised HLO (``jit(f).lower(...).compile().as_text()``); ``params`` the
    tree :func:`quantize_params` made. A top-level instruction (not inside a fusion) whose output
    has a kernel's shape in bf16, f16 or f32 and that reads an int8 kernel is a dequantized copy
    of it, written to memory and read back by the matmul: the program then reads more bytes than
    the int8 weights. An empty list means every conversion happens inside the fusion that does
    the product, the weights crossing from memory as int8.
    """
    kernels = [leaf for leaf in jax.tree.leaves(params) if getattr(leaf, "ndim", 0) == 2 and str(leaf.dtype) == "int8"]
    if not kernels:
        raise ValueError("params holds no int8 matrices: pass the tree quantize_params returned")
    dims = {tuple(k.shape) for k in kernels} | {tuple(reversed(k.shape)) for k in kernels}
    entry = hlo.parse(hlo_text).entry.instructions
    int8 = [ins.name for ins in entry if ins.shape.startswith("s8[")]
    found = []
    for ins in entry:
        if ins.opcode == "parameter":
            continue
        outs = re.findall(r"\b(?:bf16|f16|f32)\[([\d,]*)\]", ins.shape)
        if not any(tuple(int(x) for x in d.split(",") if x) in dims for d in outs):
            continue
        if any(re.search(rf"(?<![\w.\-]){re.escape(name)}(?![\w\-]|\.\d)", ins.text) for name in int8):
            found.append(f"{ins.name} = {ins.shape} {ins.opcode}")
    return found


# --------------------------------------------------------------------------- continuous batching


@dataclass
class Request:
    """A prompt (token ids) and how many tokens to generate for it."""

    id: Any
    prompt: Sequence[int]
    new_tokens: int
    out: list[int] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.out) >= self.new_tokens


@functools.lru_cache(maxsize=1)
def _insert_fn():
    """``insert(cache, one, slot)``: a one-sequence cache copied into row ``slot`` of the batched one (donated)."""

    def insert(cache, one, slot):
        put = lambda big, small: jax.lax.dynamic_update_slice_in_dim(big, small, slot, axis=0)
        return jax.tree.map(put, cache, one)

    return jax.jit(insert, donate_argnums=(0,))


class Batcher:
    """Continuous batching over ``slots`` rows of one KV cache (JetStream's prefill / insert / generate).

    ``insert`` prefills one request on its own and copies its cache into a free slot; ``step``
    decodes one token for every slot at once (idle slots compute too, and are ignored); a
    finished request leaves its slot at once, for the next one. ``run`` drives a queue of requests.
    """

    def __init__(self, params, cfg: Any, slots: int, cache_len: int | None = None):
        positive_ints(slots=slots)
        self.params, self.cfg, self.slots = params, cfg, slots
        self.cache_len = cache_len or cfg.seq_len
        self.cache = init_cache(cfg, slots, self.cache_len)
        device = next(iter(self.cache[0]["k"].devices()))
        # Tokens and positions live on the device, committed like the step's outputs: a step's
        # inputs are the previous step's outputs, with no copy from the host in between.
        self.tokens = jax.device_put(jnp.zeros(slots, jnp.int32), device)
        self.pos = jax.device_put(jnp.zeros(slots, jnp.int32), device)
        self.active: list[Request | None] = [None] * slots
        self._prefill = make_prefill(cfg)
        self._step = make_step(cfg)
        self._insert = _insert_fn()
        self.steps = 0

    def free_slots(self) -> list[int]:
        return [i for i, r in enumerate(self.active) if r is None]

    def insert(self, request: Request, slot: int | None = None) -> int:
        """Prefill ``request`` and put it in ``slot`` (default: the first free one); returns the slot."""
        check_fits(len(request.prompt), request.new_tokens, self.cache_len)
        free = self.free_slots()
        if slot is None:
            if not free:
                raise SlotsFull(
                    f"all {self.slots} slots are decoding (requests "
                    f"{[r.id for r in self.active]}): wait for one to finish (step) or make a Batcher "
                    "with more slots"
                )
            slot = free[0]
        if not isinstance(slot, int) or not 0 <= slot < self.slots:
            raise SlotsFull(f"slot {slot!r} does not exist: this Batcher has slots 0..{self.slots - 1}")
        if self.active[slot] is not None:
            raise SlotsFull(
                f"slot {slot} is still decoding request {self.active[slot].id!r}: pick a free slot "
                f"({free or 'none free now'})"
            )
        n = len(request.prompt)
        tokens = np.zeros((1, bucket(n, self.cache_len)), np.int32)
        tokens[0, :n] = request.prompt
        one = init_cache(self.cfg, 1, self.cache_len)
        tok, _, one = self._prefill(self.params, jnp.asarray(tokens), one, jnp.array([n], jnp.int32))
        self.cache = self._insert(self.cache, one, jnp.int32(slot))
        self.tokens = self.tokens.at[slot].set(tok[0])
        self.pos = self.pos.at[slot].set(n)
        request.out = [int(tok[0])]  # the first token, on the host: the request's time to first token
        self.active[slot] = request
        if request.done:
            self.active[slot] = None
        return slot

    def step(self) -> list[Request]:
        """One decode step for every slot; returns the requests that finished.

        The step's inputs are the previous step's outputs, all on the device. Reading the new
        tokens (``np.asarray``) waits for the step and copies B integers to the host: one sync
        per step, which is what lets a request stream its tokens (and would let it stop at an
        end token). Engines hide it by reading step n's tokens while step n + 1 runs.
        """
        if all(r is None for r in self.active):
            return []
        self.tokens, self.cache, self.pos = self._step(self.params, self.tokens, self.cache, self.pos)
        self.steps += 1
        new = np.asarray(self.tokens)  # device to host: the one sync per step
        finished = []
        for i, r in enumerate(self.active):
            if r is None:
                continue  # an idle slot computes too; its row is overwritten by the next insert
            r.out.append(int(new[i]))
            if r.done:
                finished.append(r)
                self.active[i] = None
        return finished

    def run(
        self, requests: Sequence[Request], on_event: Callable[[str, Request, int], None] | None = None
    ) -> dict[Any, list[int]]:
        """Serve ``requests`` in order through the slots; returns {request id: generated tokens}.

        ``on_event(kind, request, step)`` is told when a request joins ("join") and leaves ("leave").
        """
        for r in requests:
            check_fits(len(r.prompt), r.new_tokens, self.cache_len)
        queue, results = list(requests), {}
        while queue or any(r is not None for r in self.active):
            while queue and self.free_slots():
                r = queue.pop(0)
                self.insert(r)
                if on_event:
                    on_event("join", r, self.steps)
                if r.done:  # a one-token request finishes at its prefill
                    results[r.id] = r.out
                    if on_event:
                        on_event("leave", r, self.steps)
            for r in self.step():
                results[r.id] = r.out
                if on_event:
                    on_event("leave", r, self.steps)
        return results


def one_at_a_time(
    params, cfg: Any, requests: Sequence[Request], *, slots: int = 1, cache_len: int | None = None
) -> dict[Any, list[int]]:
    """The reference for :class:`Batcher`: each request decoded alone, one after another.

    With ``slots`` > 1 each request runs alone in a Batcher of that many slots, through the same
    compiled step as a batched run (the other rows idle). With ``slots=1`` the step is a batch-1
    program: XLA may choose other matmul kernels for 1 row than for 4, and in bf16 the last bit
    can then differ, enough to flip a near tie between two tokens.
    """
    out: dict[Any, list[int]] = {}
    for r in requests:
        out.update(Batcher(params, cfg, slots, cache_len).run([Request(r.id, list(r.prompt), r.new_tokens)]))
    return out


# --------------------------------------------------------------------------- paged attention


def _concrete(x) -> bool:
    return not isinstance(x, jax.core.Tracer)


def check_page_table(page_table, num_pages: int, lengths=None, page_size: int | None = None) -> None:
    """Raise :class:`PageTableError` for an entry outside ``0 .. num_pages - 1``, or too few pages for a length."""
    table = np.asarray(page_table)
    if table.ndim != 2:
        raise PageTableError(f"a page table is (sequences, pages per sequence), got shape {table.shape}")
    bad = np.argwhere((table < 0) | (table >= num_pages))
    if len(bad):
        s, j = bad[0]
        raise PageTableError(
            f"page table entry [{s}, {j}] = {int(table[s, j])} points outside the pool of {num_pages} "
            f"pages (valid: 0..{num_pages - 1}); {len(bad)} bad entries in all. Pad unused entries "
            "with a valid page (0): the length masks them"
        )
    if lengths is not None and page_size:
        need = -(-np.asarray(lengths) // page_size)
        short = np.argwhere(need > table.shape[1]).ravel()
        if len(short):
            raise PageTableError(
                f"sequence {int(short[0])} holds {int(np.asarray(lengths)[short[0]])} tokens, more "
                f"than {table.shape[1]} pages of {page_size}: give it more pages"
            )


def pages_from_cache(k, v, page_size: int, num_pages: int, page_order=None):
    """A page pool and page table holding the contiguous cache ``k``, ``v`` (B, S, H, Dh).

    The pool is (num_pages, page_size, 2H, Dh), keys at even and values at odd heads (the layout
    of ``jax.experimental.pallas.ops.tpu.ragged_paged_attention``); sequence b's j-th block of
    ``page_size`` tokens goes to page ``page_order[b * S // page_size + j]`` (default: in order).
    Returns (pool, page_table (B, S // page_size) int32).
    """
    b, s, h, d = k.shape
    if s % page_size:
        raise ValueError(f"the cache length {s} is not a multiple of page_size={page_size}")
    per_seq = s // page_size
    order = np.arange(b * per_seq) if page_order is None else np.asarray(page_order)
    if len(order) < b * per_seq or len(set(order[: b * per_seq].tolist())) < b * per_seq:
        raise PageTableError(f"{b} sequences of {per_seq} pages need {b * per_seq} distinct pages, got {len(order)}")
    table = order[: b * per_seq].reshape(b, per_seq).astype(np.int32)
    check_page_table(table, num_pages)
    kv = jnp.stack([k, v], axis=3).reshape(b, per_seq, page_size, 2 * h, d)  # heads: k0, v0, k1, v1, ...
    pool = (
        jnp.zeros((num_pages, page_size, 2 * h, d), k.dtype)
        .at[table.reshape(-1)]
        .set(kv.reshape(b * per_seq, page_size, 2 * h, d))
    )
    return pool, jnp.asarray(table)


def contiguous_attention(q, k, v, lengths):
    """One query per sequence against a contiguous cache: q (B, H, Dh), k and v (B, S, KV, Dh), lengths (B,).

    KV divides H: each key/value head serves H // KV query heads (grouped-query attention).
    """
    b, h, d = q.shape
    kv = k.shape[2]
    grouped = q.reshape(b, kv, h // kv, d)  # query heads in groups, one group per key/value head
    scores = jnp.einsum("bkgd,bskd->bkgs", grouped, k, preferred_element_type=jnp.float32) / math.sqrt(d)
    mask = jnp.arange(k.shape[1])[None, None, None, :] < jnp.asarray(lengths)[:, None, None, None]
    probs = jax.nn.softmax(jnp.where(mask, scores, jnp.finfo(jnp.float32).min), axis=-1)
    out = jnp.einsum("bkgs,bskd->bkgd", probs.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return out.reshape(b, h, d)


def paged_attention(q, pool, page_table, lengths):
    """One query per sequence against a paged cache, in plain JAX: gather each sequence's pages, then attend.

    q (B, H, Dh); pool (P, page_size, 2KV, Dh) (keys at even heads, values at odd; KV divides H); page_table
    (B, pages per sequence) int32; lengths (B,) tokens held. Outside ``jit`` an entry outside the
    pool raises :class:`PageTableError`; inside, a sequence with such an entry gets NaN as its
    output (float32 whatever the pool's dtype, int8 or fp8 too), never another page's data.

    The gather builds each sequence's whole cache (B, pages x page_size, ...) as a new array
    before attending: it saves memory held, not bytes read. A paged-attention kernel reads the
    pages where they lie instead.
    """
    if _concrete(page_table):
        check_page_table(page_table, pool.shape[0], lengths if _concrete(lengths) else None, pool.shape[1])
    table = jnp.asarray(page_table)
    pages = jnp.take(pool, table, axis=0, mode="clip")  # (B, n, page_size, 2H, Dh)
    b, n, size, h2, d = pages.shape
    kv = pages.reshape(b, n * size, h2, d)
    out = contiguous_attention(q, kv[:, :, 0::2], kv[:, :, 1::2], lengths)
    outside = jnp.any((table < 0) | (table >= pool.shape[0]), axis=1)  # (B,): a bad entry anywhere in the row
    return jnp.where(outside[:, None, None], jnp.nan, out)


# --------------------------------------------------------------------------- memory kinds


def host_memory(device=None) -> str | None:
    """``"pinned_host"`` if ``device`` has that memory kind (JAX memory spaces), else None."""
    device = device or jax.devices()[0]
    kinds = {m.kind for m in device.addressable_memories()}
    return "pinned_host" if "pinned_host" in kinds else None


def offload(x, memory_kind: str, device=None):
    """``x`` copied to ``memory_kind`` ("pinned_host" or "device") of ``device`` with ``jax.device_put``."""
    device = device or next(iter(x.devices()))
    return jax.device_put(x, SingleDeviceSharding(device, memory_kind=memory_kind))


def host_placement(fn: Callable, *args, device=None) -> tuple[str | None, str]:
    """Compile ``fn`` with its output placed in pinned host memory; (HLO entry layout, "") or (None, why not).

    A buffer in host memory shows as ``S(5)`` in the compiled module's entry layout. Where the
    backend refuses such a program (JAX 0.7.2 on a CPU: "No registered implementation ...
    annotate_device_placement"; JAX 0.10.2 compiles it), the reason comes back instead of an exception.
    """
    device = device or jax.devices()[0]
    if host_memory(device) is None:
        return None, f"{device.device_kind} lists no pinned_host memory"
    try:
        compiled = (
            jax.jit(fn, out_shardings=SingleDeviceSharding(device, memory_kind="pinned_host")).lower(*args).compile()
        )
        jax.block_until_ready(compiled(*args))
    except Exception as err:  # jaxlib's XlaRuntimeError on old versions
        return (
            None,
            f"JAX {jax.__version__} cannot compile a program with a pinned_host output on "
            f"{device.platform.upper()}: {str(err).splitlines()[0][:200]}",
        )
    line = next((ln for ln in compiled.as_text().splitlines() if "entry_computation_layout" in ln), "")
    return line.split("entry_computation_layout=")[-1].split("}}")[0] + "}}" if line else "", ""


# --------------------------------------------------------------------------- sharding

# lm.RULES without FSDP: a decode step must not gather weights over ICI every token (scaling-book,
# inference chapter), so the model dimension stays whole; heads and MLP units split over "tensor".
SERVING_RULES: dict[str, Any] = {
    "batch": ("data", "fsdp"),
    "embed": None,
    "heads": "tensor",
    "kv_heads": "tensor",
    "mlp": "tensor",
    "layers": None,
    "vocab": None,
    "length": None,
    "norm": None,
    "act_embed": None,
}


def cache_spec(mesh, rules: Mapping[str, Any] = SERVING_RULES):
    """The PartitionSpec of one (batch, length, kv_heads, head_dim) cache array: batch and heads split."""
    return lm.spec_for(("batch", "length", "kv_heads", None), rules, mesh)


def serving_shardings(params, cache, mesh, rules: Mapping[str, Any] = SERVING_RULES):
    """(parameter shardings, cache shardings) on ``mesh``: weights by ``lm``'s logical axes, the cache by batch and heads."""
    spec = cache_spec(mesh, rules)
    for leaf in jax.tree.leaves(cache):  # a clear error for a batch or head count that does not divide
        lm.spec_for(("batch", "length", "kv_heads", None), rules, mesh, leaf.shape, "the KV cache")
    return lm.shardings(params, rules, mesh), jax.tree.map(lambda _: NamedSharding(mesh, spec), cache)


# --------------------------------------------------------------------------- a local HTTP endpoint


class Endpoint:
    """A running HTTP server on 127.0.0.1 (from :func:`serve`); ``stop()`` ends it, as does leaving ``with``."""

    def __init__(self, server, thread, timer):
        self._server, self._thread, self._timer = server, thread, timer
        host, port = server.server_address[:2]
        self.url = f"http://{host}:{port}"
        self.requests = 0

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def stop(self) -> None:
        self._timer.cancel()
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(
    complete: Callable[[str, int], str],
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    lifetime_s: float = 120,
    max_tokens: int = 256,
    model: str = "tpututor-lm",
) -> Endpoint:
    """Serve ``complete(prompt, max_tokens) -> text`` at ``POST /v1/completions`` and ``GET /health``,
    on 127.0.0.1 only (IPv4 loopback), for at most ``lifetime_s`` seconds.

    Requests and replies have the shape of the OpenAI completions API that vLLM serves: a reply
    carries ``id``, ``object``, ``created``, ``model``, ``choices`` and ``usage`` (prompt tokens
    counted as characters, lm's tokenizer); an error (a prompt that does not fit, bad JSON) is
    ``{"error": {"message", "type", "param", "code"}}`` with status 400 (404 for an unknown
    route). Requests are served one at a time, in order.
    """
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    if host not in ("127.0.0.1", "localhost"):
        raise ValueError(f"serve() binds the IPv4 loopback interface only, not {host!r}: use host='127.0.0.1'")
    if not lifetime_s or lifetime_s <= 0:
        raise ValueError(f"lifetime_s must be a positive number of seconds, got {lifetime_s!r}")
    lock = threading.Lock()
    endpoint: list[Endpoint] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args) -> None:  # keep the notebook quiet
            pass

        def _reply(self, code: int, body: Mapping[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _error(self, code: int, kind: str, message: str) -> None:
            self._reply(code, {"error": {"message": message, "type": kind, "param": None, "code": code}})

        def do_GET(self) -> None:
            if self.path == "/health":
                self._reply(200, {"status": "ok"})
            else:
                self._error(404, "NotFoundError", f"no route {self.path}: use POST /v1/completions or GET /health")

        def do_POST(self) -> None:
            if self.path != "/v1/completions":
                self._error(404, "NotFoundError", f"no route {self.path}: use POST /v1/completions")
                return
            try:
                size = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(size) or b"{}")
                prompt, n = body["prompt"], int(body.get("max_tokens", 16))
                if not isinstance(prompt, str):
                    raise ValueError("'prompt' must be a string")
                if not 1 <= n <= max_tokens:
                    raise ValueError(f"max_tokens must be 1..{max_tokens}, got {n}")
                with lock:
                    text = complete(prompt, n)
                    endpoint[0].requests += 1
                    number = endpoint[0].requests
            except (KeyError, ValueError, TypeError) as err:
                self._error(400, "BadRequestError", f"{type(err).__name__}: {err}")
                return
            self._reply(
                200,
                {
                    "id": f"cmpl-{number}",
                    "object": "text_completion",
                    "created": int(time.time()),
                    "model": model,
                    "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": "length"}],
                    "usage": {"prompt_tokens": len(prompt), "completion_tokens": n, "total_tokens": len(prompt) + n},
                },
            )

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True, name="tpututor-decode-serve"
    )
    timer = threading.Timer(lifetime_s, server.shutdown)
    timer.daemon = True
    endpoint.append(Endpoint(server, thread, timer))
    thread.start()
    timer.start()
    return endpoint[0]
